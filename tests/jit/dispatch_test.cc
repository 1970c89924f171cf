// Tests for jit/dispatch: hot-shape specialization, the bounded table, bucket hints, concurrency,
// the first tier and its replacement, bucketing of varying dims, the payback rule over a sweep,
// bucket representatives, and the startup compiler's WaitIdle beside concurrent submits.
#define BOOST_TEST_MODULE dispatch_test
#include "jit/dispatch.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/epoch.h"
#include "jit/compute.h"
#include "jit/kernel_ir_serialize.h"
#include "jit/kernel_provider.h"

namespace kiln::jit {
namespace {

// Leaked on purpose (as tests/jit/test_util.cc does): destroying an LLJIT during static
// destruction races with LLVM's own static teardown.
std::shared_ptr<Engine> TestEngine() {
  static auto* engine = [] {
    auto e = Engine::Create();
    if (!e.ok()) throw std::runtime_error(e.status().ToString());
    return new std::shared_ptr<Engine>(std::move(*e));
  }();
  return *engine;
}

// The configuration the exact-shape tests below pin: generic variants optimized from the start
// (no first tier) and one entry per shape (no bucketing of varying dims).
// Every hot shape is specialized whatever its kernel's share of the run time (no payback rule).
JitProviderOptions ExactOptions() {
  JitProviderOptions options;
  options.dispatch.tiering = false;
  options.dispatch.bucketing = Bucketing::kExact;
  options.dispatch.min_share = 0;
  options.dispatch.payback = 0;
  return options;
}

Kernel AddKernel() {
  return ElementwiseBinary("add", {DType::kF32, 2, {}}, {DType::kF32, 1, {}}, DType::kF32,
                           [](Expr a, Expr b) { return a + b; });
}

// Owns the payload bytes the spec points into.
struct PreparedKernel {
  std::vector<uint8_t> payload;
  std::unique_ptr<TensorFunction> fn;
};

PreparedKernel Prepare(JitKernelProvider& provider, const Kernel& k,
                       const std::vector<DimBinding>& bindings = {},
                       std::vector<DispatchHintSpec> hints = {}) {
  PreparedKernel p;
  p.payload = SerializeKernel(k, bindings);
  KernelSpec spec;
  spec.name = k.name;
  for (size_t i = 0; i + 1 < k.buffers.size(); ++i)
    spec.input_dtypes.push_back(k.buffers[i]->dtype);
  spec.output_dtypes = {k.buffers.back()->dtype};
  spec.payload_format = kPayloadFormat;
  spec.payload = p.payload.data();
  spec.payload_size = p.payload.size();
  spec.dispatch_hints = std::move(hints);
  auto fn = provider.PrepareKernel(spec);
  BOOST_REQUIRE_MESSAGE(fn.ok(), fn.status().ToString());
  p.fn = std::move(*fn);
  return p;
}

std::vector<float> Random(int64_t n, uint64_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<float>(static_cast<double>(seed >> 11) / 9007199254740992.0 * 200.0 - 100.0);
  }
  return v;
}

Tensor Wrap(std::vector<float>& v, std::vector<int64_t> dims) {
  return Tensor::Wrap(v.data(), DType::kF32,
                      *Shape::Make(dims.data(), static_cast<int>(dims.size())));
}

// Runs add at [n, m] on fixed pseudo-random data; returns the output and checks it exactly.
std::vector<float> RunAdd(TensorFunction& fn, int64_t n, int64_t m) {
  std::vector<float> a = Random(n * m, 1 + n), b = Random(m, 2 + m), y(n * m, -1.0f);
  Tensor ta = Wrap(a, {n, m}), tb = Wrap(b, {m}), ty = Wrap(y, {n, m});
  const Tensor* args[] = {&ta, &tb, &ty};
  Status s = fn.Run(args, 2, 1);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  for (int64_t i = 0; i < n * m; ++i) {
    if (y[i] != a[i] + b[i % m]) {
      BOOST_FAIL("add [" << n << ", " << m << "] element " << i << ": " << y[i]);
    }
  }
  return y;
}

BOOST_AUTO_TEST_CASE(hot_shape_gets_a_specialized_variant_with_identical_results) {
  JitProviderOptions options = ExactOptions();
  options.dispatch.specialize_after = 3;
  JitKernelProvider provider(TestEngine(), options);
  PreparedKernel add = Prepare(provider, AddKernel());
  std::vector<float> generic;
  for (int i = 0; i < 3; ++i) generic = RunAdd(*add.fn, 7, 37);
  provider.WaitForBackgroundCompiles();
  DispatchStats s = provider.stats();
  BOOST_TEST(s.misses == 3);
  BOOST_TEST(s.hits == 0);
  BOOST_TEST(s.specializations == 1);
  BOOST_TEST(s.compilations == 2);  // generic + [7, 37]
  BOOST_TEST(s.compile_seconds > 0);
  std::vector<float> special = RunAdd(*add.fn, 7, 37);
  BOOST_TEST(provider.stats().hits == 1);
  BOOST_TEST(std::memcmp(generic.data(), special.data(), generic.size() * 4) == 0);
  RunAdd(*add.fn, 7, 38);  // another shape still runs generic
  BOOST_TEST(provider.stats().misses == 4);
}

BOOST_AUTO_TEST_CASE(specialization_folds_every_runtime_size) {
  Kernel k = AddKernel();
  int64_t a[] = {7, 37}, b[] = {37}, y[] = {7, 37};
  Kernel s = SpecializeKernel(k, {a, b, y}, nullptr);
  BOOST_TEST(ValidateKernel(s).ok());
  BOOST_TEST(HashKernel(s) != HashKernel(k));
  BOOST_TEST(ToText(s).find("dim(") == std::string::npos, ToText(s));
  BOOST_TEST(ToText(s).find("37") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(table_is_bounded_with_lru_eviction) {
  JitProviderOptions options = ExactOptions();
  options.dispatch.specialize_after = 2;
  options.dispatch.max_shapes = 4;
  JitKernelProvider provider(TestEngine(), options);
  PreparedKernel add = Prepare(provider, AddKernel());
  for (int64_t m = 1; m <= 4; ++m) RunAdd(*add.fn, 2, m);  // table full: m = 1, 2, 3, 4
  RunAdd(*add.fn, 2, 1);  // m = 1 is now hot (count 2) and most recent
  RunAdd(*add.fn, 2, 5);  // evicts m = 2, the least recently used
  BOOST_TEST(provider.stats().evictions == 1);
  RunAdd(*add.fn, 2, 2);  // m = 2 starts over at count 1 (evicting m = 3)
  BOOST_TEST(provider.stats().evictions == 2);
  provider.WaitForBackgroundCompiles();
  BOOST_TEST(provider.stats().specializations == 1);  // only m = 1
  RunAdd(*add.fn, 2, 2);                              // count 2: now m = 2 specializes
  provider.WaitForBackgroundCompiles();
  BOOST_TEST(provider.stats().specializations == 2);
  RunAdd(*add.fn, 2, 1);
  RunAdd(*add.fn, 2, 2);
  BOOST_TEST(provider.stats().hits == 2);
}

BOOST_AUTO_TEST_CASE(dispatch_hints_are_pre_specialized) {
  Buffer x = Buffer::Param("x", DType::kF32, 1), y = Buffer::Param("y", DType::kF32, 1);
  Var n("n"), i("i");
  Kernel k{
      "double", {x, y}, {n}, For(i, n, ForKind::kVectorized, Store(y, {i}, Load(x, {i}) * 2.0f))};
  JitProviderOptions options = ExactOptions();
  options.dispatch.specialize_after = 0;  // hints only
  JitKernelProvider provider(TestEngine(), options);
  PreparedKernel dbl = Prepare(provider, k, {{0, 0}}, {{"n", {4, 16}}});
  provider.WaitForBackgroundCompiles();
  BOOST_TEST(provider.stats().specializations == 2);
  for (int64_t len : {16, 5, 4}) {
    std::vector<float> in = Random(len, 9), out(len, 0.0f);
    Tensor ti = Wrap(in, {len}), to = Wrap(out, {len});
    const Tensor* args[] = {&ti, &to};
    BOOST_REQUIRE(dbl.fn->Run(args, 1, 1).ok());
    for (int64_t j = 0; j < len; ++j) BOOST_REQUIRE(out[j] == in[j] * 2.0f);
  }
  BOOST_TEST(provider.stats().hits == 2);    // 16 and 4
  BOOST_TEST(provider.stats().misses == 1);  // 5
}

BOOST_AUTO_TEST_CASE(eight_threads_at_mixed_shapes) {
  JitProviderOptions options = ExactOptions();
  options.dispatch.specialize_after = 4;
  JitKernelProvider provider(TestEngine(), options);
  PreparedKernel add = Prepare(provider, AddKernel());
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 1}, {3, 17},  {8, 64},
                                                           {5, 3}, {2, 100}, {33, 9}};
  std::atomic<int> failures{0};
  auto round = [&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int it = 0; it < 100; ++it) {
          auto [n, m] = shapes[(t + it) % shapes.size()];
          std::vector<float> a = Random(n * m, t * 1000 + it), b = Random(m, it), y(n * m);
          Tensor ta = Wrap(a, {n, m}), tb = Wrap(b, {m}), ty = Wrap(y, {n, m});
          const Tensor* args[] = {&ta, &tb, &ty};
          if (!add.fn->Run(args, 2, 1).ok()) ++failures;
          for (int64_t i = 0; i < n * m; ++i) {
            if (y[i] != a[i] + b[i % m]) {
              ++failures;
              break;
            }
          }
        }
      });
    }
    for (auto& th : threads) th.join();
  };
  // Round 1: specializations are compiled while the threads run (or after; either is fine).
  round();
  provider.WaitForBackgroundCompiles();
  DispatchStats s = provider.stats();
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(s.hits + s.misses == 800);
  BOOST_TEST(s.specializations == 6);  // each shape exactly once, however the threads raced
  // Round 2: every shape is hot, so every call runs a specialized variant.
  round();
  BOOST_TEST(failures.load() == 0);
  BOOST_TEST(provider.stats().hits == s.hits + 800);
  BOOST_TEST(provider.stats().specializations == 6);
}

