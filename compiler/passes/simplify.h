// Graph simplification after shape inference: chains of Transposes become one, chains of
// Reshape-like views read the original tensor, Pads that pad nothing are bypassed, a constant
// spatial Pad read only by a Conv / AveragePool / MaxPool becomes that window's own padding,
// each reader of a run-time DequantizeLinear reads a copy of its own, CastLike becomes
// Cast, a ReduceMax / ReduceMean over every spatial dim of a convolution's output becomes
// GlobalMaxPool / GlobalAveragePool, the readers of an inference Dropout read its input, and
// a Transpose read only by Slices whose elementwise chains meet in one Concat moves below the
// Concat.
// What no longer reaches an output stays in the graph: RemoveDeadNodes (dead_nodes.h) drops it.
#ifndef KILN_COMPILER_PASSES_SIMPLIFY_H_
#define KILN_COMPILER_PASSES_SIMPLIFY_H_

#include "compiler/ir/graph.h"
#include "base/status.h"

namespace kiln::compiler {

struct SimplifyStats {
  int transposes_merged = 0;  // Transpose(Transpose(x)) -> one Transpose
  int views_shortcut = 0;     // Reshape/Flatten/Squeeze/Unsqueeze of a view -> of its source
  int pads_bypassed = 0;      // Pad with all pads 0: its readers read its input
  int pads_folded = 0;        // constant Pad into its Conv / AveragePool / MaxPool reader's pads
  int dequantize_dedicated = 0;  // copies of a DequantizeLinear, one per further reader
  int castlikes_to_cast = 0;  // CastLike(x, like) -> Cast(x, to = like's dtype)
  int reduce_max_pooled = 0;  // ReduceMax(conv output, axes = spatial) -> GlobalMaxPool
                              // (+ Flatten(axis = 1) for keepdims = 0)
  int reduce_mean_pooled = 0;  // ReduceMean likewise -> GlobalAveragePool
  int dropouts_bypassed = 0;   // inference Dropout: readers read its input, unread mask dropped
  int transposes_sunk = 0;     // Concat(f(Slice(Transpose(x)))) -> Transpose(Concat(f(Slice(x))))
};

/// Runs on an inferred main graph. Output shapes never change, so shape inference need not
/// run again. Returns what it did in `stats` (may be null).
Status Simplify(Graph& graph, SimplifyStats* stats = nullptr);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_SIMPLIFY_H_
