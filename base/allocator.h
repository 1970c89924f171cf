// Allocator: 64-byte-aligned storage with size-class pooling and a bounded cache.
#ifndef KILN_BASE_ALLOCATOR_H_
#define KILN_BASE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "base/storage.h"

namespace kiln {

/// Counters for tests, benchmarks and `kiln bench`.
struct AllocatorStats {
  size_t bytes_in_use = 0;      // capacity of storages handed out and not yet released
  size_t bytes_cached = 0;      // capacity of released storages kept for reuse
  size_t peak_bytes = 0;        // max of bytes_in_use + bytes_cached
  uint64_t allocations = 0;     // Allocate calls that succeeded
  uint64_t cache_hits = 0;      // ... served from the cache (no system call)
  uint64_t system_allocs = 0;   // blocks obtained from the system
  uint64_t system_frees = 0;    // blocks returned to the system (evictions, Trim)
};

/// Hands out Storage from size classes (powers of two, each split in four steps, so rounding
/// wastes at most 25%). Released storage is cached for reuse: steady-state inference with
/// repeating shapes never calls the system allocator and never re-faults fresh pages. The
/// cache is bounded by `cache_cap_bytes`; when a release would exceed it, the least recently
/// released blocks are returned to the system first, so varying shapes cannot grow it without
/// bound. Thread-safe. Must outlive every Storage it handed out.
class Allocator {
 public:
  static constexpr size_t kDefaultCacheCap = size_t{1} << 30;  // 1 GiB

  explicit Allocator(size_t cache_cap_bytes = kDefaultCacheCap);
  ~Allocator();
  Allocator(const Allocator&) = delete;
  Allocator& operator=(const Allocator&) = delete;

  /// A storage of at least `bytes` (0 is allowed), 64-byte aligned, uninitialised; one
  /// reference owned by the caller. ResourceExhausted if the system has no memory or `bytes`
  /// is absurd (> 2^47).
  StatusOr<StorageRef> Allocate(size_t bytes);

  /// Returns every cached block to the system.
  void Trim();
  /// Changes the cap; evicts at once if the cache is above it.
  void SetCacheCap(size_t cap_bytes);
  size_t cache_cap() const;
  AllocatorStats stats() const;

  /// The size class capacity `bytes` rounds up to (exposed for tests).
  static size_t RoundUp(size_t bytes);

 private:
  friend class Storage;
  void Return(Storage* s);          // called by Storage::Release for pooled storage
  void EvictLocked(size_t target);  // frees LRU blocks until bytes_cached <= target
  void UnlinkCachedLocked(Storage* s);  // removes a cached block from both lists
  void FreeBlock(Storage* s);
  static int SizeClass(size_t capacity);

  mutable std::mutex mu_;
  size_t cap_;
  AllocatorStats stats_;
  std::vector<Storage*> free_lists_;  // per size class: cached blocks, most recent first
  Storage* lru_head_ = nullptr;       // most recently released
  Storage* lru_tail_ = nullptr;       // least recently released
};

}  // namespace kiln

#endif  // KILN_BASE_ALLOCATOR_H_