BOOST_AUTO_TEST_CASE(functions_outlive_the_provider) {
  std::unique_ptr<TensorFunction> fn;
  std::vector<uint8_t> payload;
  {
    JitProviderOptions options = ExactOptions();
    options.dispatch.specialize_after = 1;
    JitKernelProvider provider(TestEngine(), options);
    PreparedKernel add = Prepare(provider, AddKernel());
    payload = std::move(add.payload);
    fn = std::move(add.fn);
    RunAdd(*fn, 3, 3);  // queues a specialization the provider's destruction may drop
  }
  for (int i = 0; i < 3; ++i) RunAdd(*fn, 3, 3);
}

// Shapes that come and go do not grow the engine: an evicted shape's variant is freed, and so is
// everything a kernel held once its function is gone (an unloaded executable).
BOOST_AUTO_TEST_CASE(evicted_and_unloaded_variants_are_freed) {
  StatusOr<std::unique_ptr<Engine>> created = Engine::Create();
  BOOST_REQUIRE(created.ok());
  std::shared_ptr<Engine> engine = std::move(*created);
  JitProviderOptions options = ExactOptions();
  options.dispatch.specialize_after = 1;
  options.dispatch.max_shapes = 2;
  {
    JitKernelProvider provider(engine, options);
    PreparedKernel add = Prepare(provider, AddKernel());
    for (int64_t m = 1; m <= 20; ++m) {
      RunAdd(*add.fn, 3, m);
      provider.WaitForBackgroundCompiles();
      RunAdd(*add.fn, 3, m);  // runs the specialized variant
      // The generic variant and at most the two tracked shapes' variants are alive.
      BOOST_TEST(engine->stats().cached_kernels <= 3, "m=" << m);
    }
    DispatchStats d = provider.stats();
    BOOST_TEST(d.specializations == 20);
    BOOST_TEST(d.hits == 20);
    BOOST_TEST(d.evictions == 18);
    BOOST_TEST(engine->stats().freed_kernels == 18);
    RunAdd(*add.fn, 3, 1);  // evicted long ago: generic again, and correct
    provider.WaitForBackgroundCompiles();  // m = 1 specialized again, evicting m = 19
    BOOST_TEST(engine->stats().freed_kernels == 19);
    BOOST_TEST(engine->stats().cached_kernels == 3);
  }
  // Function and provider gone: the generic variant and the m = 20 and m = 1 ones are freed.
  BOOST_TEST(engine->stats().cached_kernels == 0);
  BOOST_TEST(engine->stats().freed_kernels == 22);
}

