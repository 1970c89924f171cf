// Test helpers for jit/.
#include "tests/jit/test_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <cmath>
#include <limits>
#include <mutex>
#include <random>

namespace kiln::jit::testing {
namespace {

std::vector<int64_t> RowMajorStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int d = static_cast<int>(shape.size()) - 2; d >= 0; --d) {
    strides[d] = strides[d + 1] * shape[d + 1];
  }
  return strides;
}

template <typename T>
T Read(const std::vector<uint64_t>& storage, int64_t offset) {
  T v;
  std::memcpy(&v, reinterpret_cast<const char*>(storage.data()) + offset * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void Write(std::vector<uint64_t>& storage, int64_t offset, T v) {
  std::memcpy(reinterpret_cast<char*>(storage.data()) + offset * sizeof(T), &v, sizeof(T));
}

// Bits of a value already representable in the binary16 / bfloat16 format.
uint16_t EncodeHalf(double v) {
  if (std::isnan(v)) return 0x7e00;
  uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  double a = std::fabs(v);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(a * std::ldexp(1.0, 24));
  int e;
  double m = std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  uint16_t exponent = static_cast<uint16_t>(e - 1 + 15);
  uint16_t fraction = static_cast<uint16_t>((m * 2 - 1) * 1024);
  return sign | static_cast<uint16_t>(exponent << 10) | fraction;
}

uint16_t EncodeBFloat16(double v) {
  float f = static_cast<float>(v);  // exact: v is representable
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if (std::isnan(v)) return 0x7fc0;
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace

TestBuffer::TestBuffer(DType dtype, std::vector<int64_t> shape)
    : TestBuffer(dtype, shape, RowMajorStrides(shape)) {}

TestBuffer::TestBuffer(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides)
    : dtype_(dtype), shape_(std::move(shape)), strides_(std::move(strides)) {
  int64_t max_offset = 0;
  bool empty = false;
  for (size_t d = 0; d < shape_.size(); ++d) {
    if (shape_[d] == 0) empty = true;
    if (shape_[d] > 0) max_offset += (shape_[d] - 1) * strides_[d];
  }
  int64_t elements = empty ? 0 : max_offset + 1;
  storage_.assign((elements * DTypeSize(dtype_) + 7) / 8 + 1, 0);
}

int64_t TestBuffer::size() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

int64_t TestBuffer::Offset(const std::vector<int64_t>& index) const {
  int64_t offset = 0;
  for (size_t d = 0; d < index.size(); ++d) offset += index[d] * strides_[d];
  return offset;
}

int64_t TestBuffer::FlatOffset(int64_t flat) const {
  int64_t offset = 0;
  for (int d = static_cast<int>(shape_.size()) - 1; d >= 0; --d) {
    offset += (flat % shape_[d]) * strides_[d];
    flat /= shape_[d];
  }
  return offset;
}

double TestBuffer::GetDouble(int64_t offset) const {
  switch (dtype_) {
    case DType::kF32:
      return Read<float>(storage_, offset);
    case DType::kF64:
      return Read<double>(storage_, offset);
    case DType::kF16:
      return HalfToDouble(Read<uint16_t>(storage_, offset));
    case DType::kBF16:
      return BFloat16ToDouble(Read<uint16_t>(storage_, offset));
    case DType::kU64:
      return static_cast<double>(Read<uint64_t>(storage_, offset));
    default:
      return static_cast<double>(GetInt(offset));
  }
}

int64_t TestBuffer::GetInt(int64_t offset) const {
  switch (dtype_) {
    case DType::kI8:
      return Read<int8_t>(storage_, offset);
    case DType::kU8:
      return Read<uint8_t>(storage_, offset);
    case DType::kBool:
      return Read<uint8_t>(storage_, offset);
    case DType::kI16:
      return Read<int16_t>(storage_, offset);
    case DType::kI32:
      return Read<int32_t>(storage_, offset);
    case DType::kI64:
      return Read<int64_t>(storage_, offset);
    case DType::kU16:
      return Read<uint16_t>(storage_, offset);
    case DType::kU32:
      return Read<uint32_t>(storage_, offset);
    case DType::kU64:  // the bits: values above 2^63 read as negative
      return Read<int64_t>(storage_, offset);
    default:
      return static_cast<int64_t>(GetDouble(offset));
  }
}

void TestBuffer::SetDouble(int64_t offset, double v) {
  switch (dtype_) {
    case DType::kF32:
      return Write<float>(storage_, offset, static_cast<float>(v));
    case DType::kF64:
      return Write<double>(storage_, offset, v);
    case DType::kF16:
      return Write<uint16_t>(storage_, offset, EncodeHalf(RoundToHalf(v)));
    case DType::kBF16:
      return Write<uint16_t>(storage_, offset, EncodeBFloat16(RoundToBFloat16(v)));
    case DType::kU64:
      return Write<uint64_t>(storage_, offset, static_cast<uint64_t>(v));
    default:
      return SetInt(offset, static_cast<int64_t>(v));
  }
}

void TestBuffer::SetInt(int64_t offset, int64_t v) {
  switch (dtype_) {
    case DType::kI8:
      return Write<int8_t>(storage_, offset, static_cast<int8_t>(v));
    case DType::kU8:
      return Write<uint8_t>(storage_, offset, static_cast<uint8_t>(v));
    case DType::kBool:
      return Write<uint8_t>(storage_, offset, v != 0);
    case DType::kI16:
      return Write<int16_t>(storage_, offset, static_cast<int16_t>(v));
    case DType::kI32:
      return Write<int32_t>(storage_, offset, static_cast<int32_t>(v));
    case DType::kI64:
    case DType::kU64:
      return Write<int64_t>(storage_, offset, v);
    case DType::kU16:
      return Write<uint16_t>(storage_, offset, static_cast<uint16_t>(v));
    case DType::kU32:
      return Write<uint32_t>(storage_, offset, static_cast<uint32_t>(v));
    default:
      return SetDouble(offset, static_cast<double>(v));
  }
}

uint16_t TestBuffer::GetBits16(int64_t offset) const { return Read<uint16_t>(storage_, offset); }

void Call(KernelFn fn, const std::vector<TestBuffer*>& buffers, const std::vector<int64_t>& dims) {
  std::vector<void*> data;
  std::vector<const int64_t*> shapes, strides;
  for (TestBuffer* b : buffers) {
    data.push_back(b->data());
    shapes.push_back(b->shape().data());
    strides.push_back(b->strides().data());
  }
  fn(data.data(), shapes.data(), strides.data(), dims.data());
}

Engine& SharedEngine() {
  static Engine* engine = [] {
    auto created = Engine::Create();
    if (!created.ok()) {
      BOOST_FAIL("cannot create the JIT engine: " + created.status().ToString());
    }
    return std::move(created).value().release();
  }();
  return *engine;
}

KernelFn CompileOrFail(const Kernel& kernel) {
  StatusOr<KernelFn> fn = SharedEngine().GetOrCompile(kernel);
  if (!fn.ok()) {
    BOOST_ERROR("compiling " + kernel.name + ": " + fn.status().ToString());
    return nullptr;
  }
  return *fn;
}

double HalfToDouble(uint16_t bits) {
  int sign = bits >> 15, exponent = (bits >> 10) & 0x1f, fraction = bits & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude = fraction ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(fraction, -24);
  } else {
    magnitude = std::ldexp(1024 + fraction, exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

double BFloat16ToDouble(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &wide, 4);
  return f;
}

double RoundToFormat(double v, int mantissa_bits, int min_exp, int max_exp) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  double a = std::fabs(v);
  int e;
  std::frexp(a, &e);  // a in [2^(e-1), 2^e)
  int exponent = std::max(e - 1, min_exp);
  double quantum = std::ldexp(1.0, exponent - mantissa_bits);
  double q = std::nearbyint(a / quantum);  // exact division; default mode is nearest-even
  double r = q * quantum;
  if (r >= std::ldexp(1.0, max_exp + 1)) r = std::numeric_limits<double>::infinity();
  return std::copysign(r, v);
}

int64_t WrapInt(uint64_t v, DType to) {
  switch (to) {
    case DType::kI8:
      return static_cast<int8_t>(v);
    case DType::kU8:
      return static_cast<uint8_t>(v);
    case DType::kI16:
      return static_cast<int16_t>(v);
    case DType::kI32:
      return static_cast<int32_t>(v);
    case DType::kU16:
      return static_cast<uint16_t>(v);
    case DType::kU32:
      return static_cast<uint32_t>(v);
    default:
      return static_cast<int64_t>(v);  // i64, u64 (the bits)
  }
}

double UlpDistance(double a, double b, DType dtype) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : 1e30;
  if (a == b) return 0;
  if (std::isinf(a) || std::isinf(b)) return 1e30;
  int mantissa = dtype == DType::kF64 ? 52 : 23;
  int min_exp = dtype == DType::kF64 ? -1022 : -126;
  int e;
  std::frexp(std::max(std::fabs(a), std::fabs(b)), &e);
  double ulp = std::ldexp(1.0, std::max(e - 1, min_exp) - mantissa);
  return std::fabs(a - b) / ulp;
}

bool SameFloat(double x, double y) {
  return (std::isnan(x) && std::isnan(y)) || (x == y && std::signbit(x) == std::signbit(y));
}

std::vector<double> RandomDoubles(size_t n, double lo, double hi, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> out(n);
  for (double& v : out) v = dist(rng);
  return out;
}

Kernel RowSumKernel() {
  auto k = ReduceKernel("row_sum", Reduction::kSum, DType::kF32, 2, {1}, false);
  BOOST_REQUIRE_MESSAGE(k.ok(), k.status().ToString());
  return *k;
}

Kernel RowsShapeKernel() {
  Buffer a = Buffer::Param("a", DType::kF32, 2), out = Buffer::Param("shape", DType::kI64, 1);
  return Kernel{"rows_shape", {a, out}, {}, Store(out, {IntImm(0)}, DimOf(a, 0))};
}

std::string CaptureStderr(const std::function<void()>& body, const std::string& path) {
  std::fflush(stderr);
  int saved = dup(2);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  BOOST_REQUIRE(saved >= 0 && fd >= 0);
  dup2(fd, 2);
  close(fd);
  body();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace kiln::jit::testing
