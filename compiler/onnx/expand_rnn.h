// Recurrent ONNX ops (LSTM, GRU, RNN) rewritten at import into ops kiln lowers: a MatMul for the
// input projection of every step, then a Loop over the steps whose body does the recurrent
// MatMul, the gates and the state update.
#ifndef KILN_COMPILER_ONNX_EXPAND_RNN_H_
#define KILN_COMPILER_ONNX_EXPAND_RNN_H_

#include <onnx/onnx_pb.h>

#include <cstdint>

#include "base/status.h"

namespace kiln::compiler {

/// Replaces every default-domain LSTM, GRU and RNN node of `graph` and of its subgraphs, in place,
/// by nodes computing the same outputs under ONNX's definitions (LSTM/GRU/RNN 7 and 14):
///   - every direction (forward, reverse, bidirectional), both layouts, optional B, P
///     (peepholes), initial_h / initial_c, sequence_lens (a step at or past a batch entry's
///     length leaves its state unchanged and writes zeros to Y, as ONNX Runtime does), clip
///     (applied to the gate pre-activations), input_forget (LSTM) and linear_before_reset (GRU);
///   - the activations Sigmoid, Tanh, Relu, LeakyRelu, ThresholdedRelu, HardSigmoid, Elu,
///     Softsign, Softplus, Affine and ScaledTanh with activation_alpha / activation_beta consumed
///     in order by the activations that take them (defaults those of the ONNX ops); a list for one
///     direction of a bidirectional node is used for both.
/// With the default activations and no sequence_lens, peepholes or input_forget (GRU: with
/// linear_before_reset), the layer becomes X @ W^T (+ biases) for all steps and directions as
/// one MatMul and one kiln::RecurrentSequence node over its steps (R packed at compile time;
/// its kernel runs both directions in parallel), and `*fused` (when not null) is set: the
/// caller imports the "kiln" domain. Otherwise, per direction: X @ W^T (+ biases) as one
/// MatMul, then a Loop whose body adds H @ R^T and applies the gates; a reverse direction's
/// outputs are put back in time order.
/// New values and nodes are named "<node>/rnn/<what>_<n>", which no exporter writes.
///
/// `opset` is the model's ai.onnx opset (constants take X's element type through CastLike from
/// opset 15, else the type X is declared with, else float).
///
/// Errors (naming the node): InvalidFormat for a missing X / W / R or hidden_size, or attribute
/// values ONNX does not allow (direction, layout, activation count); Unsupported for an
/// activation kiln does not know, and for opsets below 9 (the expansion needs ConstantOfShape).
Status ExpandRecurrentOps(onnx::GraphProto* graph, int64_t opset, bool* fused = nullptr);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_ONNX_EXPAND_RNN_H_