// ---- The first tier and bucketing. ----

// A fresh engine, so that its compile counters belong to one test.
std::shared_ptr<Engine> FreshEngine() {
  auto e = Engine::Create();
  BOOST_REQUIRE_MESSAGE(e.ok(), e.status().ToString());
  return std::shared_ptr<Engine>(std::move(*e));
}

constexpr int64_t kM = 9, kK = 67, kN = 21;  // odd sizes: vector tails at every level

// Runs the matmul on fixed data and checks it against a double-precision reference; returns ""
// or what is wrong (no Boost.Test macros: threads call it). Both tiers sum K products in float,
// in different orders (the optimized one vectorizes the reduction and may contract into FMA,
// which the kernel allows), so each is within gamma_K = K u / (1 - K u) times sum |a b| of the
// exact value (u = 2^-24): that bound is the tolerance (so the two tiers agree within twice it).
std::string MatmulError(TensorFunction& fn) {
  std::vector<float> a = Random(kM * kK, 5), b = Random(kK * kN, 6), c(kM * kN, -1.0f);
  Tensor ta = Wrap(a, {kM, kK}), tb = Wrap(b, {kK, kN}), tc = Wrap(c, {kM, kN});
  const Tensor* args[] = {&ta, &tb, &tc};
  Status s = fn.Run(args, 2, 1);
  if (!s.ok()) return s.ToString();
  const double u = std::ldexp(1.0, -24), gamma = kK * u / (1 - kK * u);
  for (int64_t i = 0; i < kM; ++i) {
    for (int64_t j = 0; j < kN; ++j) {
      double exact = 0, magnitude = 0;
      for (int64_t k = 0; k < kK; ++k) {
        exact += double(a[i * kK + k]) * b[k * kN + j];
        magnitude += std::fabs(double(a[i * kK + k]) * b[k * kN + j]);
      }
      double got = c[i * kN + j];
      if (std::fabs(got - exact) > gamma * magnitude) {
        return "c[" + std::to_string(i) + ", " + std::to_string(j) + "] = " + std::to_string(got) +
               ", exact " + std::to_string(exact) + ", bound " + std::to_string(gamma * magnitude);
      }
    }
  }
  return "";
}

