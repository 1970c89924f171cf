// JIT benchmarks: compile latency, elementwise bandwidth vs memcpy, vector math vs scalar libm,
// and the tiled matmul next to oneDNN's sgemm, all in one run.
//   bazel run -c opt //tests/jit/bench:jit_benchmark -- --benchmark_repetitions=5
//       --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>
#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <memory>
#include <vector>

#include "jit/compute.h"
#include "jit/engine.h"
#include "tests/jit/bench/reference_loops.h"

namespace kiln::jit {
namespace {

Engine& SharedEngine() {
  static Engine* engine = Engine::Create().value().release();
  return *engine;
}

KernelFn CompileOrDie(const Kernel& k) {
  auto fn = SharedEngine().GetOrCompile(k);
  if (!fn.ok()) {
    std::fprintf(stderr, "%s\n", fn.status().ToString().c_str());
    std::abort();
  }
  return *fn;
}

// 64-byte-aligned, pre-faulted f32 buffer.
struct Floats {
  explicit Floats(size_t n, float v = 1.0f)
      : n(n), p(static_cast<float*>(std::aligned_alloc(64, ((n * 4 + 63) / 64) * 64))) {
    for (size_t i = 0; i < n; ++i) p[i] = v + static_cast<float>(i % 17) * 0.03125f;
  }
  ~Floats() { std::free(p); }
  size_t n;
  float* p;
};

// Calls a kernel whose buffers are all rank-1 of `n` elements.
void Call1D(KernelFn fn, const std::vector<float*>& bufs, int64_t n) {
  std::vector<void*> data(bufs.begin(), bufs.end());
  std::vector<const int64_t*> shapes(bufs.size(), &n);
  fn(data.data(), shapes.data(), nullptr, nullptr);
}

// ---- Compile latency (fresh engine each time: a cold compile) ------------------------------

void CompileCold(benchmark::State& state, const Kernel& kernel) {
  for (auto _ : state) {
    state.PauseTiming();
    auto engine = Engine::Create().value();
    state.ResumeTiming();
    if (!engine->GetOrCompile(kernel).ok()) state.SkipWithError("compile failed");
    state.PauseTiming();
    engine.reset();
    state.ResumeTiming();
  }
}

// A fresh engine whose on-disk object cache already holds the kernel: what a restarted process
// pays instead of compiling.
void CompileFromObjectCache(benchmark::State& state, const Kernel& kernel) {
  std::string dir = std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") +
                    "/kiln_bench_objcache_" + std::to_string(getpid());
  EngineOptions options;
  options.object_cache_dir = dir;
  {
    auto warm = Engine::Create(options).value();
    if (!warm->GetOrCompile(kernel).ok()) return state.SkipWithError("compile failed");
  }
  for (auto _ : state) {
    state.PauseTiming();
    auto engine = Engine::Create(options).value();
    state.ResumeTiming();
    if (!engine->GetOrCompile(kernel).ok()) state.SkipWithError("load failed");
    state.PauseTiming();
    if (engine->stats().object_cache_hits != 1) state.SkipWithError("not served from the cache");
    engine.reset();
    state.ResumeTiming();
  }
  std::system(("rm -rf '" + dir + "'").c_str());
}

void BM_CompileElementwiseChain(benchmark::State& state) {
  Operand x{DType::kF32, 2, {}};
  CompileCold(state, Elementwise("chain", {x, x, x}, DType::kF32, [](const std::vector<Expr>& v) {
                return Tanh(v[0] * v[1] + v[2]) * 0.5 + Exp(v[0]);
              }));
}
BENCHMARK(BM_CompileElementwiseChain)->Unit(benchmark::kMillisecond)->Iterations(10);

void BM_CompileReduceSum(benchmark::State& state) {
  CompileCold(state, ReduceKernel("sum", Reduction::kSum, DType::kF32, 3, {2}, true).value());
}
BENCHMARK(BM_CompileReduceSum)->Unit(benchmark::kMillisecond)->Iterations(10);

void BM_CompileMatmul(benchmark::State& state) { CompileCold(state, MatmulKernel("mm")); }
BENCHMARK(BM_CompileMatmul)->Unit(benchmark::kMillisecond)->Iterations(10);

void BM_CachedElementwiseChain(benchmark::State& state) {
  Operand x{DType::kF32, 2, {}};
  CompileFromObjectCache(state, Elementwise("chain", {x, x, x}, DType::kF32, [](const std::vector<Expr>& v) {
                           return Tanh(v[0] * v[1] + v[2]) * 0.5 + Exp(v[0]);
                         }));
}
BENCHMARK(BM_CachedElementwiseChain)->Unit(benchmark::kMillisecond)->Iterations(10);

void BM_CachedReduceSum(benchmark::State& state) {
  CompileFromObjectCache(state, ReduceKernel("sum", Reduction::kSum, DType::kF32, 3, {2}, true).value());
}
BENCHMARK(BM_CachedReduceSum)->Unit(benchmark::kMillisecond)->Iterations(10);

void BM_CachedMatmul(benchmark::State& state) { CompileFromObjectCache(state, MatmulKernel("mm")); }
BENCHMARK(BM_CachedMatmul)->Unit(benchmark::kMillisecond)->Iterations(10);

// ---- Elementwise add vs memcpy (bytes moved per second), 1 and 2 threads ------------------

constexpr int64_t kBig = 8 << 20;  // 8 Mi floats = 32 MiB per buffer (beyond the L3 share)

void BM_ElementwiseAddF32(benchmark::State& state) {
  omp_set_num_threads(static_cast<int>(state.range(0)));
  Operand x{DType::kF32, 1, {BroadcastDim::kSame}};
  KernelFn fn = CompileOrDie(ElementwiseBinary("add", x, x, DType::kF32, [](Expr a, Expr b) { return a + b; }));
  Floats a(kBig), b(kBig), c(kBig, 0);
  for (auto _ : state) Call1D(fn, {a.p, b.p, c.p}, kBig);
  state.SetBytesProcessed(state.iterations() * kBig * 4 * 3);  // 2 reads + 1 write
}
BENCHMARK(BM_ElementwiseAddF32)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MemcpySameBytes(benchmark::State& state) {
  int threads = static_cast<int>(state.range(0));
  Floats a(kBig), c(kBig, 0);
  for (auto _ : state) {
#pragma omp parallel for num_threads(threads)
    for (int t = 0; t < threads; ++t) {
      int64_t chunk = kBig / threads;
      std::memcpy(c.p + t * chunk, a.p + t * chunk, chunk * 4);
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kBig * 4 * 2);  // 1 read + 1 write
}
BENCHMARK(BM_MemcpySameBytes)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Vector math: JIT (libmvec) vs a scalar libm loop, 1 thread ---------------------------

constexpr int64_t kMath = 1 << 20;

void JitUnary(benchmark::State& state, Expr (*op)(Expr)) {
  omp_set_num_threads(1);
  KernelFn fn = CompileOrDie(ElementwiseUnary("math", DType::kF32, DType::kF32, 1, op));
  Floats a(kMath, -2.0f), c(kMath, 0);
  for (auto _ : state) Call1D(fn, {a.p, c.p}, kMath);
  state.SetItemsProcessed(state.iterations() * kMath);
}

void ScalarUnary(benchmark::State& state, float (*op)(float)) {
  Floats a(kMath, -2.0f), c(kMath, 0);
  for (auto _ : state) {
    for (int64_t i = 0; i < kMath; ++i) c.p[i] = op(a.p[i]);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * kMath);
}

void BM_JitExp(benchmark::State& s) { JitUnary(s, [](Expr x) { return Exp(x); }); }
void BM_LibmExpf(benchmark::State& s) { ScalarUnary(s, [](float x) { return std::exp(x); }); }
void BM_JitTanh(benchmark::State& s) { JitUnary(s, [](Expr x) { return Tanh(x); }); }
void BM_LibmTanhf(benchmark::State& s) { ScalarUnary(s, [](float x) { return std::tanh(x); }); }
void BM_JitErf(benchmark::State& s) { JitUnary(s, [](Expr x) { return Erf(x); }); }
void BM_LibmErff(benchmark::State& s) { ScalarUnary(s, [](float x) { return std::erf(x); }); }
BENCHMARK(BM_JitExp)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LibmExpf)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JitTanh)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LibmTanhf)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JitErf)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LibmErff)->Unit(benchmark::kMicrosecond);

