// Shape and Tensor: a typed view (offset, shape, strides) over reference-counted Storage.
#ifndef KILN_BASE_TENSOR_H_
#define KILN_BASE_TENSOR_H_

#include <cstdint>
#include <initializer_list>
#include <string>

#include "base/dtype.h"
#include "base/status.h"
#include "base/storage.h"

namespace kiln {

class Allocator;

/// Largest rank a kiln tensor may have. Fixed so tensors never allocate for their metadata.
inline constexpr int kMaxRank = 8;

/// A list of up to kMaxRank non-negative dimensions, stored inline.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);  // asserts rank <= kMaxRank (for literals)
  /// Checked construction for untrusted input: rank <= kMaxRank and every dim >= 0.
  static StatusOr<Shape> Make(const int64_t* dims, int rank);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i]; }
  int64_t& operator[](int i) { return dims_[i]; }
  const int64_t* data() const { return dims_; }
  /// Product of the dims (1 for rank 0). Assumes it was checked not to overflow (see below).
  int64_t NumElements() const;
  /// Product of the dims, or OutOfRange if it overflows int64 or exceeds 2^47 elements.
  StatusOr<int64_t> CheckedNumElements() const;
  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }
  /// "[2, 3, 4]"
  std::string ToString() const;

 private:
  int rank_ = 0;
  int64_t dims_[kMaxRank] = {};
};

/// A view of `shape` elements of `dtype` at `byte_offset` in a storage. Cheap to copy (one
/// atomic reference-count increment). Strides are in elements; tensors kiln allocates are
/// contiguous (row-major). A default-constructed Tensor is empty (no storage).
class Tensor {
 public:
  Tensor() = default;
  /// A view over existing storage. InvalidArgument if the view does not fit in the storage.
  static StatusOr<Tensor> View(StorageRef storage, int64_t byte_offset, DType dtype,
                               const Shape& shape);
  /// A fresh contiguous tensor from `allocator` (uninitialised).
  static StatusOr<Tensor> Allocate(Allocator& allocator, DType dtype, const Shape& shape);
  /// A non-owning view of caller memory (zero copy); the caller keeps `data` alive and
  /// unchanged for as long as any copy of the tensor exists.
  static Tensor Wrap(void* data, DType dtype, const Shape& shape);

  bool empty() const { return !storage_; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int i) const { return shape_[i]; }
  int64_t stride(int i) const { return strides_[i]; }
  const int64_t* strides() const { return strides_; }
  int64_t byte_offset() const { return byte_offset_; }
  const StorageRef& storage() const { return storage_; }
  int64_t NumElements() const { return shape_.NumElements(); }
  size_t NumBytes() const { return static_cast<size_t>(NumElements()) * DTypeSize(dtype_); }
  bool IsContiguous() const;

  void* data() const { return static_cast<char*>(storage_->data()) + byte_offset_; }
  template <typename T>
  T* data_as() const { return static_cast<T*>(data()); }

  /// Same storage and offset, new contiguous shape with the same number of elements.
  StatusOr<Tensor> Reshape(const Shape& shape) const;

  /// "f32[2, 3]"
  std::string TypeString() const;

 private:
  void SetContiguousStrides();

  StorageRef storage_;
  int64_t byte_offset_ = 0;
  DType dtype_ = DType::kInvalid;
  Shape shape_;
  int64_t strides_[kMaxRank] = {};
};

}  // namespace kiln

#endif  // KILN_BASE_TENSOR_H_
