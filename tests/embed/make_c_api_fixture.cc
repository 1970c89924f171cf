// Writes the executables the C API test runs: argv[1] @main(x: f32[n, 3], k: i64[]) -> (k, x,
// w), @spin() (loops forever) and @fail() (executes fatal), no kernels, so it runs without a
// kernel provider; argv[2] @main(x: f32[3]) -> x + x through a region of the unregistered
// vendor "acme" that `kiln compile --tune` gave to its fallback (the load policy's options).
#include <cstdio>

#include "tests/jit/test_programs.h"
#include "vm/builder.h"

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc != 3) return 2;
  ExecutableBuilder b("c api fixture");
  jit::testing::AddPassThroughProgram(b);
  FunctionBuilder& fail = b.AddFunction("fail");
  fail.Fatal(b.AddString("fail was called"));
  ExecutableBuilder tuned("c api fixture, a tuned region of an absent vendor");
  jit::testing::AddTunedFallbackProgram(tuned, "acme");
  Status s = b.WriteFile(argv[1]);
  if (s.ok()) s = tuned.WriteFile(argv[2]);
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}