void RunMatmul(TensorFunction& fn) {
  std::string error = MatmulError(fn);
  BOOST_REQUIRE_MESSAGE(error.empty(), error);
}

BOOST_AUTO_TEST_CASE(first_tier_runs_first_then_the_optimized_variant_is_swapped_in) {
  std::shared_ptr<Engine> engine = FreshEngine();
  JitProviderOptions options;
  options.dispatch.tiering = true;
  options.dispatch.tier_up_after = 2;
  options.dispatch.specialize_after = 0;  // the generic variant alone
  JitKernelProvider provider(engine, options);
  PreparedKernel mm = Prepare(provider, MatmulKernel("mm"));

  RunMatmul(*mm.fn);  // compiles the first tier and runs it (checked as the optimized one is)
  provider.WaitForBackgroundCompiles();  // nothing queued: one call is not hot yet
  BOOST_TEST(engine->stats().compilations == 1);
  BOOST_TEST(engine->stats().fast_compilations == 1);
  BOOST_TEST(provider.stats().fast_generics == 1);
  BOOST_TEST(provider.stats().tier_ups == 0);

  RunMatmul(*mm.fn);  // the second call makes it hot: the optimized compile is queued
  // Calls racing the swap run whichever variant they selected; the replaced code stays valid.
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) failures += !MatmulError(*mm.fn).empty();
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(failures.load() == 0);
  provider.WaitForBackgroundCompiles();
  BOOST_TEST(provider.stats().tier_ups == 1);
  BOOST_TEST(engine->stats().compilations == 2);  // first tier + optimized, nothing else
  BOOST_TEST(engine->stats().fast_compilations == 1);

  RunMatmul(*mm.fn);  // the optimized variant
  BOOST_TEST(engine->stats().compilations == 2);
  BOOST_TEST(provider.stats().misses == 1 + 1 + 60 + 1);  // every call ran a generic variant
}

