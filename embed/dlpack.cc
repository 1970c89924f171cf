// DLPack import/export: dtype mapping, contiguity checks, lifetime through deleters.
#include "embed/dlpack.h"

#include <memory>
#include <string>

namespace kiln {
namespace {

constexpr uint8_t kDLBoolCode = 6;  // kDLBool in DLPack >= 0.8; Debian ships 0.6 without it

bool ToDType(DLDataType t, DType* out) {
  if (t.lanes != 1) return false;
  switch (t.code) {
    case kDLFloat:
      *out = t.bits == 32 ? DType::kF32 : t.bits == 16 ? DType::kF16 : t.bits == 64 ? DType::kF64 : DType::kInvalid;
      break;
    case kDLBfloat: *out = t.bits == 16 ? DType::kBF16 : DType::kInvalid; break;
    case kDLInt:
      *out = t.bits == 8    ? DType::kI8
             : t.bits == 16 ? DType::kI16
             : t.bits == 32 ? DType::kI32
             : t.bits == 64 ? DType::kI64
                            : DType::kInvalid;
      break;
    case kDLUInt:
      *out = t.bits == 8    ? DType::kU8
             : t.bits == 16 ? DType::kU16
             : t.bits == 32 ? DType::kU32
             : t.bits == 64 ? DType::kU64
                            : DType::kInvalid;
      break;
    case kDLBoolCode: *out = t.bits == 8 ? DType::kBool : DType::kInvalid; break;
    default: *out = DType::kInvalid;
  }
  return *out != DType::kInvalid;
}

DLDataType FromDType(DType t) {
  auto bits = static_cast<uint8_t>(DTypeSize(t) * 8);
  switch (t) {
    case DType::kF32:
    case DType::kF16:
    case DType::kF64: return {kDLFloat, bits, 1};
    case DType::kBF16: return {kDLBfloat, bits, 1};
    case DType::kU8:
    case DType::kU16:
    case DType::kU32:
    case DType::kU64: return {kDLUInt, bits, 1};
    case DType::kBool: return {kDLBoolCode, bits, 1};
    default: return {kDLInt, bits, 1};
  }
}

std::string Describe(DLDataType t) {
  return "code " + std::to_string(t.code) + ", " + std::to_string(t.bits) + " bits, " +
         std::to_string(t.lanes) + " lanes";
}

// What ToDLPack hands out: the DLPack struct, the arrays it points to, and the tensor that keeps
// the storage alive.
struct Exported {
  DLManagedTensor managed;
  Tensor tensor;
  int64_t shape[kMaxRank];
  int64_t strides[kMaxRank];
};

}  // namespace

StatusOr<Tensor> FromDLPack(DLManagedTensor* managed) {
  if (managed == nullptr) return InvalidArgument("FromDLPack: null tensor");
  const DLTensor& t = managed->dl_tensor;
  if (t.device.device_type != kDLCPU) {
    return Unsupported("FromDLPack: device type " + std::to_string(t.device.device_type) +
                       " is not the CPU");
  }
  DType dtype;
  if (!ToDType(t.dtype, &dtype)) return Unsupported("FromDLPack: dtype (" + Describe(t.dtype) + ")");
  if (t.ndim < 0 || t.ndim > kMaxRank || (t.ndim > 0 && t.shape == nullptr)) {
    return InvalidArgument("FromDLPack: rank " + std::to_string(t.ndim) + " (at most " +
                           std::to_string(kMaxRank) + ", with a shape)");
  }
  ASSIGN_OR_RETURN(Shape shape, Shape::Make(t.shape, t.ndim));
  ASSIGN_OR_RETURN(int64_t n, shape.CheckedNumElements());
  if (t.strides != nullptr) {
    int64_t expect = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (shape[i] != 1 && t.strides[i] != expect) {
        return InvalidArgument("FromDLPack: dim " + std::to_string(i) + " has stride " +
                               std::to_string(t.strides[i]) + "; only row-major contiguous data is "
                               "accepted (expected " + std::to_string(expect) + ")");
      }
      expect *= shape[i];
    }
  }
  if (t.data == nullptr && n > 0) return InvalidArgument("FromDLPack: null data");
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  size_t bytes = static_cast<size_t>(n) * DTypeSize(dtype);
  // The deleter runs when the storage's last reference goes.
  std::shared_ptr<const void> keepalive(managed, [](DLManagedTensor* m) {
    if (m->deleter) m->deleter(m);
  });
  StorageRef storage = StorageRef::Adopt(Storage::Borrow(data, bytes, std::move(keepalive)));
  return Tensor::View(std::move(storage), 0, dtype, shape);
}

StatusOr<DLManagedTensor*> ToDLPack(const Tensor& tensor) {
  if (tensor.empty()) return InvalidArgument("ToDLPack: empty tensor");
  if (!tensor.IsContiguous()) return InvalidArgument("ToDLPack: tensor is not contiguous");
  auto* e = new Exported();
  e->tensor = tensor;
  for (int i = 0; i < tensor.rank(); ++i) {
    e->shape[i] = tensor.dim(i);
    e->strides[i] = tensor.stride(i);
  }
  DLTensor& t = e->managed.dl_tensor;
  t.data = tensor.data();
  t.device = {kDLCPU, 0};
  t.ndim = tensor.rank();
  t.dtype = FromDType(tensor.dtype());
  t.shape = e->shape;
  t.strides = e->strides;
  t.byte_offset = 0;
  e->managed.manager_ctx = e;
  e->managed.deleter = [](DLManagedTensor* m) { delete static_cast<Exported*>(m->manager_ctx); };
  return &e->managed;
}

}  // namespace kiln
