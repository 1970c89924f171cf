// Shape and Tensor.
#include "base/tensor.h"

#include <cassert>

#include "base/allocator.h"

namespace kiln {

namespace {
constexpr int64_t kMaxElements = int64_t{1} << 47;
}

Shape::Shape(std::initializer_list<int64_t> dims) {
  assert(dims.size() <= kMaxRank);
  for (int64_t d : dims) dims_[rank_++] = d;
}

StatusOr<Shape> Shape::Make(const int64_t* dims, int rank) {
  if (rank < 0 || rank > kMaxRank) {
    return Unsupported("rank " + std::to_string(rank) + " exceeds the maximum " +
                       std::to_string(kMaxRank));
  }
  Shape s;
  s.rank_ = rank;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] < 0) {
      return InvalidArgument("dim " + std::to_string(i) + " is negative (" +
                             std::to_string(dims[i]) + ")");
    }
    s.dims_[i] = dims[i];
  }
  return s;
}

int64_t Shape::NumElements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) n *= dims_[i];
  return n;
}

StatusOr<int64_t> Shape::CheckedNumElements() const {
  int64_t n = 1;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] < 0) return InvalidArgument("negative dim in shape " + ToString());
    if (dims_[i] == 0) n = 0;  // a zero dim makes any product empty, however large the others
  }
  if (n == 0) return n;
  for (int i = 0; i < rank_; ++i) {
    if (__builtin_mul_overflow(n, dims_[i], &n) || n > kMaxElements) {
      return OutOfRange("shape " + ToString() + " has too many elements");
    }
  }
  return n;
}

bool Shape::operator==(const Shape& o) const {
  if (rank_ != o.rank_) return false;
  for (int i = 0; i < rank_; ++i) {
    if (dims_[i] != o.dims_[i]) return false;
  }
  return true;
}

std::string Shape::ToString() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

void Tensor::SetContiguousStrides() {
  int64_t stride = 1;
  for (int i = shape_.rank() - 1; i >= 0; --i) {
    strides_[i] = stride;
    stride *= shape_[i];
  }
}

bool Tensor::IsContiguous() const {
  int64_t stride = 1;
  for (int i = shape_.rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != stride) return false;
    stride *= shape_[i];
  }
  return true;
}

StatusOr<Tensor> Tensor::View(StorageRef storage, int64_t byte_offset, DType dtype,
                              const Shape& shape) {
  if (!storage) return InvalidArgument("tensor view of a null storage");
  if (!IsValidDType(static_cast<uint8_t>(dtype))) return InvalidArgument("invalid dtype");
  ASSIGN_OR_RETURN(int64_t n, shape.CheckedNumElements());
  uint64_t bytes = static_cast<uint64_t>(n) * DTypeSize(dtype);
  if (byte_offset < 0 || static_cast<uint64_t>(byte_offset) > storage->size() ||
      bytes > storage->size() - static_cast<uint64_t>(byte_offset)) {
    return InvalidArgument("tensor " + std::string(DTypeShortName(dtype)) + shape.ToString() +
                           " at offset " + std::to_string(byte_offset) +
                           " does not fit in storage of " + std::to_string(storage->size()) +
                           " bytes");
  }
  Tensor t;
  t.storage_ = std::move(storage);
  t.byte_offset_ = byte_offset;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.SetContiguousStrides();
  return t;
}

StatusOr<Tensor> Tensor::Allocate(Allocator& allocator, DType dtype, const Shape& shape) {
  if (!IsValidDType(static_cast<uint8_t>(dtype))) return InvalidArgument("invalid dtype");
  ASSIGN_OR_RETURN(int64_t n, shape.CheckedNumElements());
  ASSIGN_OR_RETURN(StorageRef storage, allocator.Allocate(n * DTypeSize(dtype)));
  Tensor t;
  t.storage_ = std::move(storage);
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.SetContiguousStrides();
  return t;
}

Tensor Tensor::Wrap(void* data, DType dtype, const Shape& shape) {
  Tensor t;
  t.storage_ = StorageRef::Adopt(
      Storage::Borrow(data, shape.NumElements() * DTypeSize(dtype), nullptr));
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.SetContiguousStrides();
  return t;
}

StatusOr<Tensor> Tensor::Reshape(const Shape& shape) const {
  ASSIGN_OR_RETURN(int64_t n, shape.CheckedNumElements());
  if (n != NumElements()) {
    return InvalidArgument("cannot reshape " + TypeString() + " to " + shape.ToString());
  }
  if (!IsContiguous()) return InvalidArgument("cannot reshape non-contiguous " + TypeString());
  Tensor t = *this;
  t.shape_ = shape;
  t.SetContiguousStrides();
  return t;
}

std::string Tensor::TypeString() const {
  return std::string(DTypeShortName(dtype_)) + shape_.ToString();
}

}  // namespace kiln
