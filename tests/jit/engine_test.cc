// Tests for jit/engine: compile once under concurrency, the cache, cached failures, host symbols,
// the first tier against the optimized one, counted kernels freed after their last reference.
#define BOOST_TEST_MODULE engine_test
#include "jit/engine.h"

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/jit/test_util.h"
#include "base/epoch.h"

namespace kiln::jit {
namespace {

using testing::Call;
using testing::TestBuffer;

std::unique_ptr<Engine> NewEngine() {
  StatusOr<std::unique_ptr<Engine>> engine = Engine::Create();
  BOOST_REQUIRE_MESSAGE(engine.ok(), engine.status().ToString());
  return std::move(engine).value();
}

// out[i] = a[i] * scale + 1, built from fresh objects on every call (same structure).
Kernel ScaleKernel(const std::string& name, double scale) {
  Buffer a = Buffer::Param("a", DType::kF32, 1), out = Buffer::Param("out", DType::kF32, 1);
  Var i("i");
  return {name,
          {a, out},
          {},
          For(i, DimOf(out, 0), ForKind::kVectorized, Store(out, {i}, Load(a, {i}) * scale + 1.0))};
}

void ExpectScaled(KernelFn fn, double scale) {
  TestBuffer a(DType::kF32, {100}), out(DType::kF32, {100});
  for (int64_t k = 0; k < 100; ++k) a.Set(k, k);
  Call(fn, {&a, &out});
  for (int64_t k = 0; k < 100; ++k) {
    BOOST_TEST(out.At(k) == static_cast<float>(static_cast<float>(k * scale) + 1.0f));
  }
}

// Runs `body(thread_index)` on `n` threads released together.
void RunTogether(int n, const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      ready.fetch_add(1);
      while (ready.load() < n) std::this_thread::yield();
      body(t);
    });
  }
  for (std::thread& t : threads) t.join();
}

BOOST_AUTO_TEST_CASE(eight_threads_same_new_kernel_compile_once) {
  std::unique_ptr<Engine> engine = NewEngine();
  std::vector<StatusOr<KernelFn>> results(8, Status(StatusCode::kInternal, "not run"));
  RunTogether(8, [&](int t) {
    results[t] = engine->GetOrCompile(ScaleKernel("scale_t" + std::to_string(t), 3.0));
  });
  for (const auto& r : results) BOOST_REQUIRE_MESSAGE(r.ok(), r.status().ToString());
  for (const auto& r : results) BOOST_TEST(*r == *results[0]);
  EngineStats stats = engine->stats();
  BOOST_TEST(stats.compilations == 1);
  BOOST_TEST(stats.cache_hits == 7);
  BOOST_TEST(stats.failures == 0);
  BOOST_TEST(stats.cached_kernels == 1);
  BOOST_TEST(stats.compile_seconds > 0);
  ExpectScaled(*results[0], 3.0);
}

BOOST_AUTO_TEST_CASE(many_threads_many_kernels_compile_each_once) {
  std::unique_ptr<Engine> engine = NewEngine();
  std::vector<std::vector<KernelFn>> fns(8, std::vector<KernelFn>(4));
  RunTogether(8, [&](int t) {
    for (int k = 0; k < 4; ++k) {
      int which = (k + t) % 4;  // every thread asks for all four, in different orders
      StatusOr<KernelFn> fn = engine->GetOrCompile(ScaleKernel("k", which + 2.0));
      fns[t][which] = fn.ok() ? *fn : nullptr;
    }
  });
  for (int t = 0; t < 8; ++t) {
    for (int k = 0; k < 4; ++k) BOOST_TEST(fns[t][k] == fns[0][k]);
  }
  EngineStats stats = engine->stats();
  BOOST_TEST(stats.compilations == 4);
  BOOST_TEST(stats.cache_hits == 28);
  for (int k = 0; k < 4; ++k) ExpectScaled(fns[0][k], k + 2.0);
}

