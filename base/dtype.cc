// DType tables.
#include "base/dtype.h"

namespace kiln {
namespace {

struct DTypeInfo {
  const char* name;
  const char* short_name;
  size_t size;
};

constexpr DTypeInfo kInfo[kNumDTypes] = {
    {"invalid", "invalid", 0}, {"float32", "f32", 4}, {"float16", "f16", 2},
    {"bfloat16", "bf16", 2},   {"float64", "f64", 8}, {"int8", "i8", 1},
    {"uint8", "u8", 1},        {"int16", "i16", 2},   {"int32", "i32", 4},
    {"int64", "i64", 8},       {"bool", "bool", 1},   {"uint16", "u16", 2},
    {"uint32", "u32", 4},      {"uint64", "u64", 8},
};

}  // namespace

bool IsValidDType(uint8_t raw) { return raw >= 1 && raw < kNumDTypes; }

size_t DTypeSize(DType t) {
  auto i = static_cast<uint8_t>(t);
  return i < kNumDTypes ? kInfo[i].size : 0;
}

const char* DTypeName(DType t) {
  auto i = static_cast<uint8_t>(t);
  return i < kNumDTypes ? kInfo[i].name : "invalid";
}

const char* DTypeShortName(DType t) {
  auto i = static_cast<uint8_t>(t);
  return i < kNumDTypes ? kInfo[i].short_name : "invalid";
}

std::optional<DType> ParseDType(std::string_view name) {
  for (int i = 1; i < kNumDTypes; ++i) {
    if (name == kInfo[i].name || name == kInfo[i].short_name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF16 || t == DType::kBF16 || t == DType::kF64;
}

bool IsInteger(DType t) {
  return t == DType::kI8 || t == DType::kI16 || t == DType::kI32 || t == DType::kI64 ||
         IsUnsignedInteger(t);
}

bool IsUnsignedInteger(DType t) {
  return t == DType::kU8 || t == DType::kU16 || t == DType::kU32 || t == DType::kU64;
}

}  // namespace kiln
