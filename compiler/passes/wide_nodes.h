// Variadic nodes with more inputs than one kernel may take become a node of their leading inputs
// feeding a narrower one (DenseNet-169's last dense block concatenates 33 tensors), and a Split
// with more outputs a Split into spans split again.
#ifndef KILN_COMPILER_PASSES_WIDE_NODES_H_
#define KILN_COMPILER_PASSES_WIDE_NODES_H_

#include "base/status.h"
#include "compiler/ir/graph.h"

namespace kiln::compiler {

/// Rewrites every default-domain node with more than `max_inputs` present inputs (max_inputs >=
/// 2) that is a Concat, or a Sum / Max / Min / Mean whose inputs have shapes that broadcast
/// evidently (equal dims or constant 1s) and a dtype other than float16 / bfloat16: its leading
/// inputs go to a new node of the same op (output shape inferred here: a Concat's sums their
/// dims on the axis, the others broadcast their inputs), whose output takes their place, so the
/// node reads exactly `max_inputs` values; the new node is narrowed the same way when it is
/// still too wide. A Mean first becomes Div(Sum(...), count) (float32 / float64 / int32 /
/// int64; others stay), as its kernel computes it. Results are bit-identical: the kernels
/// combine inputs left to right, and the new node's float32 / float64 / integer result is what
/// the wide kernel held at that point. The moved inputs are copied once more per level (one
/// level up to 2 x max_inputs - 1 inputs). A Split with more than max_inputs - 1 outputs (its
/// buffers: the input, the sizes, the outputs) splits its input into spans of max_inputs - 1
/// consecutive outputs, each span split by a new node (each output copied once more), when
/// every output's size on the axis is a constant; else it stays. Why: a JIT kernel takes at
/// most jit::kMaxDispatchBuffers buffers (inputs and output), and a wider kernel compiled but
/// then failed to load. Runs on an inferred main graph; output shapes do not change. Returns
/// how many nodes it added; InvalidArgument for max_inputs < 2.
StatusOr<int> NarrowWideNodes(Graph& graph, int max_inputs);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_WIDE_NODES_H_
