// Scan rewritten at import onto Loop, which kiln already runs (emission turns Loop bodies into VM
// functions): the Scan body becomes the Loop body, its scan-input slices Gathers of the captured
// inputs at the step, and Loop's stacked per-iteration outputs are Scan's scan outputs.
#ifndef KILN_COMPILER_ONNX_EXPAND_SCAN_H_
#define KILN_COMPILER_ONNX_EXPAND_SCAN_H_

#include <onnx/onnx_pb.h>

#include <cstdint>

#include "base/status.h"

namespace kiln::compiler {

/// Replaces every default-domain Scan node of `graph` and of its subgraphs, in place, by a Loop
/// computing the same outputs:
///   - Scan 9+: N states and M scan inputs, each scan input sliced along its scan_input_axes
///     entry, forward or reverse (scan_input_directions); scan outputs stacked along axis 0,
///     reversed by a Gather when scan_output_directions asks.
///   - Scan 8: a leading batch dim on every input; an outer Loop over the batch runs the Scan 9
///     form per batch entry and stacks its outputs.
/// `opset` is the model's ai.onnx opset. New values and nodes are named "<node>/scan/<what>_<n>".
///
/// Errors (naming the node): InvalidFormat for a missing body or num_scan_inputs, or attribute
/// lists of the wrong length; Unsupported for scan_output_axes other than 0 and Scan 8's
/// sequence_lens.
Status ExpandScanOps(onnx::GraphProto* graph, int64_t opset);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_ONNX_EXPAND_SCAN_H_
