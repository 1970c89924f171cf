// Dead-node removal (dead_nodes.h): a walk back from the graph outputs marks what runs.
#include "compiler/passes/dead_nodes.h"

#include <vector>

namespace kiln::compiler {
namespace {

// Per node: whether an output reaches a graph output. Captures count as reads: a node feeding
// only an If/Loop body through its implicit inputs is live while that If/Loop is. A value shape
// inference folded is emitted as a constant, so what computed it (ShuffleNet's Shape / Gather
// chains for Slice bounds) is not read through it.
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
        if (u == kNoValue || g.value(u).data == nullptr) work.push_back(u);
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
