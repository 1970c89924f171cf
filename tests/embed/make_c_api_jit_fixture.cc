// Writes the executables the C API test counts JIT work on: @main(x: f32[3]) -> x + x through
// one JIT kernel, to argv[1] as kernel IR only and to argv[2] with that kernel also compiled
// ahead of time for this host (`kiln compile --target native`).
#include <cstdio>

#include "jit/aot_compile.h"
#include "jit/compute.h"
#include "jit/kernel_ir_serialize.h"
#include "vm/builder.h"

namespace {

void Build(kiln::ExecutableBuilder& b) {
  using namespace kiln;
  jit::Operand x{DType::kF32, 1, {}};
  jit::Kernel add = jit::ElementwiseBinary("add", x, x, DType::kF32,
                                           [](jit::Expr a, jit::Expr c) { return a + c; });
  KernelDef def{"add", {DType::kF32, DType::kF32}, {DType::kF32}};
  def.payload_format = jit::kPayloadFormat;
  def.payload = jit::SerializeKernel(add);
  int k = b.AddKernel(def);
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"x", DType::kF32, {{3, ""}}, false});
  f.AddResult(ValueSpec{"y", DType::kF32, {{3, ""}}, false});
  f.LoadConsti(1, 12);
  f.AllocStorage(2, 1);
  f.AllocTensor(3, 2, 0, DType::kF32, {3});
  f.InvokeKernel(k, {0, 0}, {3});
  f.Ret({3});
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc != 3) return 2;
  ExecutableBuilder plain("c api jit fixture");
  Build(plain);
  ExecutableBuilder aot("c api jit fixture, code for this host");
  Build(aot);
  auto target = jit::ResolveCodeTarget("native");
  if (!target.ok()) {
    std::fprintf(stderr, "%s\n", target.status().ToString().c_str());
    return 1;
  }
  auto code = jit::CompileCodeTarget(*target, aot.kernels(), aot.shape_functions(), 1);
  if (!code.ok()) {
    std::fprintf(stderr, "%s\n", code.status().ToString().c_str());
    return 1;
  }
  aot.AddAotTarget(std::move(*code));
  for (auto [b, path] : {std::pair{&plain, argv[1]}, std::pair{&aot, argv[2]}}) {
    Status s = b->WriteFile(path);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}
