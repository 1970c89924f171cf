// Concats with more inputs than one kernel may take become a Concat of their leading inputs
// feeding a narrower Concat (DenseNet-169's last dense block concatenates 33 tensors).
#ifndef KILN_COMPILER_PASSES_WIDE_CONCAT_H_
#define KILN_COMPILER_PASSES_WIDE_CONCAT_H_

#include "compiler/ir/graph.h"
#include "base/status.h"

namespace kiln::compiler {

/// Rewrites every default-domain Concat with more than `max_inputs` present inputs (max_inputs
/// >= 2): its leading inputs go to a new Concat (same axis, output shape inferred here: the sum
/// of their dims on the axis), whose output takes their place, so the node reads exactly
/// `max_inputs` values; the new Concat is narrowed the same way when it is still too wide. The
/// moved inputs are copied once more per level (one level up to 2 x max_inputs - 1 inputs,
/// the shortest chain for that). Why: a JIT kernel takes at most
/// jit::kMaxDispatchBuffers buffers (its inputs and its output), and a wider kernel compiled
/// but then failed to load. Runs on an inferred main graph; output shapes do not change.
/// Returns how many Concats it added; InvalidArgument for max_inputs < 2.
StatusOr<int> NarrowWideConcats(Graph& graph, int max_inputs);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_WIDE_CONCAT_H_