// The compiler makes and drops an engine per model (tests/conformance:load_all_test: 1,754 of
// them). An engine dropped right after a compile must wait for ORC's compile thread to finish
// that compile's bookkeeping: LLVM's endSession removes the JITDylibs before it stops the
// thread, and under load that race crashed ("Resource tracker ... became defunct"). Many short
// lives, each compiling one kernel and dropping the engine at once.
BOOST_AUTO_TEST_CASE(engines_dropped_right_after_a_compile_go_cleanly) {
  for (int life = 0; life < 150; ++life) {
    std::unique_ptr<Engine> engine = NewEngine();
    StatusOr<KernelFn> fn = engine->GetOrCompile(ScaleKernel("short_life", life + 1.0));
    BOOST_REQUIRE_MESSAGE(fn.ok(), fn.status().ToString());
    if (life % 50 == 0) ExpectScaled(*fn, life + 1.0);
  }
}

BOOST_AUTO_TEST_CASE(cache_is_keyed_by_structure_not_name) {
  std::unique_ptr<Engine> engine = NewEngine();
  StatusOr<KernelFn> a = engine->GetOrCompile(ScaleKernel("first", 2.0));
  StatusOr<KernelFn> b = engine->GetOrCompile(ScaleKernel("renamed", 2.0));
  StatusOr<KernelFn> c = engine->GetOrCompile(ScaleKernel("first", 5.0));
  BOOST_REQUIRE(a.ok());
  BOOST_REQUIRE(b.ok());
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(*a == *b);
  BOOST_TEST(*a != *c);
  BOOST_TEST(engine->stats().compilations == 2);
  BOOST_TEST(engine->stats().cache_hits == 1);
  ExpectScaled(*b, 2.0);
  ExpectScaled(*c, 5.0);
}

BOOST_AUTO_TEST_CASE(failures_are_reported_with_the_kernel_name_and_cached) {
  std::unique_ptr<Engine> engine = NewEngine();
  Buffer out = Buffer::Param("out", DType::kI32, 1);
  Var i("i");
  Kernel bad{"bad_store",
             {out},
             {},
             For(i, DimOf(out, 0), ForKind::kSerial, Store(out, {i}, FloatImm(1)))};
  for (int attempt = 0; attempt < 2; ++attempt) {
    StatusOr<KernelFn> fn = engine->GetOrCompile(bad);
    BOOST_REQUIRE(!fn.ok());
    BOOST_TEST((fn.status().code() == StatusCode::kInvalidArgument));
    BOOST_TEST(fn.status().message().find("bad_store") != std::string::npos, fn.status().message());
  }
  EngineStats stats = engine->stats();
  BOOST_TEST(stats.compilations == 1);
  BOOST_TEST(stats.failures == 1);
  BOOST_TEST(stats.cache_hits == 1);
}

// Host symbols: libm (fmodf, scalar tails), libmvec (vector bodies) and kiln_parallel_for.
BOOST_AUTO_TEST_CASE(host_math_and_runtime_symbols_resolve) {
  std::unique_ptr<Engine> engine = NewEngine();
  BOOST_TEST(engine->uses_libmvec());
  BOOST_TEST(!engine->target().cpu.empty());
  Buffer a = Buffer::Param("a", DType::kF32, 1), out = Buffer::Param("out", DType::kF32, 1);
  Var i("i");
  Expr x = Load(a, {i});
  Kernel k{"mix",
           {a, out},
           {},
           For(i, DimOf(out, 0), ForKind::kParallel,
               Store(out, {i}, Tanh(x) + Erf(x) + Mod(x, FloatImm(0.75)) + Exp(x)))};
  StatusOr<KernelFn> fn = engine->GetOrCompile(k);
  BOOST_REQUIRE_MESSAGE(fn.ok(), fn.status().ToString());
  const int64_t n = 70001;  // large enough to run on several threads
  TestBuffer in(DType::kF32, {n}), res(DType::kF32, {n});
  for (int64_t e = 0; e < n; ++e) in.Set(e, -3.0 + 6.0 * e / n);
  Call(*fn, {&in, &res});
  for (int64_t e = 0; e < n; e += 97) {
    float v = static_cast<float>(in.At(e));
    double want = std::tanh(v) + std::erf(v) + std::fmod(v, 0.75f) + std::exp(v);
    // Four terms each within 4 ulp, then three f32 additions: a small relative tolerance.
    BOOST_TEST(std::fabs(res.At(e) - want) <= 1e-5 * (std::fabs(want) + 1), "x=" << v);
  }
}