// ---- Matmul: kiln's tiled kernel vs oneDNN sgemm, same sizes, same thread count ------------

void SetFlops(benchmark::State& state, int64_t n) {
  state.counters["GFLOP/s"] = benchmark::Counter(2.0 * n * n * n * state.iterations() / 1e9,
                                                 benchmark::Counter::kIsRate);
}

void BM_KilnMatmul(benchmark::State& state) {
  int64_t n = state.range(0);
  omp_set_num_threads(static_cast<int>(state.range(1)));
  KernelFn fn = CompileOrDie(MatmulKernel("mm"));
  Floats a(n * n), b(n * n), c(n * n, 0);
  int64_t sa[2] = {n, n}, sb[2] = {n, n}, sc[2] = {n, n};
  void* bufs[3] = {a.p, b.p, c.p};
  const int64_t* shapes[3] = {sa, sb, sc};
  for (auto _ : state) fn(bufs, shapes, nullptr, nullptr);
  SetFlops(state, n);
}

void BM_OneDnnSgemm(benchmark::State& state) {
  int64_t n = state.range(0);
  omp_set_num_threads(static_cast<int>(state.range(1)));
  Floats a(n * n), b(n * n), c(n * n, 0);
  for (auto _ : state) {
    if (dnnl_sgemm('N', 'N', n, n, n, 1.0f, a.p, n, b.p, n, 0.0f, c.p, n) != dnnl_success) {
      state.SkipWithError("dnnl_sgemm failed");
    }
  }
  SetFlops(state, n);
}

