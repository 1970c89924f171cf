// Persistent object cache: keys, the checked file format and atomic writes.
#include "jit/object_cache.h"

#include <llvm/IR/Module.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

namespace kiln::jit {
namespace {

constexpr char kMagic[4] = {'K', 'O', 'B', 'J'};
constexpr uint32_t kFormatVersion = 1;
constexpr size_t kHeaderSize = 4 + 4 + 8 + 8;

uint64_t Fnv1a(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

bool IsKey(const std::string& key) {
  if (key.size() != 33 || key[0] != 'k') return false;
  for (size_t i = 1; i < key.size(); ++i) {
    char c = key[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

void PutU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}
uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

}  // namespace

std::string ObjectCacheKey(const Kernel& kernel, const TargetInfo& target,
                           const CodegenOptions& options) {
  std::vector<uint64_t> form = CanonicalForm(kernel);
  std::string context = std::string(kObjectCacheVersion) + "|" + target.triple + "|" + target.cpu +
                        "|" + target.features + "|" + (options.optimize ? "O3" : "O0") +
                        (options.use_libmvec ? "|mvec" : "");
  uint64_t a = Fnv1a(context.data(), context.size());
  a = Fnv1a(form.data(), form.size() * sizeof(uint64_t), a);
  uint64_t b =
      HashCanonicalForm(form) ^
      (Fnv1a(context.data(), context.size(), 0x84222325cbf29ce4ull) * 0x9e3779b97f4a7c15ull);
  char buf[40];
  std::snprintf(buf, sizeof(buf), "k%016llx%016llx", static_cast<unsigned long long>(a),
                static_cast<unsigned long long>(b));
  return buf;
}

StatusOr<std::unique_ptr<DiskObjectCache>> DiskObjectCache::Open(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec)) {
    return Internal("object cache: cannot create directory '" + dir + "': " + ec.message());
  }
  return std::unique_ptr<DiskObjectCache>(new DiskObjectCache(dir));
}

std::unique_ptr<llvm::MemoryBuffer> DiskObjectCache::Load(const std::string& key) {
  return LoadImpl(key, true);
}

std::unique_ptr<llvm::MemoryBuffer> DiskObjectCache::LoadImpl(const std::string& key, bool count) {
  if (!IsKey(key)) return nullptr;
  std::ifstream in(PathFor(key), std::ios::binary);
  if (!in) {
    if (count) misses_.fetch_add(1);
    return nullptr;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bool ok = bytes.size() >= kHeaderSize && std::memcmp(bytes.data(), kMagic, 4) == 0;
  if (ok) {
    uint32_t version = 0;
    for (int i = 0; i < 4; ++i)
      version |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[4 + i])) << (8 * i);
    uint64_t length = GetU64(bytes.data() + 8), checksum = GetU64(bytes.data() + 16);
    ok = version == kFormatVersion && length == bytes.size() - kHeaderSize &&
         checksum == Fnv1a(bytes.data() + kHeaderSize, length);
  }
  if (!ok) {
    corrupt_.fetch_add(1);
    Remove(key);
    return nullptr;
  }
  if (count) hits_.fetch_add(1);
  return llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(bytes).drop_front(kHeaderSize), key);
}

void DiskObjectCache::Store(const std::string& key, llvm::StringRef object) {
  if (!IsKey(key)) return;
  std::string header(kMagic, 4);
  for (int i = 0; i < 4; ++i) header.push_back(static_cast<char>(kFormatVersion >> (8 * i)));
  PutU64(&header, object.size());
  PutU64(&header, Fnv1a(object.data(), object.size()));
  std::string temp = PathFor(key) + ".tmp" + std::to_string(getpid()) + "_" +
                     std::to_string(temp_counter_.fetch_add(1));
  bool ok;
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    out.close();
    ok = static_cast<bool>(out);
  }
  std::error_code ec;
  if (ok) std::filesystem::rename(temp, PathFor(key), ec);
  if (!ok || ec) {
    std::filesystem::remove(temp, ec);
    write_failures_.fetch_add(1);
    return;
  }
  writes_.fetch_add(1);
}

void DiskObjectCache::Remove(const std::string& key) {
  if (!IsKey(key)) return;
  std::error_code ec;
  std::filesystem::remove(PathFor(key), ec);
}

ObjectCacheStats DiskObjectCache::stats() const {
  ObjectCacheStats s;
  s.hits = hits_.load();
  s.misses = misses_.load();
  s.corrupt = corrupt_.load();
  s.writes = writes_.load();
  s.write_failures = write_failures_.load();
  return s;
}

void DiskObjectCache::notifyObjectCompiled(const llvm::Module* module,
                                           llvm::MemoryBufferRef object) {
  Store(module->getModuleIdentifier(), object.getBuffer());
}

std::unique_ptr<llvm::MemoryBuffer> DiskObjectCache::getObject(const llvm::Module* module) {
  // The engine looked the key up (and counted it) before generating code; this second look only
  // matters for other users of the llvm::ObjectCache interface.
  return LoadImpl(module->getModuleIdentifier(), false);
}

}  // namespace kiln::jit