// A compiled kernel is reentrant: many threads call it at once on their own buffers.
BOOST_AUTO_TEST_CASE(compiled_kernels_run_concurrently) {
  std::unique_ptr<Engine> engine = NewEngine();
  Buffer a = Buffer::Param("a", DType::kI64, 1), out = Buffer::Param("out", DType::kI64, 1);
  Var i("i");
  Kernel k{"square",
           {a, out},
           {},
           For(i, DimOf(out, 0), ForKind::kParallel, Store(out, {i}, Load(a, {i}) * Load(a, {i})))};
  StatusOr<KernelFn> fn = engine->GetOrCompile(k);
  BOOST_REQUIRE(fn.ok());
  std::atomic<int> wrong{0};
  RunTogether(4, [&](int t) {
    const int64_t n = 50000 + t;
    TestBuffer in(DType::kI64, {n}), res(DType::kI64, {n});
    for (int64_t e = 0; e < n; ++e) in.SetI(e, e - t);
    Call(*fn, {&in, &res});
    for (int64_t e = 0; e < n; ++e) {
      if (res.IntAt(e) != (e - t) * (e - t)) wrong.fetch_add(1);
    }
  });
  BOOST_TEST(wrong.load() == 0);
}

// The first tier's own pipeline (jit/llvm_target.cc) has two shapes: straight-line code (shape
// functions) gets folding alone, code with loops the passes its first run needs, with the
// unrollers and the vectorizer only where the kernel's loops ask for them. Both must compute what
// the optimized tier computes.
StatusOr<KernelRef> AcquireAt(Engine& engine, const Kernel& kernel, Tier tier) {
  StatusOr<KernelRef> ref = engine.Acquire(kernel, tier);
  BOOST_REQUIRE_MESSAGE(ref.ok(), ref.status().ToString());
  BOOST_TEST((ref->tier() == tier));
  return ref;
}

// Shape-function-like: bounded integer size arithmetic on a runtime dim, no loop.
BOOST_AUTO_TEST_CASE(first_tier_straight_line_code_matches_the_optimized_tier) {
  std::unique_ptr<Engine> engine = NewEngine();
  Buffer in = Buffer::Param("in", DType::kI64, 2), out = Buffer::Param("out", DType::kI64, 1);
  Expr d = DimOf(in, 1);
  std::vector<Stmt> stores;
  Expr bytes = IntImm(1);
  for (int64_t k = 0; k < 24; ++k) {
    // Each step uses the last once: a tree, not a DAG the canonical form would write out 2^24x.
    bytes = Min(bytes * Min(d, IntImm(512)) + IntImm(k), IntImm(int64_t{1} << 40));
    stores.push_back(Store(out, {IntImm(k)}, Max(bytes, Load(in, {IntImm(k % 3), IntImm(0)}))));
  }
  Kernel kernel{"sizes", {in, out}, {}, Seq(stores)};
  StatusOr<KernelRef> fast = AcquireAt(*engine, kernel, Tier::kFast);
  StatusOr<KernelRef> optimized = AcquireAt(*engine, kernel, Tier::kOptimized);
  // Three rows, read at column 0: in bounds for every dim (a [1, dim] input read at column
  // k % 3 read past the buffer at dim 1, and the tiers then disagreed on what lay there).
  for (int64_t dim : {1, 3, 7, 600}) {
    TestBuffer a(DType::kI64, {3, dim}), got(DType::kI64, {24}), want(DType::kI64, {24});
    for (int64_t e = 0; e < 3 * dim; ++e) a.SetI(e, 5 * e - 9);
    Call(fast->fn(), {&a, &got});
    Call(optimized->fn(), {&a, &want});
    for (int64_t k = 0; k < 24; ++k) BOOST_TEST(got.IntAt(k) == want.IntAt(k), "dim " << dim);
  }
}