BOOST_AUTO_TEST_CASE(tiering_off_compiles_the_optimized_variant_once) {
  std::shared_ptr<Engine> engine = FreshEngine();
  JitProviderOptions options;
  options.dispatch.tiering = false;
  options.dispatch.specialize_after = 0;
  JitKernelProvider provider(engine, options);
  PreparedKernel mm = Prepare(provider, MatmulKernel("mm"));
  for (int i = 0; i < 5; ++i) RunMatmul(*mm.fn);
  provider.WaitForBackgroundCompiles();
  BOOST_TEST(engine->stats().compilations == 1);
  BOOST_TEST(engine->stats().fast_compilations == 0);
  BOOST_TEST(provider.stats().fast_generics == 0);
  BOOST_TEST(provider.stats().tier_ups == 0);
}

BOOST_AUTO_TEST_CASE(warm_up_scope_compiles_optimized_at_once) {
  std::shared_ptr<Engine> engine = FreshEngine();
  JitProviderOptions options;  // tiering on
  options.dispatch.specialize_after = 0;
  JitKernelProvider provider(engine, options);
  PreparedKernel mm = Prepare(provider, MatmulKernel("mm"));
  {
    OptimizedTierScope scope;
    BOOST_TEST(OptimizedTierScope::Active());
    RunMatmul(*mm.fn);
  }
  BOOST_TEST(!OptimizedTierScope::Active());
  for (int i = 0; i < 3; ++i) RunMatmul(*mm.fn);
  provider.WaitForBackgroundCompiles();
  BOOST_TEST(engine->stats().compilations == 1);
  BOOST_TEST(engine->stats().fast_compilations == 0);
}

// Compiles over a sweep of add at [3, m], m = 1..64, every shape made hot at once.
int64_t SweepCompiles(Bucketing bucketing, DispatchStats* stats) {
  std::shared_ptr<Engine> engine = FreshEngine();
  JitProviderOptions options;
  options.dispatch.tiering = false;
  options.dispatch.bucketing = bucketing;
  options.dispatch.specialize_after = 1;
  options.dispatch.max_shapes = 64;
  JitKernelProvider provider(engine, options);
  PreparedKernel add = Prepare(provider, AddKernel());
  for (int64_t m = 1; m <= 64; ++m) {
    RunAdd(*add.fn, 3, m);  // generic (or an earlier bucket's variant), checked exactly
    provider.WaitForBackgroundCompiles();
    RunAdd(*add.fn, 3, m);  // the variant for m's entry, checked exactly
  }
  *stats = provider.stats();
  return engine->stats().compilations;
}

BOOST_AUTO_TEST_CASE(bucketing_bounds_the_variants_compiled_over_a_sweep) {
  DispatchStats exact, pow2;
  // One variant per value of m, plus the generic one.
  BOOST_TEST(SweepCompiles(Bucketing::kExact, &exact) == 1 + 64);
  BOOST_TEST(exact.specializations == 64);
  BOOST_TEST(exact.hits == 64);
  // m = 1, 2, 4, ..., 64 get exact variants (7); every other m shares its bucket's entry, whose
  // variant folds only n (m varies): one kernel for the engine whichever the bucket.
  BOOST_TEST(SweepCompiles(Bucketing::kPowerOfTwo, &pow2) == 1 + 7 + 1);
  // Installed: 7 exact entries and the buckets 4 (m = 3), 8, 16, 32, 64 (m = 5..63 but not 2^k).
  BOOST_TEST(pow2.specializations == 7 + 5);
  BOOST_TEST(pow2.hits == 64 + 64 - 7 - 5);  // second calls, and first calls of a hot bucket
}

