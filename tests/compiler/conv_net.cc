// The conv net shared by compiler tests (see conv_net.h).
#include "tests/compiler/conv_net.h"

#include "tests/compiler/lower/op_test_util.h"

namespace kiln::compiler::testing {

const char kConvNet[] = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[N, 3, 12, 12] x, float[8, 3, 3, 3] w, float[8] b, float[8, 8, 1, 1] w2, float[10, 8] fc) => (float[N, 10] y) {
    c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
    r = Relu(c)
    p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (r)
    c2 = Conv(p, w2)
    s = Add(c2, p)
    r2 = Relu(s)
    gp = GlobalAveragePool(r2)
    f = Flatten(gp)
    y = Gemm <transB = 1> (f, fc)
  }
)";

std::vector<TensorDataRef> ConvNetInputs(int64_t n) {
  return {RandomTensor(DType::kF32, {n, 3, 12, 12}, -1, 1, n),
          RandomTensor(DType::kF32, {8, 3, 3, 3}, -0.5, 0.5, 1),
          RandomTensor(DType::kF32, {8}, -0.5, 0.5, 2),
          RandomTensor(DType::kF32, {8, 8, 1, 1}, -0.5, 0.5, 3),
          RandomTensor(DType::kF32, {10, 8}, -0.5, 0.5, 4)};
}

}  // namespace kiln::compiler::testing
