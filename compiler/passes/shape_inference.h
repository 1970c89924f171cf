// Shape inference: runs every node's registry rule in topological order, so dtypes, symbolic
// shapes and known shape values flow from the graph inputs to the outputs.
#ifndef KILN_COMPILER_PASSES_SHAPE_INFERENCE_H_
#define KILN_COMPILER_PASSES_SHAPE_INFERENCE_H_

#include <functional>

#include "compiler/ir/graph.h"
#include "compiler/ops/registry.h"
#include "base/status.h"

namespace kiln::compiler {

struct ShapeInferenceOptions {
  /// The rules to use; nullptr means OpRegistry::Global(). Borrowed.
  const OpRegistry* registry = nullptr;
  /// Called after each node of the main graph, and each node of a subgraph whose inputs are
  /// all constants, is inferred, before its users are: constant folding sets Value::data of
  /// the node's outputs here, so the rules downstream see the values (a Reshape whose shape
  /// was computed from constants gets a static shape).
  using FoldHook = std::function<Status(Graph& graph, NodeId node)>;
  FoldHook fold;
};

/// Infers the dtype and shape of every node output (and, recursively, of every If/Loop body),
/// overwriting earlier results, so it can run again after a pass edits the graph. Also records
/// symbolic values of small integer tensors (Value::symbolic_value), folded constants
/// (Value::data of Constant outputs) and Node::data_dependent_shape.
///
/// Preconditions: graph inputs and constants carry their types (the importer does this).
/// Errors, each naming the node ("node 'Add_3' (Add): cannot broadcast [batch, 4] with [3]"):
///   - Unsupported: an op (or op version, or input dtype) the registry has no rule for; a
///     construct kiln does not handle (rank depending on run-time data).
///   - InvalidFormat: shapes or dtypes that contradict each other, bad attributes, wrong input
///     or output counts, a result that contradicts a graph output's declared type, a negative
///     constant dim.
///   - OutOfRange: a constant dim of 2^62 or more.
/// The graph is left partially inferred on error.
Status InferShapes(Graph& graph, const ShapeInferenceOptions& options = {});

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_SHAPE_INFERENCE_H_
