// Dead-node removal: drops the nodes of the main graph whose outputs reach no graph output, so
// later passes (partitioning, vendor codegen, weight packing) see only readers that run.
#ifndef KILN_COMPILER_PASSES_DEAD_NODES_H_
#define KILN_COMPILER_PASSES_DEAD_NODES_H_

#include "base/status.h"
#include "compiler/ir/graph.h"

namespace kiln::compiler {

/// Removes every node of `graph` (not of its subgraphs) none of whose outputs reaches a graph
/// output through node inputs or subgraph captures (implicit inputs), with the values those
/// nodes produce. ONNX operators have no side effects, so such a node never changes a result;
/// the emitter would skip it anyway. Graph inputs and initializers stay even when unread.
/// NodeIds and ValueIds change (names do not). Returns the number of nodes removed.
StatusOr<int> RemoveDeadNodes(Graph& graph);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_DEAD_NODES_H_
