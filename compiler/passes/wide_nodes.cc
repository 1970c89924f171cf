// Narrowing of variadic nodes wider than a kernel's buffer limit (see wide_nodes.h).
#include "compiler/passes/wide_nodes.h"

#include <algorithm>
#include <string>
#include <vector>

namespace kiln::compiler {
namespace {

bool DefaultDomain(const Node& node) { return node.domain.empty() || node.domain == "ai.onnx"; }

// Sum / Max / Min whose inputs all have the output's shape, in a dtype whose intermediate
// result the kernel keeps unwidened (so splitting the left-to-right chain changes nothing).
bool NarrowableElementwise(const Graph& g, const Node& node) {
  if (node.op_type != "Sum" && node.op_type != "Max" && node.op_type != "Min") return false;
  if (node.outputs.empty() || node.outputs[0] == kNoValue) return false;
  const Value& out = g.value(node.outputs[0]);
  if (!out.shape || out.dtype == DType::kF16 || out.dtype == DType::kBF16) return false;
  for (ValueId v : node.inputs) {
    if (v != kNoValue && (!g.value(v).shape || *g.value(v).shape != *out.shape)) return false;
  }
  return true;
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

// Moves the leading `count` present inputs of `n` into a new node of its op whose output
// becomes n's first input; returns the new node. `axis`: a Concat's, -1 for Sum / Max / Min.
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
  if (axis >= 0) {
    DimExpr sum = (*g.value(leading[0]).shape)[axis];
    for (int k = 1; k < count; ++k) sum = sum + (*g.value(leading[k]).shape)[axis];
    shape[axis] = sum;
  }
  std::string name = g.value(g.node(n).outputs[0]).name + "_leading";
  for (int k = 1; g.FindValue(name); ++k)
    name = g.value(g.node(n).outputs[0]).name + "_leading_" + std::to_string(k);
  ASSIGN_OR_RETURN(ValueId part, g.AddValue(name, ValueKind::kNodeOutput));
  g.mutable_value(part).dtype = g.value(g.node(n).outputs[0]).dtype;
  g.mutable_value(part).shape = shape;
  Node node;
  node.name = g.UniqueNodeName(g.node(n).name + "_leading");
  node.op_type = g.node(n).op_type;
  node.domain = g.node(n).domain;
  node.inputs = leading;
  node.outputs = {part};
  if (axis >= 0) node.attributes["axis"] = Attribute::Int(axis);
  ASSIGN_OR_RETURN(NodeId added, g.AddNode(std::move(node)));
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

StatusOr<int> NarrowWideNodes(Graph& g, int max_inputs) {
  if (max_inputs < 2) return InvalidArgument("NarrowWideNodes: max_inputs must be >= 2");
  int added = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {  // nodes added here are visited too
    const Node& node = g.node(n);
    if (!DefaultDomain(node)) continue;
    int present = static_cast<int>(std::count_if(node.inputs.begin(), node.inputs.end(),
                                                 [](ValueId v) { return v != kNoValue; }));
    if (present <= max_inputs) continue;
    int axis = -1;
    if (node.op_type == "Concat") {
      axis = ConcatAxis(g, node);
      if (axis < 0) continue;  // shape inference reports such a node
    } else if (!NarrowableElementwise(g, node)) {
      continue;
    }
    RETURN_IF_ERROR(SplitOffLeading(g, n, axis, present - max_inputs + 1).status());
    ++added;
  }
  return added;
}

}  // namespace kiln::compiler
