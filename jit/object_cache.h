// Persistent object cache for JIT kernels: one checksummed object file per compiled variant.
#ifndef KILN_JIT_OBJECT_CACHE_H_
#define KILN_JIT_OBJECT_CACHE_H_

#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/Support/MemoryBuffer.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "jit/codegen.h"
#include "jit/kernel_ir.h"

namespace kiln::jit {

/// Part of every cache key: bump it whenever code generation or the runtime ABI changes, so a new
/// build never loads objects an older one wrote.
inline constexpr const char* kObjectCacheVersion = "kiln-jit-1";

/// The cache key of `kernel` compiled for `target` with `options`: "k" and 32 hex digits, two
/// independent 64-bit hashes of the kernel's canonical form (names do not matter), the target
/// triple, CPU and features, the code generation options and kObjectCacheVersion.
std::string ObjectCacheKey(const Kernel& kernel, const TargetInfo& target,
                           const CodegenOptions& options);

struct ObjectCacheStats {
  int64_t hits = 0;            // objects loaded from disk
  int64_t misses = 0;          // no file for the key
  int64_t corrupt = 0;         // files rejected (bad header, length or checksum) and deleted
  int64_t writes = 0;          // objects written
  int64_t write_failures = 0;  // objects that could not be written (the cache stays usable)
};

/// An llvm::ObjectCache in a directory: file <dir>/<key>.o holds magic "KOBJ", u32 format version,
/// u64 object length, u64 FNV-1a checksum of the object, then the object bytes. A file that fails
/// any check is counted, deleted and treated as a miss, so the next compile rewrites it. Writes go
/// to a temporary file renamed into place, so readers never see a partial file. As an
/// llvm::ObjectCache it is keyed by the module identifier, which must be an ObjectCacheKey (other
/// modules are neither cached nor looked up). Thread-safe; I/O errors never fail a compile.
class DiskObjectCache : public llvm::ObjectCache {
 public:
  /// Uses `dir`, creating it if missing. kInternal if it cannot be created.
  static StatusOr<std::unique_ptr<DiskObjectCache>> Open(const std::string& dir);

  /// The object stored under `key`, or null (miss, corrupt file or malformed key).
  std::unique_ptr<llvm::MemoryBuffer> Load(const std::string& key);
  /// Stores `object` under `key` (ignored for a malformed key).
  void Store(const std::string& key, llvm::StringRef object);
  /// Deletes the entry for `key` if present.
  void Remove(const std::string& key);
  std::string PathFor(const std::string& key) const { return dir_ + "/" + key + ".o"; }
  ObjectCacheStats stats() const;

  void notifyObjectCompiled(const llvm::Module* module, llvm::MemoryBufferRef object) override;
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module* module) override;

 private:
  explicit DiskObjectCache(std::string dir) : dir_(std::move(dir)) {}
  std::unique_ptr<llvm::MemoryBuffer> LoadImpl(const std::string& key, bool count);

  std::string dir_;
  std::atomic<int64_t> hits_{0}, misses_{0}, corrupt_{0}, writes_{0}, write_failures_{0};
  std::atomic<uint64_t> temp_counter_{0};
};

}  // namespace kiln::jit

#endif  // KILN_JIT_OBJECT_CACHE_H_
