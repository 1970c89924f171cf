// Writes the executable the C API test runs (argv[1]): @main(x: f32[n, 3], k: i64[]) ->
// (k, x, w), @spin() (loops forever) and @fail() (executes fatal). No kernels, so it runs
// without a kernel provider.
#include <cstdio>

#include "vm/builder.h"

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc != 2) return 2;
  ExecutableBuilder b("c api fixture");
  float w[2] = {0.5f, -1.5f};
  int c = b.AddConstant("w", DType::kF32, {2}, w, sizeof(w));
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{-1, "n"}, {3, ""}}, false});
  f.AddParam(ValueSpec{"k", DType::kI64, {}, false});
  f.AddResult(ValueSpec{"k", DType::kI64, {}, false});
  f.AddResult(ValueSpec{"x", DType::kF32, {{-1, "n"}, {3, ""}}, false});
  f.AddResult(ValueSpec{"w", DType::kF32, {{2, ""}}, false});
  f.LoadConst(2, c);
  f.Ret({1, 0, 2});
  FunctionBuilder& spin = b.AddFunction("spin");
  Label top = spin.NewLabel();
  spin.Bind(top);
  spin.Move(1, 0);
  spin.Goto(top);
  spin.set_register_count(2);
  FunctionBuilder& fail = b.AddFunction("fail");
  fail.Fatal(b.AddString("fail was called"));
  MetadataDef meta;
  meta.entry = "main";
  b.SetMetadata(meta);
  Status s = b.WriteFile(argv[1]);
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
