// Constant folding through the same kernels the executable would run (compiler/lower Evaluator).
#ifndef KILN_COMPILER_PASSES_FOLD_CONSTANTS_H_
#define KILN_COMPILER_PASSES_FOLD_CONSTANTS_H_

#include <cstdint>

#include "compiler/ir/graph.h"
#include "compiler/lower/evaluate.h"
#include "compiler/passes/shape_inference.h"
#include "base/status.h"

namespace kiln::compiler {

struct FoldOptions {
  /// Outputs larger than this (bytes, all outputs of a node) are not folded: the executable
  /// would carry them as constants.
  int64_t max_output_bytes = int64_t{64} << 20;
};

/// A ShapeInferenceOptions::FoldHook: after a node is inferred, if every present input has
/// compile-time data (an initializer or a folded value; an overridable graph input is not
/// constant), the node has a lowering and its outputs are small enough, evaluates it and stores
/// the results in the outputs' Value::data. Ops without a lowering are left for the emitter
/// (which reports them). Evaluation errors are returned naming the node. `evaluator` is
/// borrowed; `folded` (may be null) counts folded nodes.
ShapeInferenceOptions::FoldHook MakeFoldHook(Evaluator* evaluator, const FoldOptions& options,
                                             int* folded);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_FOLD_CONSTANTS_H_
