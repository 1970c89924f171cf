// Tests for jit/object_cache: hits across engines, corrupt, truncated and foreign entries, keys,
// eviction at the bound, engines sharing a directory, unusable directories.
#define BOOST_TEST_MODULE object_cache_test
#include "jit/object_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <ctime>
#include <functional>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
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
  auto cache = DiskObjectCache::Open(dir, "test environment");
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

BOOST_AUTO_TEST_CASE(keys_depend_on_the_llvm_release_and_the_environment) {
  TargetInfo t{"x86_64-unknown-linux-gnu", "znver4", "+avx2", true, false};
  std::string env = ObjectCacheEnvironment(t);
  BOOST_TEST(ObjectCacheKey(MulAddKernel(), t, {}) == ObjectCacheKey(MulAddKernel(), env, {}));
  BOOST_TEST(ObjectCacheEnvironment(t, "18.1.8") != env);
  BOOST_TEST(ObjectCacheKey(MulAddKernel(), ObjectCacheEnvironment(t, "18.1.8"), {}) !=
             ObjectCacheKey(MulAddKernel(), env, {}));
  for (const std::string& part : {t.triple, t.cpu, t.features, std::string(kObjectCacheVersion)})
    BOOST_TEST(env.find(part) != std::string::npos, env);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A valid entry under the right key, but written for another CPU: a hash collision or a copied
// directory must not make a process run code built for something else.
BOOST_AUTO_TEST_CASE(an_entry_for_another_cpu_or_llvm_is_not_used) {
  std::string dir = FreshDir("foreign");
  std::string file, key, object;
  {
    auto engine = EngineWithCache(dir);
    CompileAndCheck(*engine, MulAddKernel());
    file = CacheFile(*engine, dir, MulAddKernel());
    key = std::filesystem::path(file).stem().string();
    std::string env = ObjectCacheEnvironment(engine->target());
    object = ReadFile(file).substr(32 + env.size());
    TargetInfo other = engine->target();
    other.cpu = other.cpu == "skylake" ? "znver3" : "skylake";
    for (const std::string& foreign :
         {ObjectCacheEnvironment(other), ObjectCacheEnvironment(engine->target(), "18.1.8")}) {
      auto cache = DiskObjectCache::Open(dir, foreign);
      BOOST_REQUIRE(cache.ok());
      (*cache)->Store(key, object);
      BOOST_REQUIRE((*cache)->Load(key));  // valid for the environment that wrote it
      auto next = EngineWithCache(dir);
      CompileAndCheck(*next, MulAddKernel());  // recompiled, not loaded
      BOOST_TEST(next->stats().object_cache_corrupt == 1);
      BOOST_TEST(next->stats().object_cache_hits == 0);
    }
  }
  auto engine = EngineWithCache(dir);  // the entry was replaced by one for this host
  CompileAndCheck(*engine, MulAddKernel());
  BOOST_TEST(engine->stats().object_cache_hits == 1);
}

// An entry with a right header and checksum whose bytes are not an object (a kiln bug, or a
// writer that checksummed garbage) falls back to compiling and is replaced.
BOOST_AUTO_TEST_CASE(an_intact_entry_that_does_not_link_is_recompiled_and_replaced) {
  std::string dir = FreshDir("unlinkable");
  std::string file;
  {
    auto engine = EngineWithCache(dir);
    file = CacheFile(*engine, dir, MulAddKernel());
    auto cache = DiskObjectCache::Open(dir, ObjectCacheEnvironment(engine->target()));
    BOOST_REQUIRE(cache.ok());
    (*cache)->Store(std::filesystem::path(file).stem().string(), "not an ELF object");
    CompileAndCheck(*engine, MulAddKernel());
    BOOST_TEST(engine->stats().failures == 0);
  }
  auto engine = EngineWithCache(dir);
  CompileAndCheck(*engine, MulAddKernel());
  BOOST_TEST(engine->stats().object_cache_hits == 1);
  BOOST_TEST(ReadFile(file).find("not an ELF object") == std::string::npos);
}

// Sets the access time of `path` to `seconds` after the epoch.
void SetAccessTime(const std::string& path, time_t seconds) {
  struct timespec times[2];
  times[0].tv_sec = seconds;
  times[0].tv_nsec = 0;
  times[1].tv_nsec = UTIME_OMIT;
  BOOST_REQUIRE(utimensat(AT_FDCWD, path.c_str(), times, 0) == 0);
}

uint64_t EntryBytes(const std::string& dir, int* files = nullptr) {
  uint64_t total = 0;
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    total += std::filesystem::file_size(e.path());
    ++n;
  }
  if (files) *files = n;
  return total;
}

