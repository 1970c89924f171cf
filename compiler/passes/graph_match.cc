#include "compiler/passes/graph_match.h"

#include <algorithm>

namespace kiln::compiler {

NodeId SoleDataReader(const Graph& g, ValueId v) {
  if (v == kNoValue || g.Users(v).size() != 1) return kNoNode;
  if (std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end()) return kNoNode;
  const NodeId u = g.Users(v)[0];
  const Node& r = g.node(u);
  if (!r.implicit_inputs.empty() || r.inputs.empty() || r.inputs[0] != v) return kNoNode;
  for (size_t k = 1; k < r.inputs.size(); ++k) {
    if (r.inputs[k] == v) return kNoNode;
  }
  return u;
}

const TensorData* ConstantOf(const Graph& g, ValueId v) {
  if (v == kNoValue) return nullptr;
  const Value& val = g.value(v);
  return val.kind == ValueKind::kGraphInput ? nullptr : val.data.get();
}

}  // namespace kiln::compiler
