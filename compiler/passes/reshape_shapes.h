// Reshape targets computed at run time from dims the compiler knows symbolically become
// constants, so a Reshape no longer depends on the Shape / Gather / Concat chain that computed
// its target (exporters write one for every view of a tensor with a dynamic batch).
#ifndef KILN_COMPILER_PASSES_RESHAPE_SHAPES_H_
#define KILN_COMPILER_PASSES_RESHAPE_SHAPES_H_

#include "compiler/ir/graph.h"
#include "base/status.h"

namespace kiln::compiler {

/// For every default-domain Reshape (allowzero 0) whose shape input is not a constant but whose
/// symbolic value shape inference knows, with each element a positive constant, the very dim
/// of the data input at the same index, or (once) -1: the shape input becomes a new constant with
/// that dim written as 0 ("copy the input's dim", ONNX's rule). The output shape and every
/// result stay the same; the nodes that computed the old target are left without this reader
/// (the emitter drops dead ones). Why: a Reshape reading Shape(x) of a region's value closes a
/// cycle, so a channel shuffle (Reshape, Transpose, Reshape) could never join the oneDNN region
/// around it. Returns how many Reshapes it changed. Runs on an inferred main graph.
StatusOr<int> ConstantReshapeShapes(Graph& graph);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_RESHAPE_SHAPES_H_