// A serial loop over a fully unrolled constant-extent loop over a vectorized loop calling
// libmvec's exp: every loop kind the first tier's pipeline treats apart.
BOOST_AUTO_TEST_CASE(first_tier_unrolled_and_vectorized_loops_match_the_optimized_tier) {
  std::unique_ptr<Engine> engine = NewEngine();
  Buffer a = Buffer::Param("a", DType::kF32, 3), out = Buffer::Param("out", DType::kF32, 3);
  Var i("i"), j("j"), k("k");
  Expr x = Load(a, {i, j, k});
  Stmt body = For(i, DimOf(out, 0), ForKind::kSerial,
                  For(j, IntImm(4), ForKind::kUnrolled,
                      For(k, DimOf(out, 2), ForKind::kVectorized,
                          Store(out, {i, j, k}, Exp(x) * FloatImm(0.5) + x * Cast(DType::kF32, j)))));
  Kernel kernel{"unrolled_exp", {a, out}, {}, body};
  StatusOr<KernelRef> fast = AcquireAt(*engine, kernel, Tier::kFast);
  StatusOr<KernelRef> optimized = AcquireAt(*engine, kernel, Tier::kOptimized);
  for (int64_t n : {1, 13, 67}) {  // below, at and past a vector's width, with remainders
    TestBuffer in(DType::kF32, {3, 4, n}), got(DType::kF32, {3, 4, n}), want(DType::kF32, {3, 4, n});
    for (int64_t e = 0; e < 12 * n; ++e) in.Set(e, -4.0 + 8.0 * e / (12 * n));
    Call(fast->fn(), {&in, &got});
    Call(optimized->fn(), {&in, &want});
    for (int64_t e = 0; e < 12 * n; ++e) {
      // exp from libmvec (vector lanes) or libm (a scalar remainder) is within 4 ulp of exact at
      // either tier; one multiply-add more: a relative 2e-6 bounds the difference.
      BOOST_TEST(std::fabs(got.At(e) - want.At(e)) <= 2e-6 * (std::fabs(want.At(e)) + 1),
                 "n " << n << " element " << e);
    }
  }
}

// Bytes of anonymous executable mappings in this process: where the JIT puts kernel code.
int64_t ExecutableAnonymousBytes() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  int64_t total = 0;
  while (std::getline(maps, line)) {
    std::istringstream in(line);
    std::string range, perms, offset, device, inode, path;
    in >> range >> perms >> offset >> device >> inode >> path;
    if (perms.size() < 3 || perms[2] != 'x' || !path.empty() || inode != "0") continue;
    size_t dash = range.find('-');
    total += static_cast<int64_t>(std::stoull(range.substr(dash + 1), nullptr, 16) -
                                  std::stoull(range.substr(0, dash), nullptr, 16));
  }
  return total;
}

BOOST_AUTO_TEST_CASE(acquired_kernels_are_freed_after_their_last_reference) {
  std::unique_ptr<Engine> engine = NewEngine();
  StatusOr<KernelRef> a = engine->Acquire(ScaleKernel("first", 3.0));
  StatusOr<KernelRef> b = engine->Acquire(ScaleKernel("renamed", 3.0));  // same structure
  BOOST_REQUIRE_MESSAGE(a.ok(), a.status().ToString());
  BOOST_REQUIRE_MESSAGE(b.ok(), b.status().ToString());
  BOOST_TEST(a->fn() == b->fn());
  BOOST_TEST(engine->stats().compilations == 1);
  *a = KernelRef();
  BOOST_TEST(engine->stats().freed_kernels == 0);  // b still holds it
  ExpectScaled(b->fn(), 3.0);
  *b = KernelRef();
  EngineStats stats = engine->stats();
  BOOST_TEST(stats.freed_kernels == 1);
  BOOST_TEST(stats.cached_kernels == 0);
  // Asked for again, it compiles again (the same symbol, if it had one, is free again).
  StatusOr<KernelRef> c = engine->Acquire(ScaleKernel("first", 3.0));
  BOOST_REQUIRE(c.ok());
  BOOST_TEST(engine->stats().compilations == 2);
  ExpectScaled(c->fn(), 3.0);
}