// The payback rule's clock: every read advances it by fake_step, so a timed call (two reads)
// takes exactly fake_step nanoseconds whatever the machine does.
std::atomic<int64_t> fake_now{0}, fake_step{0}, fake_reads{0};
int64_t FakeClock() {
  fake_reads.fetch_add(1);
  return fake_now.fetch_add(fake_step) + fake_step;
}

Kernel SubKernel() {
  return ElementwiseBinary("sub", {DType::kF32, 2, {}}, {DType::kF32, 1, {}}, DType::kF32,
                           [](Expr a, Expr b) { return a - b; });
}

void RunSub(TensorFunction& fn, int64_t n, int64_t m) {
  std::vector<float> a = Random(n * m, 3 + n), b = Random(m, 4 + m), y(n * m, -1.0f);
  Tensor ta = Wrap(a, {n, m}), tb = Wrap(b, {m}), ty = Wrap(y, {n, m});
  const Tensor* args[] = {&ta, &tb, &ty};
  Status s = fn.Run(args, 2, 1);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  for (int64_t i = 0; i < n * m; ++i) BOOST_REQUIRE(y[i] == a[i] - b[i % m]);
}

struct PaybackSweep {
  int64_t heavy_specializations = 0, light_specializations = 0, compilations = 0;
  int64_t clock_reads = 0;
};

// A sweep of m = 1..64, each shape called once (then the background compiles waited for, so the
// counts do not depend on timing): add at [3, m] takes 10 ms a call, sub at [3, m] 1 us, on the
// fake clock; a specialization is expected to cost 40 ms. `time_every` 1: every call is timed.
PaybackSweep RunPaybackSweep(double min_share, double payback, int time_every = 1) {
  std::shared_ptr<Engine> engine = FreshEngine();
  JitProviderOptions options = ExactOptions();
  options.dispatch.specialize_after = 1;
  options.dispatch.max_shapes = 64;
  options.dispatch.min_share = min_share;
  options.dispatch.payback = payback;
  options.dispatch.assumed_compile_ms = 40;
  options.dispatch.clock = FakeClock;
  options.dispatch.time_every = time_every;
  JitKernelProvider provider(engine, options);
  PreparedKernel heavy = Prepare(provider, AddKernel()), light = Prepare(provider, SubKernel());
  PaybackSweep r;
  const int64_t reads_before = fake_reads.load();
  for (int64_t m = 1; m <= 64; ++m) {
    int64_t before = provider.stats().specializations;
    fake_step = 10'000'000;
    RunAdd(*heavy.fn, 3, m);
    provider.WaitForBackgroundCompiles();
    int64_t after_heavy = provider.stats().specializations;
    r.heavy_specializations += after_heavy - before;
    fake_step = 1'000;
    RunSub(*light.fn, 3, m);
    provider.WaitForBackgroundCompiles();
    r.light_specializations += provider.stats().specializations - after_heavy;
  }
  r.compilations = engine->stats().compilations;
  r.clock_reads = fake_reads.load() - reads_before;
  return r;
}

BOOST_AUTO_TEST_CASE(payback_rule_bounds_the_compiles_of_a_sweep) {
  // No rule: every shape of both kernels (and the two generic variants).
  PaybackSweep off = RunPaybackSweep(0, 0);
  BOOST_TEST(off.heavy_specializations == 64);
  BOOST_TEST(off.light_specializations == 64);
  BOOST_TEST(off.compilations == 2 + 128);
  // Share: sub takes 1e-4 of the kernels' run time (< 2%), so it stays generic; add takes the
  // rest and gets every shape.
  PaybackSweep share = RunPaybackSweep(0.02, 0);
  BOOST_TEST(share.heavy_specializations == 64);
  BOOST_TEST(share.light_specializations == 0);
  BOOST_TEST(share.compilations == 2 + 64);
  // Credit: add earns 10 ms a call and a specialization costs 40 ms, checked before the call
  // that earns: calls 5, 9, ..., 61 pay (15 = (64 x 10 - 10) / 40 rounded down). Sub earns 64
  // us in all: none.
  PaybackSweep credit = RunPaybackSweep(0, 1);
  BOOST_TEST(credit.heavy_specializations == 15);
  BOOST_TEST(credit.light_specializations == 0);
  BOOST_TEST(credit.compilations == 2 + 15);
  // A cheaper compile pays more often: payback 0.5 halves the price (every second call pays
  // from the third: 31 of 64).
  PaybackSweep half = RunPaybackSweep(0, 0.5);
  BOOST_TEST(half.heavy_specializations == 31);
  BOOST_TEST(half.clock_reads == 2 * 128);  // every call of both kernels timed
}

