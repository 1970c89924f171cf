// Small graph queries the rewriting passes share (conv_transpose_phases, pointwise_conv_rows).
#ifndef KILN_COMPILER_PASSES_GRAPH_MATCH_H_
#define KILN_COMPILER_PASSES_GRAPH_MATCH_H_

#include "compiler/ir/graph.h"

namespace kiln::compiler {

/// The node reading `v` when it is the only reader, reads it once as its data input (slot 0)
/// and `v` is not a graph output; kNoNode otherwise.
NodeId SoleDataReader(const Graph& g, ValueId v);

/// The data of `v` when it is known at compile time (a constant or an initializer that is not a
/// graph input); null otherwise (kNoValue included).
const TensorData* ConstantOf(const Graph& g, ValueId v);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_GRAPH_MATCH_H_
