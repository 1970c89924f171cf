// The integer matrix ops of ONNX (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv)
// rewritten at import into ops kiln lowers: the products on zero-point-shifted operands in a type
// that holds them exactly, then (QLinear*) the requantization through QuantizeLinear.
#ifndef KILN_COMPILER_ONNX_EXPAND_QUANT_H_
#define KILN_COMPILER_ONNX_EXPAND_QUANT_H_

#include <onnx/onnx_pb.h>

#include <cstdint>

#include "base/status.h"

namespace kiln::compiler {

/// Replaces every default-domain MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv node
/// of `graph` and its subgraphs, in place, by nodes computing the same outputs:
///   - MatMulInteger: (A - a_zero_point) @ (B - b_zero_point) in int32, exact; a per-row
///     a_zero_point ([M]) applies along rows, a per-column b_zero_point ([N]) along columns.
///   - ConvInteger: the convolution of the shifted operands in float64 (exact for any real
///     layer: 8-bit products summed over fewer than 2^37 terms), cast to int32; a per-channel
///     w_zero_point applies per output channel.
///   - QLinearMatMul / QLinearConv: the same exact accumulation (plus the int32 bias of
///     QLinearConv), then, as ONNX Runtime does, acc * (a_scale * b_scale / y_scale) in float and
///     QuantizeLinear with scale 1 and y_zero_point (round half to even, saturate); per-row,
///     per-column and per-channel scales as for the zero points.
/// New values are named "<node>/q/<what>_<n>". The rank of a per-channel ConvInteger /
/// QLinearConv weight must be known (an initializer, or a declared input / value_info);
/// otherwise Unsupported naming the node. Opset below 10 (where these ops do not exist) is left
/// alone.
Status ExpandQuantizedOps(onnx::GraphProto* graph, int64_t opset);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_ONNX_EXPAND_QUANT_H_
