// Tests for jit/object_cache: hits across engines, corrupt and truncated entries, keys.
#define BOOST_TEST_MODULE object_cache_test
#include "jit/object_cache.h"

#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "jit/compute.h"
#include "jit/engine.h"
#include "tests/jit/test_util.h"

namespace kiln::jit {
namespace {

using testing::TestBuffer;

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir =
      std::string(tmp ? tmp : "/tmp") + "/object_cache_" + name + "_" + std::to_string(getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

std::unique_ptr<Engine> EngineWithCache(const std::string& dir) {
  EngineOptions options;
  options.object_cache_dir = dir;
  auto engine = Engine::Create(options);
  BOOST_REQUIRE_MESSAGE(engine.ok(), engine.status().ToString());
  return std::move(*engine);
}

Kernel MulAddKernel(const std::string& name = "muladd") {
  return ElementwiseBinary(name, {DType::kF32, 1, {}}, {DType::kF32, 1, {}}, DType::kF32,
                           [](Expr a, Expr b) { return a * b + 1.0f; });
}

// Compiles with `engine` and checks the kernel computes a * b + 1 on 37 elements.
void CompileAndCheck(Engine& engine, const Kernel& k) {
  auto fn = engine.GetOrCompile(k);
  BOOST_REQUIRE_MESSAGE(fn.ok(), fn.status().ToString());
  TestBuffer a(DType::kF32, {37}), b(DType::kF32, {37}), out(DType::kF32, {37});
  for (int i = 0; i < 37; ++i) {
    a.Set(i, i - 10);
    b.Set(i, 0.5 * i);
  }
  testing::Call(*fn, {&a, &b, &out});
  for (int i = 0; i < 37; ++i)
    BOOST_REQUIRE(out.At(i) == static_cast<float>((i - 10) * (0.5 * i) + 1));
}

std::string CacheFile(Engine& engine, const std::string& dir, const Kernel& k) {
  return dir + "/" +
         ObjectCacheKey(k, engine.target(), CodegenOptions{true, engine.uses_libmvec()}) + ".o";
}

BOOST_AUTO_TEST_CASE(second_engine_loads_instead_of_compiling) {
  std::string dir = FreshDir("hit");
  std::string file;
  {
    auto engine = EngineWithCache(dir);
    CompileAndCheck(*engine, MulAddKernel());
    EngineStats s = engine->stats();
    BOOST_TEST(s.object_cache_misses == 1);
    BOOST_TEST(s.object_cache_hits == 0);
    file = CacheFile(*engine, dir, MulAddKernel());
    BOOST_TEST(std::filesystem::exists(file));
  }
  auto engine = EngineWithCache(dir);
  CompileAndCheck(*engine, MulAddKernel("renamed"));  // names are not part of the key
  BOOST_TEST(engine->stats().object_cache_hits == 1);
  BOOST_TEST(engine->stats().object_cache_misses == 0);
}

void CorruptAndRecover(const std::string& name,
                       const std::function<void(std::string* bytes)>& corrupt) {
  BOOST_TEST_CONTEXT(name) {
    std::string dir = FreshDir(name);
    std::string file;
    {
      auto engine = EngineWithCache(dir);
      CompileAndCheck(*engine, MulAddKernel());
      file = CacheFile(*engine, dir, MulAddKernel());
    }
    std::string bytes;
    {
      std::ifstream in(file, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    BOOST_REQUIRE(bytes.size() > 64u);
    corrupt(&bytes);
    {
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    {
      auto engine = EngineWithCache(dir);
      CompileAndCheck(*engine, MulAddKernel());  // recompiled, still right
      BOOST_TEST(engine->stats().object_cache_corrupt == 1);
      BOOST_TEST(engine->stats().object_cache_hits == 0);
    }
    auto engine = EngineWithCache(dir);  // the entry was rewritten
    CompileAndCheck(*engine, MulAddKernel());
    BOOST_TEST(engine->stats().object_cache_hits == 1);
    BOOST_TEST(engine->stats().object_cache_corrupt == 0);
  }
}

BOOST_AUTO_TEST_CASE(corrupt_entries_are_ignored_and_rewritten) {
  CorruptAndRecover("flipped_object_byte", [](std::string* b) { (*b)[b->size() / 2] ^= 0x40; });
  CorruptAndRecover("truncated", [](std::string* b) { b->resize(b->size() - 17); });
  CorruptAndRecover("header_only", [](std::string* b) { b->resize(10); });
  CorruptAndRecover("bad_magic", [](std::string* b) { (*b)[0] = 'X'; });
  CorruptAndRecover("bad_checksum", [](std::string* b) { (*b)[20] ^= 1; });
  CorruptAndRecover("appended", [](std::string* b) { b->append("junk"); });
}

BOOST_AUTO_TEST_CASE(store_and_load_round_trip) {
  std::string dir = FreshDir("api");
  auto cache = DiskObjectCache::Open(dir);
  BOOST_REQUIRE(cache.ok());
  const std::string key = "k0123456789abcdef0123456789abcdef";
  BOOST_TEST(!(*cache)->Load(key));
  (*cache)->Store(key, "object bytes");
  auto loaded = (*cache)->Load(key);
  BOOST_REQUIRE(loaded);
  BOOST_TEST(loaded->getBuffer().str() == "object bytes");
  // Keys that are not ours (a path, a module name) are never touched.
  (*cache)->Store("../escape", "x");
  BOOST_TEST(!std::filesystem::exists(dir + "/../escape.o"));
  BOOST_TEST(!(*cache)->Load("../escape"));
  ObjectCacheStats s = (*cache)->stats();
  BOOST_TEST(s.hits == 1);
  BOOST_TEST(s.misses == 1);
  BOOST_TEST(s.writes == 1);
}

BOOST_AUTO_TEST_CASE(keys_depend_on_structure_target_and_options) {
  TargetInfo t{"x86_64-unknown-linux-gnu", "znver4", "+avx2", true, false};
  std::string base = ObjectCacheKey(MulAddKernel(), t, {});
  BOOST_TEST(base.size() == 33u);
  BOOST_TEST(ObjectCacheKey(MulAddKernel("other_name"), t, {}) == base);
  TargetInfo t2 = t;
  t2.features = "+avx2,+avx512f";
  BOOST_TEST(ObjectCacheKey(MulAddKernel(), t2, {}) != base);
  t2 = t;
  t2.cpu = "skylake";
  BOOST_TEST(ObjectCacheKey(MulAddKernel(), t2, {}) != base);
  BOOST_TEST(ObjectCacheKey(MulAddKernel(), t, {true, false}) != base);
  Kernel different = ElementwiseBinary("muladd", {DType::kF32, 1, {}}, {DType::kF32, 1, {}},
                                       DType::kF32, [](Expr a, Expr b) { return a * b + 2.0f; });
  BOOST_TEST(ObjectCacheKey(different, t, {}) != base);
}

BOOST_AUTO_TEST_CASE(unwritable_directory_is_an_error_at_create) {
  EngineOptions options;
  options.object_cache_dir = "/proc/kiln_cannot_create_this";
  auto engine = Engine::Create(options);
  BOOST_REQUIRE(!engine.ok());
  BOOST_TEST(engine.status().code() == StatusCode::kInternal);
  BOOST_TEST(engine.status().message().find("object cache") != std::string::npos);
}

}  // namespace
}  // namespace kiln::jit
