// A program that leaks a kiln::Runtime (never destroys it) and returns from main while its
// background compiler is busy: tests/embed/exit_test runs it several times and expects a clean
// exit each time. exit() must not run LLVM's static destructors under a compile in progress
// (BackgroundCompiler's exit hook stops the compiler first).
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "embed/runtime.h"
#include "tests/jit/test_programs.h"
#include "vm/builder.h"

// Never destroyed, but reachable from these globals (external linkage, so the stores stay):
// LeakSanitizer (the ASan run) reports only unreachable memory, and this program's subject is
// exit with a live runtime, not a leak.
std::shared_ptr<kiln::Runtime>* g_leaked_runtime = nullptr;
kiln::Context* g_leaked_context = nullptr;

namespace {

constexpr int64_t kStorageBytes = 1 << 16;

// @main(x: f32[n, m]) -> exp(x), through one JIT kernel (vector math: a compile of tens of ms).
kiln::StatusOr<std::vector<uint8_t>> Program() {
  kiln::ExecutableBuilder b("leak at exit");
  kiln::jit::testing::AddExpProgram(b, kStorageBytes);
  return b.Finish();
}

}  // namespace

int main() {
  using namespace kiln;
  RuntimeOptions options;
  options.num_threads = 1;
  options.jit_cache = RuntimeOptions::kJitCacheOff;
  options.dispatch.specialize_after = 1;  // every shape queues a compile at once
  options.dispatch.bucketing = jit::Bucketing::kExact;
  options.dispatch.min_share = 0;
  options.dispatch.compile_cpu_share = 0;  // no budget: the compiler is busy until exit
  auto runtime = Runtime::Create(options);
  auto bytes = Program();
  if (!runtime.ok() || !bytes.ok()) return 2;
  // Leaked on purpose: its compiler thread is still compiling when main returns.
  auto* leaked = g_leaked_runtime = new std::shared_ptr<Runtime>(*runtime);
  auto exe = (*leaked)->LoadBytes(bytes->data(), bytes->size());
  if (!exe.ok()) return 3;
  auto ctx = (*leaked)->NewContext(*exe);
  if (!ctx.ok()) return 4;
  std::vector<float> x(16 * 16, 0.5f);
  for (int64_t m = 1; m <= 16; ++m) {
    Tensor t = Tensor::Wrap(x.data(), DType::kF32, Shape{2, m});
    auto y = (*ctx)->Invoke("main", {t});
    if (!y.ok() || std::fabs((*y)[0].data_as<float>()[0] - std::exp(0.5f)) > 1e-5f) return 5;
  }
  g_leaked_context = ctx->release();  // never destroyed either: the runtime stays referenced
  std::printf("returning from main with %lld compiles queued or running\n",
              static_cast<long long>(16 - (*leaked)->stats().dispatch.specializations));
  return 0;
}
