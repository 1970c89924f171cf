// The small conv net that compiler tests run both on oneDNN and on the JIT (compile_test's
// oneDNN-vs-JIT check, emit fallback_test's absent-vendor fallbacks): one model, one set of inputs.
#ifndef KILN_TESTS_COMPILER_CONV_NET_H_
#define KILN_TESTS_COMPILER_CONV_NET_H_

#include <cstdint>
#include <vector>

#include "compiler/ir/graph.h"

namespace kiln::compiler::testing {

/// ONNX text (opset 13): a padded 3x3 Conv + Relu + 2x2 MaxPool, a residual 1x1 Conv + Add + Relu,
/// GlobalAveragePool, Flatten and a Gemm. Inputs x: f32[N, 3, 12, 12], w: f32[8, 3, 3, 3],
/// b: f32[8], w2: f32[8, 8, 1, 1], fc: f32[10, 8]; output y: f32[N, 10]. With
/// --external=onednn, oneDNN takes the convolutions and what surrounds them.
extern const char kConvNet[];

/// Inputs {x, w, b, w2, fc} of kConvNet for batch `n`: the weights uniform in [-0.5, 0.5) from
/// fixed seeds (the same for every n), x uniform in [-1, 1) from seed `n`.
std::vector<TensorDataRef> ConvNetInputs(int64_t n);

}  // namespace kiln::compiler::testing

#endif  // KILN_TESTS_COMPILER_CONV_NET_H_