void MatmulArgs(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) {
    for (int n : {256, 512, 1024}) b->Args({n, threads});
  }
}
BENCHMARK(BM_KilnMatmul)->Apply(MatmulArgs)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OneDnnSgemm)->Apply(MatmulArgs)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- Row softmax and layer norm: JIT kernels vs the -O3 -march=native C++ loops, 1 thread ----

// out[r, :] = softmax(in[r, :]). Buffers: in, out (f32, rank 2).
Kernel SoftmaxRowKernel() {
  Buffer in = Buffer::Param("in", DType::kF32, 2), out = Buffer::Param("out", DType::kF32, 2);
  Var r("r"), c("c"), j("j"), k("k");
  Var m("m", DType::kF32), inv("inv", DType::kF32);
  Expr cols = DimOf(in, 1);
  Stmt row = Let(m, ReduceMax({{j, cols}}, Load(in, {r, j})),
                 Let(inv, FloatImm(1.0) / Sum({{k, cols}}, Exp(Load(in, {r, k}) - m)),
                     For(c, cols, ForKind::kVectorized,
                         Store(out, {r, c}, Exp(Load(in, {r, c}) - m) * inv))));
  return Kernel{"softmax_rows", {in, out}, {}, For(r, DimOf(in, 0), ForKind::kParallel, row)};
}

// out[r, :] = (in[r, :] - mean) * rstd * gamma + beta. Buffers: in, gamma, beta, out.
Kernel LayerNormRowKernel(float epsilon) {
  Buffer in = Buffer::Param("in", DType::kF32, 2), out = Buffer::Param("out", DType::kF32, 2);
  Buffer gamma = Buffer::Param("gamma", DType::kF32, 1), beta = Buffer::Param("beta", DType::kF32, 1);
  Var r("r"), c("c"), j("j"), k("k");
  Var mean("mean", DType::kF32), rstd("rstd", DType::kF32);
  Expr cols = DimOf(in, 1);
  Expr n = Cast(DType::kF32, cols);
  Expr centered = Load(in, {r, k}) - mean;
  Stmt row = Let(mean, Sum({{j, cols}}, Load(in, {r, j})) / n,
                 Let(rstd, Rsqrt(Sum({{k, cols}}, centered * centered) / n + FloatImm(epsilon)),
                     For(c, cols, ForKind::kVectorized,
                         Store(out, {r, c},
                               MulAdd((Load(in, {r, c}) - mean) * rstd, Load(gamma, {c}),
                                      Load(beta, {c}))))));
  return Kernel{"layer_norm_rows", {in, gamma, beta, out}, {},
                For(r, DimOf(in, 0), ForKind::kParallel, row)};
}