BOOST_AUTO_TEST_CASE(a_kernel_released_inside_a_guard_stays_until_the_guard_ends) {
  std::unique_ptr<Engine> engine = NewEngine();
  {
    EpochGuard guard;
    StatusOr<KernelRef> ref = engine->Acquire(ScaleKernel("held", 4.0));
    BOOST_REQUIRE(ref.ok());
    KernelFn fn = ref->fn();
    *ref = KernelRef();  // e.g. another thread evicted it while this one was about to call it
    BOOST_TEST(engine->stats().freed_kernels == 0);
    ExpectScaled(fn, 4.0);  // still there
    // Taken again before it was freed: the same code, kept.
    StatusOr<KernelRef> again = engine->Acquire(ScaleKernel("held", 4.0));
    BOOST_REQUIRE(again.ok());
    BOOST_TEST(again->fn() == fn);
    BOOST_TEST(engine->stats().compilations == 1);
  }
  // The guard's end freed the first retirement's claim, not the code taken again (and now
  // released at the end of that scope, freed too since no guard is left).
  BOOST_TEST(engine->stats().freed_kernels == 1);
  BOOST_TEST(engine->stats().cached_kernels == 0);
}

BOOST_AUTO_TEST_CASE(pinned_kernels_are_never_freed) {
  std::unique_ptr<Engine> engine = NewEngine();
  StatusOr<KernelFn> pinned = engine->GetOrCompile(ScaleKernel("pinned", 6.0));
  BOOST_REQUIRE(pinned.ok());
  { StatusOr<KernelRef> ref = engine->Acquire(ScaleKernel("counted", 6.0)); }
  BOOST_TEST(engine->stats().freed_kernels == 0);
  BOOST_TEST(engine->stats().cached_kernels == 1);
  ExpectScaled(*pinned, 6.0);
}

// The code is really unmapped: 64 kernels compiled and released one after the other leave the
// process's executable memory where it was, while 64 pinned ones grow it by a page or more each.
BOOST_AUTO_TEST_CASE(released_kernels_give_their_code_memory_back) {
  std::unique_ptr<Engine> engine = NewEngine();
  {  // warm-up: LLVM's own one-time allocations
    StatusOr<KernelRef> ref = engine->Acquire(ScaleKernel("warm", 0.5));
    BOOST_REQUIRE(ref.ok());
  }
  const int64_t before = ExecutableAnonymousBytes();
  for (int i = 0; i < 64; ++i) {
    StatusOr<KernelRef> ref = engine->Acquire(ScaleKernel("released", 1.0 + i));
    BOOST_REQUIRE(ref.ok());
    ExpectScaled(ref->fn(), 1.0 + i);
  }
  const int64_t after_released = ExecutableAnonymousBytes();
  for (int i = 0; i < 64; ++i) {
    StatusOr<KernelFn> fn = engine->GetOrCompile(ScaleKernel("pinned", 1.0 + i));
    BOOST_REQUIRE(fn.ok());
  }
  const int64_t after_pinned = ExecutableAnonymousBytes();
  BOOST_TEST_MESSAGE("executable anonymous bytes: " << before << " -> " << after_released
                                                     << " (64 released) -> " << after_pinned
                                                     << " (64 pinned)");
  BOOST_TEST(engine->stats().freed_kernels == 65);
  BOOST_TEST(after_pinned - after_released >= 64 * 4096);
  BOOST_TEST(after_released - before <= 4 * 4096);
}

}  // namespace
}  // namespace kiln::jit
