// Writes the executables the C API test counts JIT work on: @main(x: f32[3]) -> x + x through
// one JIT kernel, to argv[1] as kernel IR only and to argv[2] with that kernel also compiled
// ahead of time for this host (`kiln compile --target native`).
#include <cstdio>

#include "jit/aot_compile.h"
#include "tests/jit/test_programs.h"
#include "vm/builder.h"

int main(int argc, char** argv) {
  using namespace kiln;
  if (argc != 3) return 2;
  ExecutableBuilder plain("c api jit fixture");
  jit::testing::AddTwicePlusProgram(plain);
  ExecutableBuilder aot("c api jit fixture, code for this host");
  jit::testing::AddTwicePlusProgram(aot);
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