// Timing one call in 8 (each counted as 8 calls) reads the clock an eighth as often and keeps
// the rules' decisions over a sweep: the share rule's exactly, the credit rule's within what
// the sampling moves (a timed call earns 8 calls' credit at once).
BOOST_AUTO_TEST_CASE(payback_rule_times_one_call_in_time_every) {
  PaybackSweep share = RunPaybackSweep(0.02, 0, 8);
  BOOST_TEST(share.clock_reads == 2 * 16);  // calls 1, 9, ..., 57 of each kernel
  BOOST_TEST(share.heavy_specializations == 64);
  BOOST_TEST(share.light_specializations == 0);
  BOOST_TEST(share.compilations == 2 + 64);
  // Credit: add's call 1 earns 80 ms, which calls 2 and 3 spend (40 ms each); likewise calls
  // 9 -> 10, 11, ..., 57 -> 58, 59: 16 of 64 (15 when every call is timed). Sub never pays.
  PaybackSweep credit = RunPaybackSweep(0, 1, 8);
  BOOST_TEST(credit.heavy_specializations == 16);
  BOOST_TEST(credit.light_specializations == 0);
  BOOST_TEST(credit.compilations == 2 + 16);
}

// ---- Bucket representatives, checked against the dispatcher's own table. ----

// The shape-table entries a fresh dispatcher of add [3, m] holds after calls at each m of
// `values` (in order), the dim first seen at m = 0 so that it is varying from the first value
// on (a dim is bucketed only once it has varied). Nothing gets hot, so nothing is specialized.
int EntriesAfter(Bucketing bucketing, const std::vector<int64_t>& values) {
  DispatchOptions options;
  options.bucketing = bucketing;
  options.tiering = false;
  options.specialize_after = 1 << 30;
  options.max_shapes = 1000;
  KernelPayload payload{AddKernel(), {}, {}};
  auto d = KernelDispatcher::Create(TestEngine(), std::make_shared<BackgroundCompiler>(),
                                    std::make_shared<DispatchCounters>(), payload, options, {});
  BOOST_REQUIRE(d->key_size() == 5);  // a [n, m], b [m], y [n, m]
  std::vector<int64_t> all = {0};
  all.insert(all.end(), values.begin(), values.end());
  for (int64_t m : all) {
    const int64_t key[] = {3, m, m, 3, m};
    EpochGuard guard;
    StatusOr<KernelFn> fn = d->Select(key);
    BOOST_REQUIRE_MESSAGE(fn.ok(), fn.status().ToString());
  }
  return d->tracked_shapes() - 1;  // m = 0's entry
}

