// Storage: a reference-counted, 64-byte-aligned byte buffer that tensors view.
#ifndef KILN_BASE_STORAGE_H_
#define KILN_BASE_STORAGE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

namespace kiln {

class Allocator;

inline constexpr size_t kStorageAlignment = 64;

/// A byte buffer shared by the tensors that view it. Three origins:
///  - pooled: from an Allocator; the last release returns it to the allocator's cache;
///  - borrowed: memory owned elsewhere (a mapped executable's constants, a caller's buffer),
///    kept alive by an optional `keepalive` handle until the last release;
///  - the refcount is atomic, so tensors may be handed across threads.
class Storage {
 public:
  /// Borrows `data` (not copied). `keepalive` (may be null) is held until the last release.
  /// The returned storage carries one reference, owned by the caller.
  static Storage* Borrow(void* data, size_t size, std::shared_ptr<const void> keepalive);

  void* data() const { return data_; }
  size_t size() const { return size_; }
  bool pooled() const { return allocator_ != nullptr; }

  void Retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  void Release();
  int32_t ref_count() const { return refs_.load(std::memory_order_relaxed); }

 private:
  friend class Allocator;
  Storage() = default;

  std::atomic<int32_t> refs_{1};
  void* data_ = nullptr;
  size_t size_ = 0;           // bytes requested (<= capacity for pooled storage)
  Allocator* allocator_ = nullptr;
  // Pooled-only bookkeeping, owned by the allocator.
  size_t capacity_ = 0;
  int size_class_ = -1;
  Storage* lru_prev_ = nullptr;
  Storage* lru_next_ = nullptr;
  Storage* class_prev_ = nullptr;  // same-size-class cached blocks, doubly linked
  Storage* class_next_ = nullptr;
  // Borrowed-only.
  std::shared_ptr<const void> keepalive_;
};

/// An owning handle to a Storage (intrusive reference count).
class StorageRef {
 public:
  StorageRef() = default;
  /// Adopts one reference already held by the caller.
  static StorageRef Adopt(Storage* s) { StorageRef r; r.ptr_ = s; return r; }
  StorageRef(const StorageRef& o) : ptr_(o.ptr_) { if (ptr_) ptr_->Retain(); }
  StorageRef(StorageRef&& o) noexcept : ptr_(std::exchange(o.ptr_, nullptr)) {}
  StorageRef& operator=(const StorageRef& o) {
    if (o.ptr_) o.ptr_->Retain();
    if (ptr_) ptr_->Release();
    ptr_ = o.ptr_;
    return *this;
  }
  StorageRef& operator=(StorageRef&& o) noexcept {
    if (this != &o) {
      if (ptr_) ptr_->Release();
      ptr_ = std::exchange(o.ptr_, nullptr);
    }
    return *this;
  }
  ~StorageRef() { if (ptr_) ptr_->Release(); }

  Storage* get() const { return ptr_; }
  Storage* operator->() const { return ptr_; }
  explicit operator bool() const { return ptr_ != nullptr; }
  void reset() { if (ptr_) ptr_->Release(); ptr_ = nullptr; }

 private:
  Storage* ptr_ = nullptr;
};

}  // namespace kiln

#endif  // KILN_BASE_STORAGE_H_
