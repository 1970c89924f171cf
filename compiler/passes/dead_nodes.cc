// Dead-node removal (dead_nodes.h): a walk back from the graph outputs marks what runs.
#include "compiler/passes/dead_nodes.h"

#include <vector>

namespace kiln::compiler {
namespace {

// Whether the node producing `v` (if any) reads only values with data (constants, folded
// values, graph-input defaults). Counting a default as constant keeps its reader: the safe way.
bool ReadsOnlyConstantData(const Graph& g, ValueId v) {
  NodeId p = g.value(v).producer;
  return p == kNoNode || g.ReadsOnlyConstants(p, ConstantReads::kHasData);
}

// Per node: whether an output reaches a graph output. Captures count as reads: a node feeding
// only an If/Loop body through its implicit inputs is live while that If/Loop is. A value shape
// inference folded is emitted as a constant, so a producer that read run-time values to compute
// it (ShuffleNet's Shape of a conv output, behind folded Slice bounds) is not read through it:
// left live, it made that conv output a region output. A producer that reads only constants
// stays (a DequantizeLinear of int8 weights: the int8 rules match it).
std::vector<bool> LiveNodes(const Graph& g) {
  std::vector<bool> live(g.num_nodes(), false);
  std::vector<ValueId> work(g.outputs().begin(), g.outputs().end());
  while (!work.empty()) {
    ValueId v = work.back();
    work.pop_back();
    NodeId p = v == kNoValue ? kNoNode : g.value(v).producer;
    if (p == kNoNode || live[p]) continue;
    live[p] = true;
    const Node& n = g.node(p);
    for (const std::vector<ValueId>* in : {&n.inputs, &n.implicit_inputs}) {
      for (ValueId u : *in) {
        if (u == kNoValue || g.value(u).data == nullptr || ReadsOnlyConstantData(g, u)) {
          work.push_back(u);
        }
      }
    }
  }
  return live;
}

}  // namespace

StatusOr<int> RemoveDeadNodes(Graph& g) {
  std::vector<bool> live = LiveNodes(g);
  int dead = 0;
  for (bool l : live) dead += l ? 0 : 1;
  if (dead == 0) return 0;
  RETURN_IF_ERROR(g.RemoveNodes(live));
  return dead;
}

}  // namespace kiln::compiler