BOOST_AUTO_TEST_CASE(bucket_representatives_hit_every_table_entry_once) {
  const std::pair<int64_t, int64_t> ranges[] = {{1, 16}, {5, 20}, {3, 3}, {6, 7}, {1, 70}};
  for (Bucketing bucketing : {Bucketing::kPowerOfTwo, Bucketing::kExact}) {
    for (auto [lo, hi] : ranges) {
      std::vector<int64_t> reps = BucketRepresentatives(lo, hi, bucketing);
      BOOST_TEST_CONTEXT("[" << lo << ", " << hi << "] "
                             << (bucketing == Bucketing::kExact ? "exact" : "pow2")) {
        BOOST_REQUIRE(!reps.empty());
        BOOST_TEST(std::is_sorted(reps.begin(), reps.end()));
        BOOST_TEST(reps.front() >= lo);
        BOOST_TEST(reps.back() <= hi);
        // Each representative makes an entry of its own (distinct buckets) ...
        BOOST_TEST(EntriesAfter(bucketing, reps) == static_cast<int>(reps.size()));
        // ... and every value of the range then finds one of them (they cover [lo, hi]).
        std::vector<int64_t> then = reps;
        for (int64_t m = lo; m <= hi; ++m) then.push_back(m);
        BOOST_TEST(EntriesAfter(bucketing, then) == static_cast<int>(reps.size()));
      }
    }
  }
  using V = std::vector<int64_t>;
  BOOST_TEST(BucketRepresentatives(1, 16, Bucketing::kPowerOfTwo) == V({1, 2, 3, 4, 7, 8, 15, 16}),
             boost::test_tools::per_element());
  BOOST_TEST(BucketRepresentatives(0, 5, Bucketing::kExact).empty());
  BOOST_TEST(BucketRepresentatives(6, 5, Bucketing::kPowerOfTwo).empty());
  // Past 2^62 the rounding saturates: the rest of the range is one bucket, and the walk ends.
  const int64_t max = std::numeric_limits<int64_t>::max();
  BOOST_TEST(BucketRepresentatives(max - 2, max, Bucketing::kPowerOfTwo) == V({max}),
             boost::test_tools::per_element());
  BOOST_TEST(BucketRepresentatives(max - 1, max, Bucketing::kExact) == V({max - 1, max}),
             boost::test_tools::per_element());
}

// ---- StartupCompiler::WaitIdle beside concurrent submits. ----

// A waiter does not block Submit: while WaitIdle waits for a task that is held until a Submit
// from another thread returns, that Submit returns. (Holding the lock while waiting made the
// Submit wait for the held task: a deadlock, which the 60 s bound turns into a failure.)
BOOST_AUTO_TEST_CASE(startup_wait_idle_lets_others_submit) {
  StartupCompiler startup(1);
  std::promise<void> release, started;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> first_done{false};
  startup.Submit([&, released] {
    started.set_value();
    released.wait();
    first_done = true;
  });
  started.get_future().wait();
  bool first_done_at_return = false;
  std::thread waiter([&] {
    startup.WaitIdle();
    first_done_at_return = first_done.load();
  });
  // Give the waiter time to enter WaitIdle (if it has not, the submit below is not concurrent
  // with it and the test proves less, but never fails wrongly).
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::atomic<int> second_runs{0};
  auto submitted = std::async(std::launch::async, [&] {
    startup.Submit([&] { second_runs.fetch_add(1); });
  });
  bool returned = submitted.wait_for(std::chrono::seconds(60)) == std::future_status::ready;
  release.set_value();
  waiter.join();
  submitted.wait();
  BOOST_TEST(returned, "Submit blocked behind WaitIdle");
  BOOST_TEST(first_done_at_return);  // every task submitted before the call has run
  startup.WaitIdle();
  BOOST_TEST(second_runs.load() == 1);
}

// Waiters and submitters at once, on several workers: every task runs exactly once, and a
// WaitIdle after the submitters finish sees all of them done.
BOOST_AUTO_TEST_CASE(startup_wait_idle_with_concurrent_submits) {
  StartupCompiler startup(2);
  constexpr int kThreads = 3, kTasks = 200;
  std::atomic<int> runs{0};
  std::atomic<bool> submitting{true};
  std::vector<std::thread> waiters, submitters;
  for (int w = 0; w < 2; ++w) {
    waiters.emplace_back([&] {
      while (submitting.load()) startup.WaitIdle();
    });
  }
  for (int t = 0; t < kThreads; ++t) {
    submitters.emplace_back([&] {
      for (int i = 0; i < kTasks; ++i) startup.Submit([&] { runs.fetch_add(1); });
    });
  }
  for (auto& t : submitters) t.join();
  submitting = false;
  for (auto& t : waiters) t.join();
  startup.WaitIdle();
  BOOST_TEST(runs.load() == kThreads * kTasks);
}

}  // namespace
}  // namespace kiln::jit
