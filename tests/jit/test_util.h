// Test helpers for jit/: host buffers in the kernel ABI, a shared engine, numeric references.
#ifndef KILN_TESTS_JIT_TEST_UTIL_H_
#define KILN_TESTS_JIT_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "jit/compute.h"
#include "jit/engine.h"
#include "jit/kernel_ir.h"
#include "base/dtype.h"

namespace kiln {
// Names in Boost.Test data-case logs (vm/ has no stream operator for DType; tests only).
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << DTypeShortName(t); }
}  // namespace kiln

namespace kiln::jit {
inline std::ostream& operator<<(std::ostream& os, ForKind k) { return os << ForKindName(k); }
inline std::ostream& operator<<(std::ostream& os, ExprOp op) { return os << ExprOpName(op); }
inline std::ostream& operator<<(std::ostream& os, ReduceOp op) { return os << ReduceOpName(op); }
inline std::ostream& operator<<(std::ostream& os, PadMode m) { return os << static_cast<int>(m); }
}  // namespace kiln::jit

namespace kiln::jit::testing {

/// A host tensor with explicit strides (in elements), laid out as the kernel ABI expects.
class TestBuffer {
 public:
  /// Dense row-major, zero-filled.
  TestBuffer(DType dtype, std::vector<int64_t> shape);
  /// Arbitrary non-negative strides; storage covers the largest offset.
  TestBuffer(DType dtype, std::vector<int64_t> shape, std::vector<int64_t> strides);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int64_t size() const;  // number of logical elements
  void* data() { return storage_.data(); }

  /// Offset in elements of a multi-index, and of the `flat`-th element in row-major order.
  int64_t Offset(const std::vector<int64_t>& index) const;
  int64_t FlatOffset(int64_t flat) const;

  /// Element access by storage offset. Floats (f16/bf16 decoded exactly) as double; integers and
  /// bool through the int64 accessors. Setting a double into f16/bf16 rounds to nearest even.
  double GetDouble(int64_t offset) const;
  int64_t GetInt(int64_t offset) const;
  void SetDouble(int64_t offset, double v);
  void SetInt(int64_t offset, int64_t v);
  /// Raw 16-bit pattern of an f16/bf16 element.
  uint16_t GetBits16(int64_t offset) const;

  /// Logical element `flat` (row-major) as double / int.
  double At(int64_t flat) const { return GetDouble(FlatOffset(flat)); }
  int64_t IntAt(int64_t flat) const { return GetInt(FlatOffset(flat)); }
  void Set(int64_t flat, double v) { SetDouble(FlatOffset(flat), v); }
  void SetI(int64_t flat, int64_t v) { SetInt(FlatOffset(flat), v); }

 private:
  DType dtype_;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  std::vector<uint64_t> storage_;  // 8-byte aligned
};

/// Calls `fn` with the ABI arrays built from `buffers` and `dims`.
void Call(KernelFn fn, const std::vector<TestBuffer*>& buffers,
          const std::vector<int64_t>& dims = {});

/// One engine per test binary (created on first use; aborts the test on failure).
Engine& SharedEngine();

/// Compiles `kernel` with the shared engine; fails the current test (and returns null) on error.
KernelFn CompileOrFail(const Kernel& kernel);

/// Exact value of an f16 / bf16 bit pattern.
double HalfToDouble(uint16_t bits);
double BFloat16ToDouble(uint16_t bits);
/// `v` rounded to nearest even into a binary format with `mantissa_bits` explicit fraction bits,
/// minimum normal exponent `min_exp` and maximum exponent `max_exp` (inf on overflow). Computed
/// independently of the code generator, from the definition.
double RoundToFormat(double v, int mantissa_bits, int min_exp, int max_exp);
inline double RoundToHalf(double v) { return RoundToFormat(v, 10, -14, 15); }
inline double RoundToBFloat16(double v) { return RoundToFormat(v, 7, -126, 127); }
inline double RoundToFloat(double v) { return RoundToFormat(v, 23, -126, 127); }

/// Two's-complement wrap of the bits `v` into the integer type `to`, sign- or zero-extended
/// back to int64 (i64 and u64: the bits unchanged).
int64_t WrapInt(uint64_t v, DType to);

/// Distance in units in the last place of `dtype` (f32 or f64) between two values; 0 when both
/// are NaN or equal, a huge number when only one is NaN.
double UlpDistance(double a, double b, DType dtype);

/// row_sum(a: f32[n, m]) -> f32[n] (ReduceKernel kSum over axis 1), for test executables.
Kernel RowSumKernel();
/// The shape function of row_sum as a kernel: shape: i64[1] = {rows of a}.
Kernel RowsShapeKernel();

/// Runs `body` with the process's stderr (fd 2) going to the file `path`; returns what it wrote.
std::string CaptureStderr(const std::function<void()>& body, const std::string& path);

/// Exact match for results that must be correctly rounded: equal with the same sign of zero, or
/// both NaN (a NaN matches only a NaN; callers use this where the reference's NaN is meant).
bool SameFloat(double x, double y);

/// Deterministic pseudo-random doubles in [lo, hi).
std::vector<double> RandomDoubles(size_t n, double lo, double hi, uint64_t seed);

}  // namespace kiln::jit::testing

#endif  // KILN_TESTS_JIT_TEST_UTIL_H_
