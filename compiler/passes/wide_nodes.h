// Variadic nodes with more inputs than one kernel may take become a node of their leading inputs
// feeding a narrower one (DenseNet-169's last dense block concatenates 33 tensors).
#ifndef KILN_COMPILER_PASSES_WIDE_NODES_H_
#define KILN_COMPILER_PASSES_WIDE_NODES_H_

#include "compiler/ir/graph.h"
#include "base/status.h"

namespace kiln::compiler {

/// Rewrites every default-domain node with more than `max_inputs` present inputs (max_inputs >=
/// 2) that is a Concat, or a Sum / Max / Min whose inputs all have its output's shape and a
/// dtype other than float16 / bfloat16: its leading inputs go to a new node of the same op
/// (output shape inferred here: a Concat's sums their dims on the axis), whose output takes
/// their place, so the node reads exactly `max_inputs` values; the new node is narrowed the same
/// way when it is still too wide. Results are bit-identical: the kernels combine inputs left to
/// right, and the new node's float32 / float64 / integer result is what the wide kernel held at
/// that point. The moved inputs are copied once more per level (one level up to 2 x max_inputs
/// - 1 inputs). Why: a JIT kernel takes at most jit::kMaxDispatchBuffers buffers (inputs and
/// output), and a wider kernel compiled but then failed to load. Mean, Split with too many
/// outputs and broadcasting Sum / Max / Min are left as they are. Runs on an inferred main
/// graph; output shapes do not change. Returns how many nodes it added; InvalidArgument for
/// max_inputs < 2.
StatusOr<int> NarrowWideNodes(Graph& graph, int max_inputs);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_WIDE_NODES_H_
