// Tests for vm/runtime: loading and running JIT executables, options, counters, lifetimes.
#define BOOST_TEST_MODULE runtime_test
#include "embed/runtime.h"

#include <omp.h>
#include <sys/stat.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "jit/compute.h"
#include "tests/jit/test_programs.h"
#include "tests/jit/test_util.h"
#include "vm/builder.h"

namespace kiln {
namespace {

using jit::Buffer;
using jit::Expr;
using jit::Kernel;
using jit::testing::KirKernel;
using jit::testing::KirShapeFunction;

constexpr int64_t kWidth = 4;

// out[0] := value(x) for x: f32[rows, kWidth].
Kernel XShape(const char* name, Expr (*value)(const Buffer& x)) {
  Buffer x = Buffer::Param("x", DType::kF32, 2), out = Buffer::Param("out", DType::kI64, 1);
  return Kernel{name, {x, out}, {}, jit::Store(out, {jit::IntImm(0)}, value(x))};
}

void AllocI64Vector(FunctionBuilder& f, int dst, int s) {
  f.LoadConsti(s, 8);
  f.AllocStorage(s + 1, s);
  f.AllocTensor(dst, s + 1, 0, DType::kI64, {1});
}

// @main(x: f32[batch, 4], b: f32[4]) -> (y = x + b, s = row sums of x): two JIT kernels and two
// shape functions, all kernel IR payloads.
std::vector<uint8_t> BuildAffine() {
  ExecutableBuilder b("runtime_test");
  Kernel add = jit::ElementwiseBinary("add_bias", {DType::kF32, 2, {}}, {DType::kF32, 1, {}},
                                      DType::kF32, [](Expr x, Expr y) { return x + y; });
  auto row_sum = jit::ReduceKernel("row_sum", jit::Reduction::kSum, DType::kF32, 2, {1}, false);
  BOOST_REQUIRE(row_sum.ok());
  int k_add = b.AddKernel(KirKernel(add, {DType::kF32, DType::kF32}, {DType::kF32}));
  int k_sum = b.AddKernel(KirKernel(*row_sum, {DType::kF32}, {DType::kF32}));
  int s_bytes = b.AddShapeFunction(KirShapeFunction(XShape("x_bytes", [](const Buffer& x) {
    return jit::DimOf(x, 0) * jit::DimOf(x, 1) * jit::IntImm(sizeof(float));
  })));
  int s_rows = b.AddShapeFunction(
      KirShapeFunction(XShape("rows", [](const Buffer& x) { return jit::DimOf(x, 0); })));

  std::vector<DimSpec> x_shape = {DimSpec{-1, "batch"}, DimSpec{kWidth, ""}};
  ValueSpec x{"x", DType::kF32, x_shape, false};
  ValueSpec bias{"b", DType::kF32, {DimSpec{kWidth, ""}}, false};
  ValueSpec y{"y", DType::kF32, x_shape, false};
  ValueSpec s{"s", DType::kF32, {DimSpec{-1, "batch"}}, false};
  FunctionBuilder& f = b.AddFunction("main");
  f.AddParam(x);
  f.AddParam(bias);
  f.AddResult(y);
  f.AddResult(s);
  f.ShapeOf(2, 0);
  AllocI64Vector(f, 3, 20);
  f.InvokeShapeFunc(s_bytes, {0}, {3});
  f.AllocStorage(4, 3);
  f.AllocTensorReg(5, 4, 0, DType::kF32, 2);
  f.InvokeKernel(k_add, {0, 1}, {5});
  AllocI64Vector(f, 6, 20);
  f.InvokeShapeFunc(s_rows, {0}, {6});
  f.AllocStorage(7, 3);
  f.AllocTensorReg(8, 7, 0, DType::kF32, 6);
  f.InvokeKernel(k_sum, {0}, {8});
  f.Ret({5, 8});
  MetadataDef meta;
  meta.entry = "main";
  meta.inputs = {x, bias};
  meta.outputs = {y, s};
  b.SetMetadata(meta);
  auto bytes = b.Finish();
  BOOST_REQUIRE_MESSAGE(bytes.ok(), bytes.status().ToString());
  return *bytes;
}

std::string TempDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t ? t : "/tmp";
}

std::string WriteTemp(const std::string& name, const std::vector<uint8_t>& bytes) {
  std::string path = TempDir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  BOOST_REQUIRE(f != nullptr);
  BOOST_REQUIRE_EQUAL(std::fwrite(bytes.data(), 1, bytes.size(), f), bytes.size());
  std::fclose(f);
  return path;
}

// Runs @main on x[i][j] = i * 10 + j + seed, b[j] = j / 2 and checks both results exactly
// (small integers and halves: f32 sums are exact). Returns "" or what is wrong; uses no
// Boost.Test assertion, so threads may call it.
std::string Run(const Runtime& rt, Context& ctx, int64_t batch, float seed = 0) {
  auto x = Tensor::Allocate(rt.allocator(), DType::kF32, Shape{batch, kWidth});
  auto b = Tensor::Allocate(rt.allocator(), DType::kF32, Shape{kWidth});
  if (!x.ok() || !b.ok()) return "allocation failed";
  for (int64_t i = 0; i < batch; ++i)
    for (int64_t j = 0; j < kWidth; ++j) x->data_as<float>()[i * kWidth + j] = i * 10 + j + seed;
  for (int64_t j = 0; j < kWidth; ++j) b->data_as<float>()[j] = j * 0.5f;
  auto out = ctx.Invoke("main", {*x, *b});
  if (!out.ok()) return out.status().ToString();
  if (out->size() != 2) return "expected 2 outputs";
  const Tensor& y = (*out)[0];
  const Tensor& s = (*out)[1];
  if (y.shape() != Shape{batch, kWidth} || s.shape() != Shape{batch}) {
    return "shapes " + y.shape().ToString() + ", " + s.shape().ToString();
  }
  for (int64_t i = 0; i < batch; ++i) {
    float sum = 0;
    for (int64_t j = 0; j < kWidth; ++j) {
      float xv = i * 10 + j + seed;
      sum += xv;
      if (y.data_as<float>()[i * kWidth + j] != xv + j * 0.5f) {
        return "y[" + std::to_string(i) + "][" + std::to_string(j) + "] wrong";
      }
    }
    if (s.data_as<float>()[i] != sum) return "s[" + std::to_string(i) + "] wrong";
  }
  return "";
}

void RunAndCheck(const Runtime& rt, Context& ctx, int64_t batch, float seed = 0) {
  std::string error = Run(rt, ctx, batch, seed);
  BOOST_CHECK_MESSAGE(error.empty(), "batch " << batch << ": " << error);
}

RuntimeOptions Quiet() {
  RuntimeOptions o;
  o.plugins_from_environment = false;  // the test must not depend on the caller's environment
  o.jit_cache = RuntimeOptions::kJitCacheOff;  // nor on what earlier runs left in a JIT cache
  // Compile counts must not depend on when background compiles of the first tier's replacement
  // finish: optimized from the start, unless a test is about tiering.
  o.dispatch.tiering = false;
  return o;
}

BOOST_AUTO_TEST_CASE(loads_bytes_and_file_and_runs_jit_kernels) {
  auto rt = Runtime::Create(Quiet());
  BOOST_REQUIRE_MESSAGE(rt.ok(), rt.status().ToString());
  std::vector<uint8_t> bytes = BuildAffine();

  auto exe = (*rt)->LoadBytes(bytes.data(), bytes.size());
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  auto ctx = (*rt)->NewContext(*exe);
  BOOST_REQUIRE_MESSAGE(ctx.ok(), ctx.status().ToString());
  for (int64_t batch : {1, 3, 17, 3}) RunAndCheck(**rt, **ctx, batch);

  RuntimeStats st = (*rt)->stats();
  // Two kernels and two shape functions, each compiled once (generic variants).
  BOOST_CHECK_EQUAL(st.engine.compilations, 4);
  BOOST_CHECK_EQUAL(st.engine.failures, 0);
  BOOST_CHECK_GE(st.dispatch.compilations, 4);
  BOOST_CHECK_GT(st.engine.compile_seconds, 0.0);
  BOOST_CHECK_GT(st.allocator.allocations, 0u);

  // The same kernels from a file: served by the engine's cache, nothing recompiled.
  auto exe2 = (*rt)->LoadFile(WriteTemp("affine.kiln", bytes));
  BOOST_REQUIRE_MESSAGE(exe2.ok(), exe2.status().ToString());
  auto ctx2 = (*rt)->NewContext(*exe2);
  BOOST_REQUIRE(ctx2.ok());
  RunAndCheck(**rt, **ctx2, 5, 1.0f);
  BOOST_CHECK_EQUAL((*rt)->stats().engine.compilations, 4);
  BOOST_CHECK_GE((*rt)->stats().engine.cache_hits, 4);
}

// RuntimeOptions::ignore_tuned_fallback (`--ignore-tuned-fallback`) reaches the loader, where
// tests/vm/region_trial_test checks what it does.
BOOST_AUTO_TEST_CASE(ignore_tuned_fallback_reaches_the_load_options) {
  RuntimeOptions o = Quiet();
  auto plain = Runtime::Create(o);
  BOOST_REQUIRE(plain.ok());
  BOOST_TEST(!(*plain)->load_options().ignore_tuned_fallback);
  o.ignore_tuned_fallback = true;
  auto ignoring = Runtime::Create(o);
  BOOST_REQUIRE(ignoring.ok());
  BOOST_TEST((*ignoring)->load_options().ignore_tuned_fallback);
}

BOOST_AUTO_TEST_CASE(thread_option_applies_to_creating_and_running_threads) {
  RuntimeOptions o = Quiet();
  o.num_threads = 3;  // not the machine's default, so the effect is observable
  auto rt = Runtime::Create(o);
  BOOST_REQUIRE_MESSAGE(rt.ok(), rt.status().ToString());
  BOOST_CHECK_EQUAL(omp_get_max_threads(), 3);
  BOOST_CHECK_EQUAL((*rt)->num_threads(), 3);
  std::vector<uint8_t> bytes = BuildAffine();
  auto exe = (*rt)->LoadBytes(bytes.data(), bytes.size());
  BOOST_REQUIRE(exe.ok());

  // A thread created afterwards starts from OpenMP's default; running a kernel applies 3.
  int before = -1, after = -1;
  std::string error = "no context";
  std::thread worker([&] {
    before = omp_get_max_threads();
    auto ctx = (*rt)->NewContext(*exe);
    if (ctx.ok()) error = Run(**rt, **ctx, 2);
    after = omp_get_max_threads();
  });
  worker.join();
  BOOST_TEST_MESSAGE("fresh thread default: " << before);
  BOOST_CHECK_EQUAL(error, "");
  BOOST_CHECK_EQUAL(after, 3);
  omp_set_num_threads(omp_get_num_procs());  // leave this thread as other tests expect
}

BOOST_AUTO_TEST_CASE(threads_share_one_runtime_and_executable) {
  auto rt = Runtime::Create(Quiet());
  BOOST_REQUIRE(rt.ok());
  std::vector<uint8_t> bytes = BuildAffine();
  auto exe = (*rt)->LoadBytes(bytes.data(), bytes.size());
  BOOST_REQUIRE(exe.ok());
  std::vector<std::thread> threads;
  std::vector<std::string> errors(3);
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      auto ctx = (*rt)->NewContext(*exe);
      if (!ctx.ok()) {
        errors[t] = ctx.status().ToString();
        return;
      }
      for (int i = 0; i < 20 && errors[t].empty(); ++i) {
        errors[t] = Run(**rt, **ctx, 1 + (i + t) % 5, static_cast<float>(t));
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) BOOST_CHECK_EQUAL(e, "");
  // Each kernel and shape function compiled its generic variant once despite the concurrency.
  (*rt)->WaitForBackgroundCompiles();
  RuntimeStats st = (*rt)->stats();
  BOOST_CHECK_EQUAL(st.engine.failures, 0);
  BOOST_CHECK_EQUAL(st.dispatch.hits + st.dispatch.misses, 3 * 20 * 4);
}

// Runs BuildAffine's main once at `batch` with a runtime made from `o` and checks the answer;
// returns the runtime's stats and, if asked, the JIT cache directory it used.
RuntimeStats RunAffineOnce(const RuntimeOptions& o, int64_t batch, float seed,
                           std::string* cache_dir = nullptr) {
  std::vector<uint8_t> bytes = BuildAffine();
  auto rt = Runtime::Create(o);
  BOOST_REQUIRE_MESSAGE(rt.ok(), rt.status().ToString());
  auto exe = (*rt)->LoadBytes(bytes.data(), bytes.size());
  BOOST_REQUIRE(exe.ok());
  auto ctx = (*rt)->NewContext(*exe);
  BOOST_REQUIRE(ctx.ok());
  RunAndCheck(**rt, **ctx, batch, seed);
  if (cache_dir != nullptr) *cache_dir = (*rt)->jit_cache_dir();
  return (*rt)->stats();
}

// Sets an environment variable for one scope (unset if `value` is null), restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

BOOST_AUTO_TEST_CASE(jit_cache_defaults_to_xdg_cache_home_then_home) {
  std::string xdg = TempDir() + "/xdg", home = TempDir() + "/home";
  {
    ScopedEnv x("XDG_CACHE_HOME", xdg.c_str());
    ScopedEnv h("HOME", home.c_str());
    BOOST_CHECK_EQUAL(JitCacheDirectory(""), xdg + "/kiln");
    BOOST_CHECK_EQUAL(JitCacheDirectory("off"), "");
    BOOST_CHECK_EQUAL(JitCacheDirectory("/some/dir"), "/some/dir");
    RuntimeOptions o = Quiet();
    o.jit_cache = "";  // the default
    std::string used;
    RuntimeStats st = RunAffineOnce(o, 3, 0, &used);
    BOOST_CHECK_EQUAL(used, xdg + "/kiln");
    BOOST_CHECK_EQUAL(st.engine.object_cache_misses, 4);
    BOOST_CHECK(std::filesystem::exists(xdg + "/kiln"));
    st = RunAffineOnce(o, 3, 0);  // a second runtime (process) loads what the first compiled
    BOOST_CHECK_EQUAL(st.engine.object_cache_hits, 4);
  }
  {
    ScopedEnv x("XDG_CACHE_HOME", "relative/dir");  // not absolute: ignored, as XDG says
    ScopedEnv h("HOME", home.c_str());
    BOOST_CHECK_EQUAL(JitCacheDirectory(""), home + "/.cache/kiln");
  }
  {
    ScopedEnv x("XDG_CACHE_HOME", nullptr);
    ScopedEnv h("HOME", nullptr);
    BOOST_CHECK_EQUAL(JitCacheDirectory(""), "");
    std::string used = "unset";
    RunAffineOnce(Quiet(), 3, 0, &used);
    BOOST_CHECK_EQUAL(used, "");
  }
  std::string used = "unset";
  RunAffineOnce(Quiet(), 3, 0, &used);  // Quiet turns the cache off
  BOOST_CHECK_EQUAL(used, "");
}

// The only test in this binary whose cache directory is unusable: the warning is once per
// process, so it must be the first.
BOOST_AUTO_TEST_CASE(an_unusable_jit_cache_warns_once_and_runs_without_a_cache) {
  std::string file = WriteTemp("plain_file", {1, 2, 3});
  RuntimeOptions o = Quiet();
  o.jit_cache = file + "/cache";  // nothing can be created below a regular file, even by root
  std::string used[2] = {"unset", "unset"};
  RuntimeStats st[2];
  std::string err = jit::testing::CaptureStderr(
      [&] {
        for (int i = 0; i < 2; ++i) st[i] = RunAffineOnce(o, 3, 0, &used[i]);  // answers checked
      },
      TempDir() + "/stderr.txt");
  for (int i = 0; i < 2; ++i) {
    BOOST_CHECK_EQUAL(used[i], "");
    BOOST_CHECK_EQUAL(st[i].engine.compilations, 4);
    BOOST_CHECK_EQUAL(st[i].engine.object_cache_misses, 0);
  }
  size_t first = err.find("warning");
  BOOST_CHECK_MESSAGE(first != std::string::npos && err.find("warning", first + 1) == std::string::npos,
                      err);
  BOOST_CHECK_NE(err.find(file), std::string::npos);
}

BOOST_AUTO_TEST_CASE(jit_cache_is_filled_and_reused_by_a_second_runtime) {
  std::string dir = TempDir() + "/jit_cache";
  std::filesystem::remove_all(dir);
  RuntimeOptions o = Quiet();
  o.jit_cache = dir;
  RuntimeStats st = RunAffineOnce(o, 6, 0);
  BOOST_CHECK_EQUAL(st.engine.object_cache_hits, 0);
  BOOST_CHECK_EQUAL(st.engine.object_cache_misses, 4);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    files += e.path().extension() == ".o";
  BOOST_CHECK_EQUAL(files, 4);

  st = RunAffineOnce(o, 6, 2.0f);
  BOOST_CHECK_EQUAL(st.engine.object_cache_hits, 4);
  BOOST_CHECK_EQUAL(st.engine.object_cache_misses, 0);
}

BOOST_AUTO_TEST_CASE(warmup_compiles_everything_so_the_first_invoke_compiles_nothing) {
  RuntimeOptions o = Quiet();
  o.dispatch.tiering = true;  // warm-up compiles optimized code all the same
  auto rt = Runtime::Create(o);
  BOOST_REQUIRE(rt.ok());
  std::vector<uint8_t> bytes = BuildAffine();
  auto exe = (*rt)->LoadBytes(bytes.data(), bytes.size());
  BOOST_REQUIRE(exe.ok());
  Status s = (*rt)->Warmup(*exe, {{"batch", 5}});
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  RuntimeStats warm = (*rt)->stats();
  BOOST_CHECK_EQUAL(warm.engine.compilations, 4);  // two kernels, two shape functions
  BOOST_CHECK_EQUAL(warm.engine.fast_compilations, 0);
  auto ctx = (*rt)->NewContext(*exe);
  BOOST_REQUIRE(ctx.ok());
  RunAndCheck(**rt, **ctx, 5);
  (*rt)->WaitForBackgroundCompiles();  // nothing was queued either
  RuntimeStats after = (*rt)->stats();
  BOOST_CHECK_EQUAL(after.engine.compilations, warm.engine.compilations);
  BOOST_CHECK_EQUAL(after.dispatch.compilations, warm.dispatch.compilations);
  BOOST_CHECK_EQUAL(after.dispatch.tier_ups, 0);

  auto fails = [&](std::shared_ptr<const Executable> e, std::map<std::string, int64_t> dims,
                   WarmupOptions options, StatusCode code, const std::string& text) {
    Status st = (*rt)->Warmup(e, dims, options);
    BOOST_CHECK_MESSAGE(st.code() == code && st.message().find(text) != std::string::npos &&
                            st.message().find("warm-up") != std::string::npos,
                        st.ToString());
  };
  fails(*exe, {}, {}, StatusCode::kInvalidArgument, "no value for 'batch'");
  fails(*exe, {{"batch", 1}, {"seq", 2}}, {}, StatusCode::kInvalidArgument, "'seq'");
  fails(*exe, {{"batch", 1}}, {"nope", true}, StatusCode::kNotFound, "'nope'");
  fails(nullptr, {{"batch", 1}}, {}, StatusCode::kInvalidArgument, "null executable");
}

// With `specialize`, warm-up runs the shape until it is hot, so the specialized variants the
// first requests would make are compiled before them; without it, those requests compile them.
BOOST_AUTO_TEST_CASE(warmup_with_specialize_compiles_the_hot_shapes_variants_too) {
  for (bool specialize : {false, true}) {
    BOOST_TEST_CONTEXT("specialize " << specialize) {
      RuntimeOptions o = Quiet();
      o.dispatch.min_share = 0;  // every hot shape is specialized, whatever its run time
      o.dispatch.payback = 0;
      auto rt = Runtime::Create(o);
      BOOST_REQUIRE(rt.ok());
      std::vector<uint8_t> bytes = BuildAffine();
      auto exe = (*rt)->LoadBytes(bytes.data(), bytes.size());
      BOOST_REQUIRE(exe.ok());
      WarmupOptions w;
      w.specialize = specialize;
      Status s = (*rt)->Warmup(*exe, {{"batch", 5}}, w);
      BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
      RuntimeStats warm = (*rt)->stats();
      BOOST_CHECK_EQUAL(warm.dispatch.specializations > 0, specialize);
      auto ctx = (*rt)->NewContext(*exe);
      BOOST_REQUIRE(ctx.ok());
      for (int i = 0; i < o.dispatch.specialize_after; ++i) RunAndCheck(**rt, **ctx, 5);
      (*rt)->WaitForBackgroundCompiles();
      RuntimeStats after = (*rt)->stats();
      if (specialize) {
        BOOST_CHECK_EQUAL(after.dispatch.compilations, warm.dispatch.compilations);
        BOOST_CHECK_EQUAL(after.engine.compilations, warm.engine.compilations);
        BOOST_CHECK_GT(after.dispatch.hits, warm.dispatch.hits);
      } else {
        BOOST_CHECK_GT(after.dispatch.specializations, 0);
        BOOST_CHECK_GT(after.dispatch.compilations, warm.dispatch.compilations);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(warmup_bucket_values_cover_each_dispatch_bucket) {
  using V = std::vector<int64_t>;
  BOOST_TEST(WarmupBucketValues(1, 16, jit::Bucketing::kPowerOfTwo) == V({1, 2, 3, 4, 7, 8, 15, 16}),
             boost::test_tools::per_element());
  // A range starting inside a bucket keeps that bucket; one ending inside keeps its top.
  BOOST_TEST(WarmupBucketValues(5, 20, jit::Bucketing::kPowerOfTwo) == V({7, 8, 15, 16, 20}),
             boost::test_tools::per_element());
  BOOST_TEST(WarmupBucketValues(3, 5, jit::Bucketing::kExact) == V({3, 4, 5}),
             boost::test_tools::per_element());
  BOOST_TEST(WarmupBucketValues(0, 5, jit::Bucketing::kExact).empty());
  BOOST_TEST(WarmupBucketValues(6, 5, jit::Bucketing::kPowerOfTwo).empty());
  // Every value of 1..300 rounds up to the power of two of one listed value, and each listed
  // non-power of two is the only one of its bucket.
  V values = WarmupBucketValues(1, 300, jit::Bucketing::kPowerOfTwo);
  BOOST_TEST(values.size() == 17u);  // 9 powers of two, 8 buckets between
  auto round_up = [](int64_t v) {
    int64_t p = 1;
    while (p < v) p *= 2;
    return p;
  };
  for (int64_t v = 1; v <= 300; ++v) {
    bool covered = false;
    for (int64_t w : values) {
      covered |= round_up(w) == round_up(v) && ((v & (v - 1)) == 0) == ((w & (w - 1)) == 0);
    }
    BOOST_TEST(covered, "seq " << v);
  }
}

// Prefetch compiles on the startup threads what the first call needs, at the first tier; the
// call then compiles nothing. With no startup threads it compiles nothing ahead.
BOOST_AUTO_TEST_CASE(prefetch_compiles_the_first_calls_kernels_on_startup_threads) {
  for (int threads : {0, 1, 2}) {
    BOOST_TEST_CONTEXT("startup threads " << threads) {
      RuntimeOptions o = Quiet();
      o.dispatch.tiering = true;
      o.dispatch.startup_compile_threads = threads;
      o.num_threads = 1;  // kernels wrapped to set the OpenMP team: Prefetch goes through
      auto rt = Runtime::Create(o);
      BOOST_REQUIRE(rt.ok());
      std::vector<uint8_t> bytes = BuildAffine();
      auto exe = (*rt)->LoadBytes(bytes.data(), bytes.size());
      BOOST_REQUIRE(exe.ok());
      (*rt)->Prefetch(*exe);
      (*rt)->Prefetch(*exe, "no such function");  // ignored
      (*rt)->Prefetch(nullptr);                   // ignored
      (*rt)->WaitForBackgroundCompiles();
      RuntimeStats ahead = (*rt)->stats();
      const int64_t expected = threads > 0 ? 4 : 0;  // two kernels, two shape functions
      BOOST_CHECK_EQUAL(ahead.engine.compilations, expected);
      BOOST_CHECK_EQUAL(ahead.engine.fast_compilations, expected);
      BOOST_CHECK_EQUAL(ahead.dispatch.fast_generics, expected);
      auto ctx = (*rt)->NewContext(*exe);
      BOOST_REQUIRE(ctx.ok());
      RunAndCheck(**rt, **ctx, 5);  // one call: below the tier-up threshold
      RuntimeStats after = (*rt)->stats();
      BOOST_CHECK_EQUAL(after.engine.compilations, 4);
      BOOST_CHECK_EQUAL(after.engine.fast_compilations, 4);
      BOOST_CHECK_EQUAL(after.dispatch.tier_ups, 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(with_a_jit_cache_the_optimized_tier_is_stored_and_used_from_the_first_call) {
  std::string dir = TempDir() + "/tier_cache";
  std::filesystem::remove_all(dir);
  RuntimeOptions o = Quiet();
  o.jit_cache = dir;
  o.dispatch.tiering = true;
  std::vector<uint8_t> bytes = BuildAffine();
  for (int process = 0; process < 2; ++process) {
    auto rt = Runtime::Create(o);
    BOOST_REQUIRE(rt.ok());
    auto exe = (*rt)->LoadBytes(bytes.data(), bytes.size());
    BOOST_REQUIRE(exe.ok());
    auto ctx = (*rt)->NewContext(*exe);
    BOOST_REQUIRE(ctx.ok());
    RunAndCheck(**rt, **ctx, 3);
    (*rt)->WaitForBackgroundCompiles();
    RunAndCheck(**rt, **ctx, 3);
    RuntimeStats st = (*rt)->stats();
    if (process == 0) {
      // The first tier answered; its replacement was compiled at once (a cache makes it worth
      // it) and stored.
      BOOST_CHECK_EQUAL(st.engine.fast_compilations, 4);
      BOOST_CHECK_EQUAL(st.dispatch.tier_ups, 4);
      BOOST_CHECK_EQUAL(st.engine.object_cache_hits, 0);
      int files = 0;
      for (const auto& e : std::filesystem::directory_iterator(dir))
        files += e.path().extension() == ".o";
      BOOST_CHECK_EQUAL(files, 4);  // optimized objects only: the first tier is never stored
    } else {
      // Found in the cache: optimized from the first call, nothing compiled.
      BOOST_CHECK_EQUAL(st.engine.fast_compilations, 0);
      BOOST_CHECK_EQUAL(st.dispatch.tier_ups, 0);
      BOOST_CHECK_EQUAL(st.engine.object_cache_hits, 4);
    }
  }
}

BOOST_AUTO_TEST_CASE(bad_options_are_clear_errors) {
  RuntimeOptions o = Quiet();
  o.num_threads = -1;
  auto r = Runtime::Create(o);
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK(r.status().code() == StatusCode::kInvalidArgument);
  BOOST_CHECK_NE(r.status().message().find("num_threads = -1"), std::string::npos);

  o = Quiet();
  o.plugins = {"/nonexistent/libvendor.so"};
  r = Runtime::Create(o);
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK(r.status().code() == StatusCode::kNotFound);
  BOOST_CHECK_NE(r.status().message().find("/nonexistent/libvendor.so"), std::string::npos);

  o = Quiet();
  o.jit_cache_bytes = 0;
  r = Runtime::Create(o);
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK(r.status().code() == StatusCode::kInvalidArgument);
  BOOST_CHECK_NE(r.status().message().find("jit_cache_bytes = 0"), std::string::npos);

  o = Quiet();
  o.allocator_cache_bytes = 0;
  r = Runtime::Create(o);
  BOOST_REQUIRE(!r.ok());
  BOOST_CHECK(r.status().code() == StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(bad_calls_are_clear_errors) {
  auto rt = Runtime::Create(Quiet());
  BOOST_REQUIRE(rt.ok());
  auto missing = (*rt)->LoadFile(TempDir() + "/missing.kiln");
  BOOST_REQUIRE(!missing.ok());
  BOOST_CHECK(missing.status().code() == StatusCode::kNotFound);
  BOOST_CHECK((*rt)->LoadBytes(nullptr, 10).status().code() == StatusCode::kInvalidArgument);
  std::vector<uint8_t> junk(64, 0x5a);
  BOOST_CHECK((*rt)->LoadBytes(junk.data(), junk.size()).status().code() ==
              StatusCode::kInvalidFormat);
  BOOST_CHECK((*rt)->NewContext(nullptr).status().code() == StatusCode::kInvalidArgument);
}

BOOST_AUTO_TEST_CASE(outputs_and_contexts_outlive_the_runtime) {
  std::vector<uint8_t> bytes = BuildAffine();
  std::unique_ptr<Context> ctx;
  std::vector<Tensor> kept;
  {
    auto rt = Runtime::Create(Quiet());
    BOOST_REQUIRE(rt.ok());
    auto exe = (*rt)->LoadBytes(bytes.data(), bytes.size());
    BOOST_REQUIRE(exe.ok());
    auto c = (*rt)->NewContext(*exe);
    BOOST_REQUIRE(c.ok());
    ctx = std::move(*c);
  }  // the Runtime and the executable handle are gone; the context keeps their state alive
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8}, b = {0, 0, 0, 1};
  auto out = ctx->Invoke("main", {Tensor::Wrap(x.data(), DType::kF32, Shape{2, kWidth}),
                                  Tensor::Wrap(b.data(), DType::kF32, Shape{kWidth})});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  kept = *out;
  ctx.reset();  // now only the output tensors hold blocks of the runtime's allocator
  BOOST_REQUIRE_EQUAL(kept.size(), 2u);
  BOOST_CHECK_EQUAL(kept[0].data_as<float>()[7], 9.0f);
  BOOST_CHECK_EQUAL(kept[1].data_as<float>()[0], 10.0f);
  BOOST_CHECK_EQUAL(kept[1].data_as<float>()[1], 26.0f);
  kept.clear();  // released into the (kept) allocator, which frees them: ASan checks this
}

}  // namespace
}  // namespace kiln
