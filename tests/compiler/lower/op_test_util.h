// Helpers for known-answer tests of op lowerings: build tensors, run a model written in ONNX's
// text syntax through the Evaluator (lowered kernels on the JIT), compare with tolerances.
#ifndef KILN_TESTS_COMPILER_LOWER_OP_TEST_UTIL_H_
#define KILN_TESTS_COMPILER_LOWER_OP_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/lower/lower.h"
#include "vm/status.h"

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

}  // namespace kiln::compiler::testing

#endif  // KILN_TESTS_COMPILER_LOWER_OP_TEST_UTIL_H_
