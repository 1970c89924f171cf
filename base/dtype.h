// Element types of kiln tensors, their sizes and names (numpy / ONNX spellings).
#ifndef KILN_BASE_DTYPE_H_
#define KILN_BASE_DTYPE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kiln {

/// Numbering matches serializer/executable.fbs `DType` (checked by a static_assert there).
/// f16 and bf16 are storage types: kernels compute them in f32.
enum class DType : uint8_t {
  kInvalid = 0,
  kF32 = 1,
  kF16 = 2,
  kBF16 = 3,
  kF64 = 4,
  kI8 = 5,
  kU8 = 6,
  kI16 = 7,
  kI32 = 8,
  kI64 = 9,
  kBool = 10,
  kU16 = 11,  // added in format 1.x: the unsigned types came after bool (numbering is frozen)
  kU32 = 12,
  kU64 = 13,
};

inline constexpr int kNumDTypes = 14;

/// Bytes per element (bool is one byte); 0 for kInvalid.
size_t DTypeSize(DType t);
/// "float32", "float16", "bfloat16", "float64", "int8", ... "bool"; "invalid" otherwise.
const char* DTypeName(DType t);
/// Short name used in disassembly and the CLI: "f32", "f16", "bf16", "f64", "i8", ..., "bool".
const char* DTypeShortName(DType t);
/// Parses either spelling; nullopt if unknown.
std::optional<DType> ParseDType(std::string_view name);
/// True for a value in [kF32, kU64].
bool IsValidDType(uint8_t raw);
bool IsFloat(DType t);
bool IsInteger(DType t);  // signed or unsigned integers, not bool
/// u8, u16, u32, u64 (not bool).
bool IsUnsignedInteger(DType t);

}  // namespace kiln

#endif  // KILN_BASE_DTYPE_H_
