// A 1 x 1 convolution of a permuted tensor whose result is reduced over the permuted-in last
// dim, as a MatMul over the unpermuted rows with the permutation moved after the reduction.
// DGCNN's EdgeConv builds edge features [N, P, k, 2C] (point, neighbour, channel), permutes
// them to [N, 2C, P, k] for Conv2d(1 x 1) + BN + LeakyReLU and takes the max over the k
// neighbours: the permute with an innermost dim of k = 10, and the blocked-layout reorders
// oneDNN adds around its convolution, cost more than the convolution itself, and all of it
// runs on data k times larger than the reduced result.
#ifndef KILN_COMPILER_PASSES_POINTWISE_CONV_ROWS_H_
#define KILN_COMPILER_PASSES_POINTWISE_CONV_ROWS_H_

#include "base/status.h"
#include "compiler/ir/graph.h"

namespace kiln::compiler {

/// Rewrites every chain T = Transpose(x, perm [0, 3, 1, 2]) -> Conv -> [activation] ->
/// Reduce{Max, Min, Mean, Sum}(axes [3] or [-1]) where: x is float32 of rank 4 with a
/// constant last dim C; the Conv is default-domain, group 1, 1 x 1 with strides and dilations
/// 1 and no pads, with constant float32 weights [O, C, 1, 1] and an optional constant bias
/// [O]; the activation is one elementwise op of one tensor (Relu, LeakyRelu, Clip, Sigmoid,
/// Tanh, Elu, Selu, Celu, HardSigmoid, HardSwish, Softplus, Softsign; other inputs constant);
/// and each of T, the Conv and the activation is the only reader of its predecessor's output
/// (which is no graph output). The chain becomes
///   MatMul(x, W^T [C, O]) -> Add(bias) -> activation -> Reduce(axes [2]) -> Transpose
/// (perm [0, 2, 1], or [0, 3, 1, 2] with keepdims) writing the reduction's output value: the
/// same products summed in the same order per output (float rounding as a 1 x 1 convolution's),
/// the activation and the reduction applied to the same values. The axes of the new reduction
/// are given as the old one gave them (attribute, or constant input from opset 18). Nodes of
/// the old chain are removed (NodeIds held across the call are stale). Runs on an inferred
/// main graph; output shapes do not change. Returns how many chains it rewrote.
StatusOr<int> PointwiseConvsOverRows(Graph& graph);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_POINTWISE_CONV_ROWS_H_
