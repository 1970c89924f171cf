// KServe datatypes; tensor elements <-> JSON data lists and raw (binary) bytes.
#include "examples/serving/tensor_json.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "vm/context.h"

namespace kiln::serving {

namespace {

struct DatatypeName {
  DType dtype;
  const char* name;
};

constexpr DatatypeName kDatatypes[] = {
    {DType::kF32, "FP32"},   {DType::kF16, "FP16"},   {DType::kBF16, "BF16"},
    {DType::kF64, "FP64"},   {DType::kI8, "INT8"},    {DType::kU8, "UINT8"},
    {DType::kI16, "INT16"},  {DType::kI32, "INT32"},  {DType::kI64, "INT64"},
    {DType::kBool, "BOOL"},  {DType::kU16, "UINT16"}, {DType::kU32, "UINT32"},
    {DType::kU64, "UINT64"},
};

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

}  // namespace

const char* KServeDatatype(DType t) {
  for (const DatatypeName& d : kDatatypes) {
    if (d.dtype == t) return d.name;
  }
  return "INVALID";
}

std::optional<DType> ParseKServeDatatype(std::string_view name) {
  for (const DatatypeName& d : kDatatypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

// ---- 16-bit floats -------------------------------------------------------------------------

float HalfToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0x1F) return BitsFloat(sign | 0x7F800000 | (mant << 13));  // inf / NaN
  if (exp == 0) {  // zero or subnormal: mant * 2^-24
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return BitsFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t FloatToHalf(float f) {
  uint32_t u = FloatBits(f);
  uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7E00;
  if (a >= 65520.0f) return sign | 0x7C00;  // rounds past 65504: infinity
  if (a < 6.103515625e-05f) {
    // Subnormal range: a multiple of 2^-24; nearbyint rounds half to even.
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  uint32_t abs_bits = u & 0x7FFFFFFF;
  // Rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even.
  uint32_t rounded = abs_bits + 0xFFF + ((abs_bits >> 13) & 1);
  return sign | static_cast<uint16_t>((rounded >> 13) - (112 << 10));
}

float Bf16ToFloat(uint16_t b) { return BitsFloat(static_cast<uint32_t>(b) << 16); }

uint16_t FloatToBf16(float f) {
  uint32_t u = FloatBits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// ---- Decoding ------------------------------------------------------------------------------

namespace {

// Leaves of nested arrays (a scalar counts as one). Depth is bounded by the parser's limit.
int64_t CountLeaves(const Json& v) {
  if (!v.is_array()) return 1;
  int64_t n = 0;
  for (const Json& item : v.items()) n += CountLeaves(item);
  return n;
}

Status ElementError(std::string_view what, int64_t index, const std::string& problem) {
  return InvalidArgument(std::string(what) + ": data[" + std::to_string(index) + "] " + problem);
}

// A float element as a double: a number, or one of the non-finite spellings the writer uses.
Status FloatElement(const Json& v, std::string_view what, int64_t index, double* out) {
  if (v.is_number()) {
    *out = v.double_value();
    return Status::Ok();
  }
  if (v.is_string()) {
    const std::string& s = v.string_value();
    if (s == "NaN")
      *out = std::numeric_limits<double>::quiet_NaN();
    else if (s == "Infinity")
      *out = std::numeric_limits<double>::infinity();
    else if (s == "-Infinity")
      *out = -std::numeric_limits<double>::infinity();
    else
      return ElementError(what, index, "is the string \"" + s + "\", expected a number");
    return Status::Ok();
  }
  return ElementError(what, index, "is not a number");
}

// An integer element within [lo, hi]. Integral doubles (2.0, 1e3) are accepted.
Status IntElement(const Json& v, std::string_view what, int64_t index, int64_t lo, int64_t hi,
                  int64_t* out) {
  if (!v.is_number()) return ElementError(what, index, "is not a number");
  int64_t i;
  if (v.is_int()) {
    i = v.int_value();
  } else {
    double d = v.double_value();
    if (std::trunc(d) != d) return ElementError(what, index, "is not an integer");
    // [-2^63, 2^63) is exactly the set of integral doubles that fit int64.
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) {
      return ElementError(what, index, "is out of range");
    }
    i = static_cast<int64_t>(d);
  }
  if (i < lo || i > hi) {
    return ElementError(what, index,
                        "= " + std::to_string(i) + " is outside [" + std::to_string(lo) + ", " +
                            std::to_string(hi) + "]");
  }
  *out = i;
  return Status::Ok();
}

template <typename T>
Status StoreInt(const Json& v, std::string_view what, int64_t index, void* out) {
  int64_t i;
  RETURN_IF_ERROR(
      IntElement(v, what, index, std::numeric_limits<T>::min(), std::numeric_limits<T>::max(), &i));
  static_cast<T*>(out)[index] = static_cast<T>(i);
  return Status::Ok();
}

// Finite doubles at or past this magnitude round to infinity in float (FLT_MAX + half an ulp).
constexpr double kFloatOverflow = 0x1.ffffffp127;

Status StoreElement(const Json& v, DType dtype, std::string_view what, int64_t index, void* out) {
  switch (dtype) {
    case DType::kF64: {
      double d;
      RETURN_IF_ERROR(FloatElement(v, what, index, &d));
      static_cast<double*>(out)[index] = d;
      return Status::Ok();
    }
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16: {
      double d;
      RETURN_IF_ERROR(FloatElement(v, what, index, &d));
      if (std::isfinite(d) && std::fabs(d) >= kFloatOverflow) {
        return ElementError(what, index,
                            "is out of range for " + std::string(KServeDatatype(dtype)));
      }
      float f = static_cast<float>(d);
      if (dtype == DType::kF32) {
        static_cast<float*>(out)[index] = f;
        return Status::Ok();
      }
      uint16_t bits = dtype == DType::kF16 ? FloatToHalf(f) : FloatToBf16(f);
      if (std::isfinite(f) &&
          std::isinf(dtype == DType::kF16 ? HalfToFloat(bits) : Bf16ToFloat(bits))) {
        return ElementError(what, index,
                            "is out of range for " + std::string(KServeDatatype(dtype)));
      }
      static_cast<uint16_t*>(out)[index] = bits;
      return Status::Ok();
    }
    case DType::kI8:
      return StoreInt<int8_t>(v, what, index, out);
    case DType::kU8:
      return StoreInt<uint8_t>(v, what, index, out);
    case DType::kI16:
      return StoreInt<int16_t>(v, what, index, out);
    case DType::kI32:
      return StoreInt<int32_t>(v, what, index, out);
    case DType::kI64:
      return StoreInt<int64_t>(v, what, index, out);
    case DType::kU16:
      return StoreInt<uint16_t>(v, what, index, out);
    case DType::kU32:
      return StoreInt<uint32_t>(v, what, index, out);
    case DType::kU64: {
      // JSON numbers are exact only up to int64 here; larger UINT64 values go as binary data.
      int64_t i;
      RETURN_IF_ERROR(IntElement(v, what, index, 0, std::numeric_limits<int64_t>::max(), &i));
      static_cast<uint64_t*>(out)[index] = static_cast<uint64_t>(i);
      return Status::Ok();
    }
    case DType::kBool:
      if (!v.is_bool()) return ElementError(what, index, "is not true or false");
      static_cast<uint8_t*>(out)[index] = v.bool_value() ? 1 : 0;
      return Status::Ok();
    default:
      return InvalidArgument(std::string(what) + ": unsupported datatype");
  }
}

Status DecodeLeaves(const Json& v, DType dtype, std::string_view what, int64_t* next, void* out) {
  if (!v.is_array()) {
    RETURN_IF_ERROR(StoreElement(v, dtype, what, *next, out));
    ++*next;
    return Status::Ok();
  }
  for (const Json& item : v.items()) RETURN_IF_ERROR(DecodeLeaves(item, dtype, what, next, out));
  return Status::Ok();
}

}  // namespace

StatusOr<Tensor> DecodeTensorData(const Json& data, DType dtype, const Shape& shape,
                                  std::string_view what) {
  if (!data.is_array()) return InvalidArgument(std::string(what) + ": 'data' must be a list");
  ASSIGN_OR_RETURN(int64_t count, shape.CheckedNumElements());
  int64_t leaves = CountLeaves(data);
  if (leaves != count) {
    return InvalidArgument(std::string(what) + ": 'data' has " + std::to_string(leaves) +
                           " elements but shape " + shape.ToString() + " needs " +
                           std::to_string(count));
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DefaultAllocator(), dtype, shape));
  int64_t next = 0;
  RETURN_IF_ERROR(DecodeLeaves(data, dtype, what, &next, t.data()));
  return t;
}

// ---- Encoding ------------------------------------------------------------------------------

namespace {

void WriteElement(const char* p, DType dtype, JsonWriter& w) {
  auto load = [p](auto zero) {
    decltype(zero) v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  switch (dtype) {
    case DType::kF32:
      w.Float(load(0.0f));
      break;
    case DType::kF64:
      w.Double(load(0.0));
      break;
    case DType::kF16:
      w.Float(HalfToFloat(load(uint16_t{0})));
      break;
    case DType::kBF16:
      w.Float(Bf16ToFloat(load(uint16_t{0})));
      break;
    case DType::kI8:
      w.Int(load(int8_t{0}));
      break;
    case DType::kU8:
      w.Int(load(uint8_t{0}));
      break;
    case DType::kI16:
      w.Int(load(int16_t{0}));
      break;
    case DType::kI32:
      w.Int(load(int32_t{0}));
      break;
    case DType::kI64:
      w.Int(load(int64_t{0}));
      break;
    case DType::kU16:
      w.Int(load(uint16_t{0}));
      break;
    case DType::kU32:
      w.Int(load(uint32_t{0}));
      break;
    case DType::kU64:
      w.Uint(load(uint64_t{0}));
      break;
    case DType::kBool:
      w.Bool(load(uint8_t{0}) != 0);
      break;
    default:
      w.Null();
      break;
  }
}

}  // namespace

// Calls fn(element pointer) for each element of `t` in row-major order (strides walked, so
// views need not be contiguous).
template <typename Fn>
void ForEachElement(const Tensor& t, Fn fn) {
  int64_t n = t.empty() ? 0 : t.NumElements();
  if (n <= 0) return;
  const char* base = static_cast<const char*>(t.data());
  const int64_t elem = static_cast<int64_t>(DTypeSize(t.dtype()));
  int rank = t.rank();
  int64_t index[kMaxRank] = {};
  for (int64_t i = 0; i < n; ++i) {
    int64_t offset = 0;
    for (int d = 0; d < rank; ++d) offset += index[d] * t.stride(d);
    fn(base + offset * elem);
    for (int d = rank - 1; d >= 0; --d) {  // odometer increment, last dim fastest
      if (++index[d] < t.dim(d)) break;
      index[d] = 0;
    }
  }
}

void EncodeTensorData(const Tensor& t, JsonWriter& w) {
  w.BeginArray();
  ForEachElement(t, [&](const char* p) { WriteElement(p, t.dtype(), w); });
  w.EndArray();
}

StatusOr<Tensor> DecodeRawTensorData(std::string_view bytes, DType dtype, const Shape& shape,
                                     std::string_view what) {
  ASSIGN_OR_RETURN(int64_t n, shape.CheckedNumElements());
  size_t want = static_cast<size_t>(n) * DTypeSize(dtype);
  if (bytes.size() != want) {
    return InvalidArgument(std::string(what) + ": " + std::to_string(bytes.size()) +
                           " bytes of data, but shape " + shape.ToString() + " of " +
                           KServeDatatype(dtype) + " needs " + std::to_string(want));
  }
  if (dtype == DType::kBool) {
    for (size_t i = 0; i < bytes.size(); ++i) {
      if (static_cast<uint8_t>(bytes[i]) > 1) {
        return InvalidArgument(std::string(what) + ": element " + std::to_string(i) +
                               " is not a BOOL (byte " +
                               std::to_string(static_cast<uint8_t>(bytes[i])) + ")");
      }
    }
  }
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DefaultAllocator(), dtype, shape));
  if (want > 0) std::memcpy(t.data(), bytes.data(), want);
  return t;
}

void AppendRawTensorData(const Tensor& t, std::string* out) {
  if (t.empty()) return;
  size_t elem = DTypeSize(t.dtype());
  if (t.IsContiguous()) {
    out->append(static_cast<const char*>(t.data()), t.NumBytes());
    return;
  }
  out->reserve(out->size() + t.NumBytes());
  ForEachElement(t, [&](const char* p) { out->append(p, elem); });
}

}  // namespace kiln::serving