// Reassociated f32 sums over a row of up to 1024 and vector exp (4 ulp): 1e-4 relative is
// well above both and far below any indexing mistake.
constexpr double kRowTolerance = 1e-4;

void BM_JitSoftmaxRows(benchmark::State& state) {
  omp_set_num_threads(1);
  int64_t rows = state.range(0), cols = state.range(1);
  KernelFn fn = CompileOrDie(SoftmaxRowKernel());
  Floats in(rows * cols, -1.0f), out(rows * cols, 0);
  int64_t shape[2] = {rows, cols};
  void* bufs[2] = {in.p, out.p};
  const int64_t* shapes[2] = {shape, shape};
  fn(bufs, shapes, nullptr, nullptr);
  Floats want(rows * cols, 0);
  bench::SoftmaxRows(in.p, want.p, rows, cols);
  if (bench::MaxRelError(out.p, want.p, rows * cols) > kRowTolerance) {
    return state.SkipWithError("softmax result is wrong");
  }
  for (auto _ : state) fn(bufs, shapes, nullptr, nullptr);
  state.SetItemsProcessed(state.iterations() * rows * cols);
}

void BM_CppSoftmaxRows(benchmark::State& state) {
  int64_t rows = state.range(0), cols = state.range(1);
  Floats in(rows * cols, -1.0f), out(rows * cols, 0);
  for (auto _ : state) {
    bench::SoftmaxRows(in.p, out.p, rows, cols);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
}

void BM_JitLayerNormRows(benchmark::State& state) {
  omp_set_num_threads(1);
  int64_t rows = state.range(0), cols = state.range(1);
  KernelFn fn = CompileOrDie(LayerNormRowKernel(1e-5f));
  Floats in(rows * cols, -1.0f), gamma(cols), beta(cols, 0.5f), out(rows * cols, 0);
  int64_t shape[2] = {rows, cols}, vec[1] = {cols};
  void* bufs[4] = {in.p, gamma.p, beta.p, out.p};
  const int64_t* shapes[4] = {shape, vec, vec, shape};
  fn(bufs, shapes, nullptr, nullptr);
  Floats want(rows * cols, 0);
  bench::LayerNormRows(in.p, gamma.p, beta.p, want.p, rows, cols, 1e-5f);
  if (bench::MaxRelError(out.p, want.p, rows * cols) > kRowTolerance) {
    return state.SkipWithError("layer norm result is wrong");
  }
  for (auto _ : state) fn(bufs, shapes, nullptr, nullptr);
  state.SetItemsProcessed(state.iterations() * rows * cols);
}

void BM_CppLayerNormRows(benchmark::State& state) {
  int64_t rows = state.range(0), cols = state.range(1);
  Floats in(rows * cols, -1.0f), gamma(cols), beta(cols, 0.5f), out(rows * cols, 0);
  for (auto _ : state) {
    bench::LayerNormRows(in.p, gamma.p, beta.p, out.p, rows, cols, 1e-5f);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * rows * cols);
}

// Attention-score rows (seq 128) and wide rows; BERT-like hidden 256 and 1024.
BENCHMARK(BM_JitSoftmaxRows)->Args({512, 128})->Args({128, 1024})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CppSoftmaxRows)->Args({512, 128})->Args({128, 1024})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_JitLayerNormRows)->Args({128, 256})->Args({512, 1024})->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CppLayerNormRows)->Args({128, 256})->Args({512, 1024})->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace kiln::jit

BENCHMARK_MAIN();
