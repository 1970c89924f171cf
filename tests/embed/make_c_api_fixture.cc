// Writes the executable the C API test runs (argv[1]): @main(x: f32[n, 3], k: i64[]) ->
// (k, x, w), @spin() (loops forever) and @fail() (executes fatal). No kernels, so it runs
// without a kernel provider.
#include <cstdio>

#include "tests/jit/test_programs.h"
#include "vm/builder.h"

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc != 2) return 2;
  ExecutableBuilder b("c api fixture");
  jit::testing::AddPassThroughProgram(b);
  FunctionBuilder& fail = b.AddFunction("fail");
  fail.Fatal(b.AddString("fail was called"));
  Status s = b.WriteFile(argv[1]);
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