BOOST_AUTO_TEST_CASE(writes_evict_the_least_recently_used_entries_at_the_bound) {
  std::string dir = FreshDir("evict");
  // Each entry is a 32-byte header, 3 bytes of environment and 300 of object: 335 bytes, so
  // 1,100 bytes hold three.
  auto opened = DiskObjectCache::Open(dir, "env", 1100);
  BOOST_REQUIRE(opened.ok());
  DiskObjectCache& cache = **opened;
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) {
    char key[40];
    std::snprintf(key, sizeof(key), "k%032x", i);
    keys.push_back(key);
  }
  std::string object(300, 'x');
  for (int i = 0; i < 3; ++i) {
    cache.Store(keys[i], object);
    SetAccessTime(cache.PathFor(keys[i]), 1000000 + i);  // 0 oldest, 2 newest
  }
  BOOST_TEST(EntryBytes(dir) == 3 * 335u);
  BOOST_REQUIRE(cache.Load(keys[0]));  // a hit makes 0 the most recently used
  cache.Store(keys[3], object);        // evicts 1, the least recently used
  BOOST_TEST(std::filesystem::exists(cache.PathFor(keys[0])));
  BOOST_TEST(!std::filesystem::exists(cache.PathFor(keys[1])));
  BOOST_TEST(std::filesystem::exists(cache.PathFor(keys[2])));
  BOOST_TEST(std::filesystem::exists(cache.PathFor(keys[3])));
  SetAccessTime(cache.PathFor(keys[3]), 1000005);
  cache.Store(keys[4], object);  // evicts 2
  BOOST_TEST(!std::filesystem::exists(cache.PathFor(keys[2])));
  int files = 0;
  BOOST_TEST(EntryBytes(dir, &files) <= 1100u);
  BOOST_TEST(files == 3);
  BOOST_TEST(cache.stats().evictions == 2);
  // An object that can never fit is not stored, and evicts nothing.
  cache.Store("k" + std::string(32, 'f'), std::string(2000, 'y'));
  BOOST_TEST(!std::filesystem::exists(cache.PathFor("k" + std::string(32, 'f'))));
  BOOST_TEST(EntryBytes(dir) == 3 * 335u);
  // A second cache on the directory (another process) counts what is there before it writes.
  auto second = DiskObjectCache::Open(dir, "env", 1100);
  BOOST_REQUIRE(second.ok());
  (*second)->Store(keys[1], object);
  BOOST_TEST(EntryBytes(dir, &files) <= 1100u);
  BOOST_TEST(files == 3);
}

// A family of kernels that differ in a constant: kernel i computes a * b + i.
Kernel Numbered(int i) {
  return ElementwiseBinary("k" + std::to_string(i), {DType::kF32, 1, {}}, {DType::kF32, 1, {}},
                           DType::kF32,
                           [i](Expr a, Expr b) { return a * b + static_cast<float>(i); });
}

// Compiles Numbered(i) with `engine` and returns whether it computes a * b + i.
bool NumberedIsRight(Engine& engine, int i) {
  auto fn = engine.GetOrCompile(Numbered(i));
  if (!fn.ok()) return false;
  TestBuffer a(DType::kF32, {9}), b(DType::kF32, {9}), out(DType::kF32, {9});
  for (int j = 0; j < 9; ++j) {
    a.Set(j, j);
    b.Set(j, 2);
  }
  testing::Call(*fn, {&a, &b, &out});
  for (int j = 0; j < 9; ++j) {
    if (out.At(j) != static_cast<float>(2 * j + i)) return false;
  }
  return true;
}

// Two engines, each with its own cache object on one directory (as two processes would be),
// fill it at once, in opposite orders so that they race on the same entries.
BOOST_AUTO_TEST_CASE(two_engines_fill_one_directory_at_once) {
  std::string dir = FreshDir("shared");
  constexpr int kKernels = 6;
  auto first = EngineWithCache(dir);
  auto second = EngineWithCache(dir);
  bool right[2] = {true, true};
  std::thread a([&] {
    for (int i = 0; i < kKernels; ++i) right[0] &= NumberedIsRight(*first, i);
  });
  std::thread b([&] {
    for (int i = kKernels - 1; i >= 0; --i) right[1] &= NumberedIsRight(*second, i);
  });
  a.join();
  b.join();
  BOOST_TEST(right[0]);
  BOOST_TEST(right[1]);
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    BOOST_TEST(e.path().extension() == ".o", e.path());  // no temporary file left behind
    ++files;
  }
  BOOST_TEST(files == kKernels);
  auto third = EngineWithCache(dir);
  for (int i = 0; i < kKernels; ++i) BOOST_TEST(NumberedIsRight(*third, i));
  BOOST_TEST(third->stats().object_cache_hits == kKernels);
  BOOST_TEST(third->stats().object_cache_corrupt == 0);
}

int CountOf(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

BOOST_AUTO_TEST_CASE(an_unusable_directory_warns_once_and_the_engine_runs_without_a_cache) {
  auto opened = DiskObjectCache::Open("/proc/kiln_cannot_create_this", "env");
  BOOST_REQUIRE(!opened.ok());
  BOOST_TEST(opened.status().code() == StatusCode::kInternal);
  BOOST_TEST(opened.status().message().find("/proc/kiln_cannot_create_this") != std::string::npos);
  // Below a regular file nothing can be created, whoever runs the test (root included).
  std::string file = FreshDir("plain_file");
  std::ofstream(file) << "x";
  std::string err = testing::CaptureStderr([&] {
    for (const std::string& dir : {std::string("/proc/kiln_cannot_create_this"), file + "/c"}) {
      EngineOptions options;
      options.object_cache_dir = dir;
      auto engine = Engine::Create(options);
      BOOST_REQUIRE_MESSAGE(engine.ok(), engine.status().ToString());
      BOOST_TEST((*engine)->object_cache_dir().empty());
      CompileAndCheck(**engine, MulAddKernel());
      BOOST_TEST((*engine)->stats().compilations == 1);
    }
  }, FreshDir("stderr") + ".txt");
  BOOST_TEST(CountOf(err, "warning") == 1, err);
  BOOST_TEST(err.find("/proc/kiln_cannot_create_this") != std::string::npos, err);
}

}  // namespace
}  // namespace kiln::jit
