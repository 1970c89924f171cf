// Helpers for known-answer tests of op lowerings: build tensors, run a model written in ONNX's
// text syntax through the Evaluator (lowered kernels on the JIT), compare with tolerances.
#ifndef KILN_TESTS_COMPILER_LOWER_OP_TEST_UTIL_H_
#define KILN_TESTS_COMPILER_LOWER_OP_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/lower.h"
#include "base/status.h"

namespace kiln::compiler::testing {

/// Tensors from values (converted to dtype; f16/bf16 round to nearest even).
TensorDataRef MakeTensor(DType dtype, std::vector<int64_t> dims, const std::vector<double>& values);
inline TensorDataRef F32(std::vector<int64_t> dims, const std::vector<double>& v) {
  return MakeTensor(DType::kF32, std::move(dims), v);
}
inline TensorDataRef I64(std::vector<int64_t> dims, const std::vector<double>& v) {
  return MakeTensor(DType::kI64, std::move(dims), v);
}
/// Deterministic pseudo-random values in [lo, hi) (integers for integer dtypes).
TensorDataRef RandomTensor(DType dtype, std::vector<int64_t> dims, double lo, double hi,
                           uint64_t seed);

/// The process-lifetime table holding the lowerings `Add` registers (AddNnLowerings, ...).
template <void (*Add)(LoweringTable&)>
const LoweringTable& TableOf() {
  static const LoweringTable* table = [] {
    auto* t = new LoweringTable;
    Add(*t);
    return t;
  }();
  return *table;
}

/// Imports `model_text` (onnx::OnnxParser syntax), infers shapes and runs it on `inputs` (graph
/// inputs in order) with the lowerings of `table`. One shared JIT engine per process.
StatusOr<std::vector<TensorDataRef>> RunModel(const std::string& model_text,
                                              const std::vector<TensorDataRef>& inputs,
                                              const LoweringTable& table);

/// "" when `actual` has expected's dtype and dims and every element satisfies
/// |a - e| <= atol + rtol * |e| (NaN matches NaN; infinities must match exactly); otherwise a
/// message naming the first few mismatches.
std::string Compare(const TensorData& actual, const TensorData& expected, double rtol,
                    double atol);

/// A model in ONNX's text syntax: `signature` is "(float[N] x) => (y)".
std::string Model(int opset, const std::string& signature, const std::string& body);
/// The same from input and output lists, with initializers in text syntax ("int64[1] k = {2}").
std::string Model(int opset, const std::string& inputs, const std::string& outputs,
                  const std::string& body, const std::string& inits = "");
/// Dims in ONNX text syntax: "[2,3]".
std::string Shape(const std::vector<int64_t>& dims);
/// Comma-separated values for a text-syntax list or initializer: "2, 3".
std::string Ints(const std::vector<int64_t>& values);
/// The same for floats, six decimals: "0.500000, 2.000000".
std::string Floats(const std::vector<double>& values);

// ---- A dense row-major N-d array of doubles, for the references ----

int64_t Count(const std::vector<int64_t>& dims);
/// Row-major position -> index (a zero dim gives zeros).
std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& dims);
int64_t Ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims);

struct Nd {
  std::vector<int64_t> dims;
  std::vector<double> v;
  double& operator[](const std::vector<int64_t>& idx) { return v[Ravel(idx, dims)]; }
  double at(const std::vector<int64_t>& idx) const { return v[Ravel(idx, dims)]; }
};
Nd ToNd(const TensorData& t);
inline Nd ToNd(const TensorDataRef& t) { return ToNd(*t); }
/// out[idx] = f(idx) over `dims`.
Nd Generate(const std::vector<int64_t>& dims,
            const std::function<double(const std::vector<int64_t>&)>& f);

}  // namespace kiln::compiler::testing

#endif  // KILN_TESTS_COMPILER_LOWER_OP_TEST_UTIL_H_
