// Persistent object cache for JIT kernels: one checked object file per compiled variant, LRU-bounded.
#ifndef KILN_JIT_OBJECT_CACHE_H_
#define KILN_JIT_OBJECT_CACHE_H_

#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/Support/MemoryBuffer.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"
#include "jit/codegen.h"
#include "jit/kernel_ir.h"

namespace kiln::jit {

/// Part of every cache key: bump it whenever the lowering or the runtime ABI changes in a way
/// the source fingerprint (below) cannot see, e.g. a change in base/ that alters kernels' code.
inline constexpr const char* kObjectCacheVersion = "kiln-jit-2";

/// Default bound on a cache directory's size.
inline constexpr uint64_t kDefaultObjectCacheBytes = uint64_t{1} << 30;

/// Everything an object depends on besides its kernel and lowering options: kObjectCacheVersion,
/// a fingerprint of the jit/ sources this kiln was built from, the LLVM release (`llvm_version`,
/// default the one kiln is built with), the target triple, CPU name and CPU features. Objects
/// are only ever loaded by a process whose environment is byte-for-byte the same.
std::string ObjectCacheEnvironment(const TargetInfo& target, const std::string& llvm_version = "");

/// The cache key of `kernel` compiled in `environment` (ObjectCacheEnvironment) with `options`:
/// "k" and 32 hex digits, two independent 64-bit hashes of the kernel's canonical form (names do
/// not matter), the environment and the lowering options.
std::string ObjectCacheKey(const Kernel& kernel, const std::string& environment,
                           const CodegenOptions& options);
/// As above in the environment of `target` with this build's LLVM.
std::string ObjectCacheKey(const Kernel& kernel, const TargetInfo& target,
                           const CodegenOptions& options);

struct ObjectCacheStats {
  int64_t hits = 0;            // objects loaded from disk
  int64_t misses = 0;          // no file for the key
  int64_t corrupt = 0;         // files rejected (bad header, length, checksum or environment)
                               // and deleted
  int64_t writes = 0;          // objects written
  int64_t write_failures = 0;  // objects that could not be written (the cache stays usable)
  int64_t evictions = 0;       // entries deleted to stay within the size bound
};

/// An llvm::ObjectCache in a directory. File <dir>/<key>.o holds a 32-byte header (magic
/// "KOBJ", u32 format version, u64 environment length, u64 object length, u64 FNV-1a checksum
/// of environment and object), the environment text, then the object bytes. A file that fails
/// any check (including an environment other than this cache's) is counted, deleted and treated
/// as a miss, so the next compile rewrites it.
///
/// Concurrency: any number of threads and processes may share one directory. Writes go to a
/// temporary file in the directory renamed into place, so readers never see a partial file.
///
/// Size: a write that would take the directory's entries past `max_bytes` first deletes the
/// least recently used entries (a load refreshes an entry's access time). The total is
/// rescanned from the directory only when this process's running estimate says the bound is
/// reached, so concurrent processes may overshoot it by what they wrote since their last scan.
///
/// As an llvm::ObjectCache it is keyed by the module identifier, which must be an
/// ObjectCacheKey (other modules are neither cached nor looked up). Thread-safe; I/O errors
/// never fail a compile. The first failed write in a process prints one warning on stderr
/// (shared with OpenOrWarn: at most one per process).
class DiskObjectCache : public llvm::ObjectCache {
 public:
  /// Uses `dir`, creating it if missing, for objects of `environment`. kInternal naming the
  /// directory if it cannot be created or is not writable; kInvalidArgument for max_bytes 0.
  static StatusOr<std::unique_ptr<DiskObjectCache>> Open(
      const std::string& dir, const std::string& environment,
      uint64_t max_bytes = kDefaultObjectCacheBytes);
  /// As Open, but a directory that cannot be used is not an error: the first such failure in
  /// the process prints one warning on stderr (later ones are silent) and null is returned, so
  /// the caller runs without a cache.
  static std::unique_ptr<DiskObjectCache> OpenOrWarn(const std::string& dir,
                                                     const std::string& environment,
                                                     uint64_t max_bytes);

  /// The object stored under `key`, or null (miss, rejected file or malformed key).
  std::unique_ptr<llvm::MemoryBuffer> Load(const std::string& key);
  /// Stores `object` under `key`, evicting old entries first if needed (ignored for a malformed
  /// key or an object larger than the bound).
  void Store(const std::string& key, llvm::StringRef object);
  /// Deletes the entry for `key` if present.
  void Remove(const std::string& key);
  std::string PathFor(const std::string& key) const { return dir_ + "/" + key + ".o"; }
  const std::string& dir() const { return dir_; }
  ObjectCacheStats stats() const;

  void notifyObjectCompiled(const llvm::Module* module, llvm::MemoryBufferRef object) override;
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module* module) override;

 private:
  DiskObjectCache(std::string dir, std::string environment, uint64_t max_bytes)
      : dir_(std::move(dir)), environment_(std::move(environment)), max_bytes_(max_bytes) {}
  std::unique_ptr<llvm::MemoryBuffer> LoadImpl(const std::string& key, bool count);
  // Makes room for `incoming` bytes under max_bytes_; false if the object can never fit.
  bool Reserve(uint64_t incoming);
  // Deletes least recently used entries until at most `target` bytes remain; returns the bytes
  // left. Also removes temporary files abandoned by dead writers.
  uint64_t EvictTo(uint64_t target);

  std::string dir_, environment_;
  uint64_t max_bytes_;
  std::atomic<int64_t> hits_{0}, misses_{0}, corrupt_{0}, writes_{0}, write_failures_{0},
      evictions_{0};
  std::atomic<uint64_t> temp_counter_{0};
  std::mutex size_mu_;      // guards the two fields below
  bool scanned_ = false;    // used_bytes_ was read from the directory at least once
  uint64_t used_bytes_ = 0; // estimate of the entries' total size
};

}  // namespace kiln::jit

#endif  // KILN_JIT_OBJECT_CACHE_H_
