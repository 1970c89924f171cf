// Narrowing of Concats wider than a kernel's buffer limit (see wide_concat.h).
#include "compiler/passes/wide_concat.h"

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::compiler {
namespace {

bool IsConcat(const Node& node) {
  return node.op_type == "Concat" && (node.domain.empty() || node.domain == "ai.onnx");
}

// The normalized axis of Concat `node`, or -1 when its rank or axis is unknown or invalid.
int ConcatAxis(const Graph& g, const Node& node) {
  const Attribute* axis = node.FindAttribute("axis");
  if (!axis || axis->type() != Attribute::Type::kInt || node.outputs.empty() ||
      node.outputs[0] == kNoValue || !g.value(node.outputs[0]).shape) {
    return -1;
  }
  int64_t rank = static_cast<int64_t>(g.value(node.outputs[0]).shape->size());
  int64_t a = axis->i() < 0 ? axis->i() + rank : axis->i();
  return a >= 0 && a < rank ? static_cast<int>(a) : -1;
}

// Moves the leading `count` present inputs of Concat `n` into a new Concat whose output
// becomes n's first input; returns the new node.
StatusOr<NodeId> SplitOffLeading(Graph& g, NodeId n, int axis, int count) {
  std::vector<ValueId> present;
  for (ValueId v : g.node(n).inputs) {
    if (v != kNoValue) present.push_back(v);
  }
  std::vector<ValueId> leading(present.begin(), present.begin() + count);
  for (ValueId v : leading) {
    if (!g.value(v).shape) return InvalidArgument(g.DescribeNode(n) + ": an input has no shape");
  }
  SymbolicShape shape = *g.value(g.node(n).outputs[0]).shape;
  DimExpr sum = (*g.value(leading[0]).shape)[axis];
  for (int k = 1; k < count; ++k) sum = sum + (*g.value(leading[k]).shape)[axis];
  shape[axis] = sum;
  std::string name = g.value(g.node(n).outputs[0]).name + "_leading";
  for (int k = 1; g.FindValue(name); ++k)
    name = g.value(g.node(n).outputs[0]).name + "_leading_" + std::to_string(k);
  ASSIGN_OR_RETURN(ValueId part, g.AddValue(name, ValueKind::kNodeOutput));
  g.mutable_value(part).dtype = g.value(g.node(n).outputs[0]).dtype;
  g.mutable_value(part).shape = shape;
  Node concat;
  concat.name = g.UniqueNodeName(g.node(n).name + "_leading");
  concat.op_type = "Concat";
  concat.inputs = leading;
  concat.outputs = {part};
  concat.attributes["axis"] = Attribute::Int(axis);
  ASSIGN_OR_RETURN(NodeId added, g.AddNode(std::move(concat)));
  // n reads part, then the remaining inputs: clear every slot (keeping the use lists right),
  // then drop the emptied ones.
  std::vector<ValueId> rest = {part};
  rest.insert(rest.end(), present.begin() + count, present.end());
  int slots = static_cast<int>(g.node(n).inputs.size());
  for (int s = 0; s < slots; ++s) g.SetNodeInput(n, s, kNoValue);
  for (int s = 0; s < static_cast<int>(rest.size()); ++s) g.SetNodeInput(n, s, rest[s]);
  g.mutable_node(n).inputs.resize(rest.size());
  return added;
}

}  // namespace

StatusOr<int> NarrowWideConcats(Graph& g, int max_inputs) {
  if (max_inputs < 2) return InvalidArgument("NarrowWideConcats: max_inputs must be >= 2");
  int added = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {  // nodes added here are visited too
    const Node& node = g.node(n);
    if (!IsConcat(node)) continue;
    int present = static_cast<int>(
        std::count_if(node.inputs.begin(), node.inputs.end(), [](ValueId v) { return v != kNoValue; }));
    if (present <= max_inputs) continue;
    int axis = ConcatAxis(g, node);
    if (axis < 0) continue;  // shape inference reports such a node
    RETURN_IF_ERROR(SplitOffLeading(g, n, axis, present - max_inputs + 1).status());
    ++added;
  }
  return added;
}

}  // namespace kiln::compiler
