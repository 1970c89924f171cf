// VM micro-benchmarks: dispatch cost, invoke_kernel overhead, heap allocations per
// instruction in steady state, and load time of an executable with 100 MB of constants.
//   bazel run -c opt //tests/vm:vm_benchmark -- --benchmark_repetitions=5
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "tests/vm/test_programs.h"

// ---- Counting every heap allocation in this process (glibc: forward to __libc_*). ----------
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
}
static std::atomic<uint64_t> g_heap_allocs{0};
extern "C" void* malloc(size_t n) {
  g_heap_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
extern "C" void* calloc(size_t n, size_t m) {
  g_heap_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(n, m);
}
extern "C" void* realloc(void* p, size_t n) {
  g_heap_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
extern "C" void* aligned_alloc(size_t a, size_t n) {
  g_heap_allocs.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(a, n);
}
extern "C" int posix_memalign(void** p, size_t a, size_t n) {
  g_heap_allocs.fetch_add(1, std::memory_order_relaxed);
  *p = __libc_memalign(a, n);
  return *p ? 0 : ENOMEM;
}

namespace kiln::testing {
namespace {

constexpr int kChain = 1000;

std::unique_ptr<Context> MakeContext(ExecutableBuilder& b) {
  auto ctx = Context::Create(LoadOrDie(b));
  if (!ctx.ok()) std::abort();
  return std::move(*ctx);
}

void RunLoop(benchmark::State& state, Context& ctx, const std::vector<Tensor>& inputs) {
  std::vector<Tensor> outputs;
  outputs.reserve(4);
  uint64_t instructions = 0;
  for (auto _ : state) {
    Status s = ctx.Invoke(0, inputs, &outputs);
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
    instructions += ctx.instructions_executed();
  }
  state.counters["ns_per_instr"] = benchmark::Counter(
      static_cast<double>(instructions), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetItemsProcessed(static_cast<int64_t>(instructions));
}

// 1000 x `move` then ret: the cost of dispatching the simplest instruction.
void BM_DispatchMove(benchmark::State& state) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(Scalar("x", DType::kI64));
  f.AddResult(Scalar("x", DType::kI64));
  for (int i = 0; i < kChain; ++i) f.Move(1 + i % 7, i % 7);
  f.Ret({0});
  auto ctx = MakeContext(b);
  RunLoop(state, *ctx, {I64Scalar(1)});
}
BENCHMARK(BM_DispatchMove);

// move / goto pairs: a jump after every move (forward, so no deadline bookkeeping).
void BM_DispatchMoveGoto(benchmark::State& state) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(Scalar("x", DType::kI64));
  f.AddResult(Scalar("x", DType::kI64));
  for (int i = 0; i < kChain / 2; ++i) {
    Label next = f.NewLabel();
    f.Move(1, 0);
    f.Goto(next);
    f.Bind(next);
  }
  f.Ret({0});
  auto ctx = MakeContext(b);
  RunLoop(state, *ctx, {I64Scalar(1)});
}
BENCHMARK(BM_DispatchMoveGoto);

// A backward move/goto loop, stopped by a deadline: dispatch plus the deadline bookkeeping.
void BM_DispatchLoopWithDeadline(benchmark::State& state) {
  ExecutableBuilder b;
  FunctionBuilder& f = b.AddFunction("main");
  Label top = f.NewLabel();
  f.Bind(top);
  f.Move(1, 0);
  f.Goto(top);
  f.set_register_count(2);
  auto ctx = MakeContext(b);
  uint64_t instructions = 0;
  std::vector<Tensor> outputs;
  for (auto _ : state) {
    InvokeOptions options;
    options.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(2);
    Status s = ctx->Invoke(0, {}, &outputs, options);
    if (s.code() != StatusCode::kDeadlineExceeded) state.SkipWithError("expected a deadline");
    instructions += ctx->instructions_executed();
  }
  state.counters["ns_per_instr"] = benchmark::Counter(
      static_cast<double>(instructions), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_DispatchLoopWithDeadline)->Iterations(200);

// 1000 x invoke_kernel of an empty kernel with 3 tensor operands.
void BM_InvokeKernelEmpty3(benchmark::State& state) {
  ExecutableBuilder b;
  int k = b.AddKernel({"empty", {DType::kF32, DType::kF32}, {DType::kF32}});
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(ValueSpec{"a", DType::kF32, {{16, ""}}, false});
  f.AddParam(ValueSpec{"b", DType::kF32, {{16, ""}}, false});
  f.AddParam(ValueSpec{"c", DType::kF32, {{16, ""}}, false});
  f.AddResult(ValueSpec{"c", DType::kF32, {{16, ""}}, false});
  for (int i = 0; i < kChain; ++i) f.InvokeKernel(k, {0, 1}, {2});
  f.Ret({2});
  auto ctx = MakeContext(b);
  float a[16] = {}, bb[16] = {}, c[16] = {};
  RunLoop(state, *ctx, {Tensor::Wrap(a, DType::kF32, Shape{16}), Tensor::Wrap(bb, DType::kF32, Shape{16}),
                        Tensor::Wrap(c, DType::kF32, Shape{16})});
}
BENCHMARK(BM_InvokeKernelEmpty3);

// The quickstart-style loop (kernels, allocation, calls, branches): heap allocations per
// instruction after warm-up (all storage and register objects come from pools).
void BM_SteadyStateHeapAllocs(benchmark::State& state) {
  ExecutableBuilder b;
  BuildSumLoop(b, AddLoopKernels(b));
  auto ctx = MakeContext(b);
  std::vector<Tensor> inputs = {I64Scalar(1000)}, outputs;
  for (int i = 0; i < 3; ++i) (void)ctx->Invoke(0, inputs, &outputs);  // warm-up
  uint64_t allocs = 0, instructions = 0;
  for (auto _ : state) {
    uint64_t before = g_heap_allocs.load();
    Status s = ctx->Invoke(0, inputs, &outputs);
    allocs += g_heap_allocs.load() - before;
    instructions += ctx->instructions_executed();
    if (!s.ok()) state.SkipWithError(s.ToString().c_str());
  }
  state.counters["heap_allocs_per_instr"] = static_cast<double>(allocs) / instructions;
  state.counters["heap_allocs_per_invoke"] = static_cast<double>(allocs) / state.iterations();
  state.counters["ns_per_instr"] = benchmark::Counter(
      static_cast<double>(instructions), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_SteadyStateHeapAllocs);

long RssKiB() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  }
  return -1;
}

// Loading an executable with 100 MB of constants (10 x 10 MB) from a warm page cache.
void BM_Load100MBConstants(benchmark::State& state) {
  static std::string path = [] {
    std::string p = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                    "/kiln_bench_100mb_" + std::to_string(getpid()) + ".kiln";
    ExecutableBuilder b;
    std::vector<float> data(10 * 1024 * 1024 / 4, 0.5f);
    for (int i = 0; i < 10; ++i) {
      b.AddConstant("w" + std::to_string(i), DType::kF32, {static_cast<int64_t>(data.size())},
                    data.data(), data.size() * 4);
    }
    FunctionBuilder& f = b.AddFunction("main");
    f.AddResult(ValueSpec{"w", DType::kF32, {{static_cast<int64_t>(data.size()), ""}}, false});
    f.LoadConst(0, 9);
    f.Ret({0});
    if (!b.WriteFile(p).ok()) std::abort();
    return p;
  }();
  LoadOptions options;
  options.prefetch_constants = state.range(0) != 0;
  { auto warm = Executable::LoadFile(path, options); }  // page cache now warm
  long rss_before = RssKiB(), rss_after = 0;
  for (auto _ : state) {
    auto exe = Executable::LoadFile(path, options);
    if (!exe.ok()) state.SkipWithError(exe.status().ToString().c_str());
    state.PauseTiming();
    rss_after = RssKiB();
    state.ResumeTiming();
  }
  state.counters["rss_growth_MiB"] = (rss_after - rss_before) / 1024.0;
  state.counters["file_MiB"] = 100;
}
BENCHMARK(BM_Load100MBConstants)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// RSS of N contexts over one executable with 100 MB of constants, each having run the model
// once (touching every constant page): constants are mapped once and shared, so N contexts
// should cost little more than one.
void BM_ContextsMemory(benchmark::State& state) {
  static std::string path = [] {
    std::string p = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                    "/kiln_bench_ctx_" + std::to_string(getpid()) + ".kiln";
    ExecutableBuilder b;
    std::vector<float> data(25 * 1024 * 1024, 0.25f);  // 100 MB
    int c = b.AddConstant("w", DType::kF32, {static_cast<int64_t>(data.size())}, data.data(),
                          data.size() * 4);
    int k = b.AddKernel({"touch", {DType::kF32}, {DType::kF32}});
    FunctionBuilder& f = b.AddFunction("main");
    f.AddResult(ValueSpec{"s", DType::kF32, {}, false});
    f.LoadConst(0, c);
    EmitAlloc(f, 1, 5, DType::kF32, {});
    f.InvokeKernel(k, {0}, {1});
    f.Ret({1});
    if (!b.WriteFile(p).ok()) std::abort();
    return p;
  }();
  auto kernels = std::make_shared<TestKernelProvider>();
  kernels->Add("touch", [](const Tensor* const* args, int, int) {  // reads every constant page
    const float* w = args[0]->data_as<float>();
    float s = 0;
    for (int64_t i = 0; i < args[0]->NumElements(); i += 1024) s += w[i];
    *args[1]->data_as<float>() = s;
    return Status::Ok();
  });
  LoadOptions options;
  options.kernels = kernels;
  int n = static_cast<int>(state.range(0));
  long before = 0, after = 0;
  for (auto _ : state) {
    before = RssKiB();
    auto exe = Executable::LoadFile(path, options);
    if (!exe.ok()) return state.SkipWithError(exe.status().ToString().c_str());
    std::vector<std::unique_ptr<Context>> contexts;
    for (int i = 0; i < n; ++i) {
      contexts.push_back(std::move(*Context::Create(*exe)));
      if (!contexts.back()->Invoke("main", {}).ok()) return state.SkipWithError("run failed");
    }
    after = RssKiB();
  }
  state.counters["rss_MiB"] = (after - before) / 1024.0;
}
BENCHMARK(BM_ContextsMemory)->Arg(1)->Arg(16)->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln::testing

BENCHMARK_MAIN();
