// Size-class pooling allocator with an LRU-bounded cache.
#include "base/allocator.h"

#include <cstdlib>
#include <new>
#include <string>

namespace kiln {
namespace {

constexpr size_t kMinCapacity = 64;
constexpr int kMinLog2 = 6;
constexpr size_t kMaxBytes = size_t{1} << 47;
constexpr int kNumClasses = (48 - kMinLog2) * 4;

int FloorLog2(size_t x) { return 63 - __builtin_clzll(x); }

}  // namespace

void Storage::Release() {
  if (refs_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  if (allocator_ != nullptr) {
    allocator_->Return(this);
  } else {
    delete this;  // borrowed: drops the keepalive
  }
}

Storage* Storage::Borrow(void* data, size_t size, std::shared_ptr<const void> keepalive) {
  auto* s = new Storage();
  s->data_ = data;
  s->size_ = size;
  s->keepalive_ = std::move(keepalive);
  return s;
}

size_t Allocator::RoundUp(size_t bytes) {
  if (bytes <= kMinCapacity) return kMinCapacity;
  int k = FloorLog2(bytes);
  size_t base = size_t{1} << k;
  if (bytes == base) return base;
  size_t step = base >> 2;
  return base + ((bytes - base + step - 1) / step) * step;  // may equal 2^(k+1)
}

int Allocator::SizeClass(size_t capacity) {
  int k = FloorLog2(capacity);
  size_t base = size_t{1} << k;
  return (k - kMinLog2) * 4 + static_cast<int>((capacity - base) / (base >> 2));
}

Allocator::Allocator(size_t cache_cap_bytes) : cap_(cache_cap_bytes), free_lists_(kNumClasses) {}

Allocator::~Allocator() { Trim(); }

StatusOr<StorageRef> Allocator::Allocate(size_t bytes) {
  if (bytes > kMaxBytes) {
    return ResourceExhausted("allocation of " + std::to_string(bytes) + " bytes exceeds 2^47");
  }
  size_t capacity = RoundUp(bytes);
  int cls = SizeClass(capacity);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.allocations;
    if (Storage* s = free_lists_[cls]) {
      UnlinkCachedLocked(s);
      stats_.bytes_in_use += capacity;
      ++stats_.cache_hits;
      s->size_ = bytes;
      s->refs_.store(1, std::memory_order_relaxed);
      return StorageRef::Adopt(s);
    }
  }
  // aligned_alloc requires a multiple of the alignment; classes below 256 bytes (80, 96, 112)
  // are not, so ask for a little more.
  void* data = std::aligned_alloc(kStorageAlignment,
                                  (capacity + kStorageAlignment - 1) & ~(kStorageAlignment - 1));
  Storage* s = data ? new (std::nothrow) Storage() : nullptr;
  if (s == nullptr) {
    std::free(data);
    std::lock_guard<std::mutex> lock(mu_);
    --stats_.allocations;
    return ResourceExhausted("out of memory allocating " + std::to_string(capacity) + " bytes");
  }
  s->data_ = data;
  s->size_ = bytes;
  s->capacity_ = capacity;
  s->size_class_ = cls;
  s->allocator_ = this;
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.system_allocs;
  stats_.bytes_in_use += capacity;
  if (stats_.bytes_in_use + stats_.bytes_cached > stats_.peak_bytes) {
    stats_.peak_bytes = stats_.bytes_in_use + stats_.bytes_cached;
  }
  return StorageRef::Adopt(s);
}

void Allocator::Return(Storage* s) {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.bytes_in_use -= s->capacity_;
  if (s->capacity_ > cap_) {  // could never be cached
    FreeBlock(s);
    return;
  }
  EvictLocked(cap_ - s->capacity_);
  Storage*& head = free_lists_[s->size_class_];
  s->class_prev_ = nullptr;
  s->class_next_ = head;
  if (head) head->class_prev_ = s;
  head = s;
  s->lru_prev_ = nullptr;
  s->lru_next_ = lru_head_;
  (lru_head_ ? lru_head_->lru_prev_ : lru_tail_) = s;
  lru_head_ = s;
  stats_.bytes_cached += s->capacity_;
}

void Allocator::EvictLocked(size_t target) {
  while (stats_.bytes_cached > target && lru_tail_ != nullptr) {
    Storage* s = lru_tail_;
    UnlinkCachedLocked(s);
    FreeBlock(s);
  }
}

void Allocator::UnlinkCachedLocked(Storage* s) {
  (s->class_prev_ ? s->class_prev_->class_next_ : free_lists_[s->size_class_]) = s->class_next_;
  if (s->class_next_) s->class_next_->class_prev_ = s->class_prev_;
  (s->lru_prev_ ? s->lru_prev_->lru_next_ : lru_head_) = s->lru_next_;
  (s->lru_next_ ? s->lru_next_->lru_prev_ : lru_tail_) = s->lru_prev_;
  s->class_prev_ = s->class_next_ = s->lru_prev_ = s->lru_next_ = nullptr;
  stats_.bytes_cached -= s->capacity_;
}

void Allocator::FreeBlock(Storage* s) {
  ++stats_.system_frees;
  std::free(s->data_);
  delete s;
}

void Allocator::Trim() {
  std::lock_guard<std::mutex> lock(mu_);
  EvictLocked(0);
}

void Allocator::SetCacheCap(size_t cap_bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  cap_ = cap_bytes;
  EvictLocked(cap_);
}

size_t Allocator::cache_cap() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cap_;
}

AllocatorStats Allocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace kiln
