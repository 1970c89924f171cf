// Narrowing of variadic nodes wider than a kernel's buffer limit (see wide_nodes.h).
#include "compiler/passes/wide_nodes.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::compiler {
namespace {

bool DefaultDomain(const Node& node) { return node.domain.empty() || node.domain == "ai.onnx"; }

// The numpy broadcast of `shapes` when it is evident from the dims (equal expressions, or
// constant 1s beside them); nullopt when it would take a run-time check.
std::optional<SymbolicShape> EvidentBroadcast(const std::vector<const SymbolicShape*>& shapes) {
  size_t rank = 0;
  for (const SymbolicShape* s : shapes) rank = std::max(rank, s->size());
  SymbolicShape out(rank, DimExpr(1));
  for (size_t d = 0; d < rank; ++d) {
    std::optional<DimExpr> dim;
    for (const SymbolicShape* s : shapes) {
      if (d + s->size() < rank) continue;
      const DimExpr& e = (*s)[d + s->size() - rank];
      if (e.is_const() && e.const_value() == 1) continue;
      if (dim && *dim != e) return std::nullopt;
      dim = e;
    }
    if (dim) out[d] = *dim;
  }
  return out;
}

// Sum / Max / Min / Mean whose inputs have shapes (broadcasting evidently: EvidentBroadcast),
// in a dtype whose intermediate result the kernel keeps unwidened (so splitting the
// left-to-right chain changes nothing).
bool NarrowableElementwise(const Graph& g, const Node& node) {
  if (node.op_type != "Sum" && node.op_type != "Max" && node.op_type != "Min" &&
      node.op_type != "Mean")
    return false;
  if (node.outputs.empty() || node.outputs[0] == kNoValue) return false;
  const Value& out = g.value(node.outputs[0]);
  if (!out.shape || out.dtype == DType::kF16 || out.dtype == DType::kBF16) return false;
  std::vector<const SymbolicShape*> shapes;
  for (ValueId v : node.inputs) {
    if (v == kNoValue) continue;
    if (!g.value(v).shape) return false;
    shapes.push_back(&*g.value(v).shape);
  }
  return EvidentBroadcast(shapes).has_value();
}

// A new value named after `base` (unique in g) of `dtype` and `shape`.
StatusOr<ValueId> NewValue(Graph& g, const std::string& base, ValueKind kind, DType dtype,
                           SymbolicShape shape) {
  ASSIGN_OR_RETURN(ValueId v, g.AddValue(g.UniqueValueName(base), kind));
  g.mutable_value(v).dtype = dtype;
  g.mutable_value(v).shape = std::move(shape);
  return v;
}

// `count` in `dtype` as a scalar constant, or nullopt for a dtype Mean's rewrite skips.
StatusOr<std::optional<ValueId>> CountConstant(Graph& g, const std::string& base, DType dtype,
                                               int64_t count) {
  std::shared_ptr<const TensorData> data;
  auto copy = [&](const auto& v) { return TensorData::Copy(dtype, {}, &v, sizeof(v)); };
  if (dtype == DType::kF32) {
    ASSIGN_OR_RETURN(data, copy(static_cast<float>(count)));
  } else if (dtype == DType::kF64) {
    ASSIGN_OR_RETURN(data, copy(static_cast<double>(count)));
  } else if (dtype == DType::kI32) {
    ASSIGN_OR_RETURN(data, copy(static_cast<int32_t>(count)));
  } else if (dtype == DType::kI64) {
    ASSIGN_OR_RETURN(data, copy(count));
  } else {
    return std::optional<ValueId>();
  }
  ASSIGN_OR_RETURN(ValueId v, NewValue(g, base, ValueKind::kConstant, dtype, {}));
  g.mutable_value(v).data = data;
  return std::optional<ValueId>(v);
}

// Mean(x_1 .. x_n) as Div(Sum(x_1 .. x_n), n), which its kernel computes (the sum left to
// right, then one division): the Sum is then narrowed like any. False (nothing changed) for a
// dtype without a count constant here.
StatusOr<bool> MeanAsSumOverCount(Graph& g, NodeId n, int present) {
  const ValueId out = g.node(n).outputs[0];
  const Value& y = g.value(out);
  ASSIGN_OR_RETURN(std::optional<ValueId> count,
                   CountConstant(g, y.name + "_count", y.dtype, present));
  if (!count) return false;
  ASSIGN_OR_RETURN(ValueId sum, NewValue(g, g.value(out).name + "_sum", ValueKind::kNodeOutput,
                                         g.value(out).dtype, *g.value(out).shape));
  g.mutable_node(n).op_type = "Sum";
  g.mutable_node(n).outputs[0] = sum;
  g.mutable_value(sum).producer = n;
  g.mutable_value(out).producer = kNoNode;
  Node div;
  div.name = g.UniqueNodeName(g.node(n).name + "_count");
  div.op_type = "Div";
  div.domain = g.node(n).domain;
  div.inputs = {sum, *count};
  div.outputs = {out};
  RETURN_IF_ERROR(g.AddNode(std::move(div)).status());
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
  if (axis < 0) {  // Sum / Max / Min: the leading inputs' broadcast
    std::vector<const SymbolicShape*> shapes;
    for (ValueId v : leading) shapes.push_back(&*g.value(v).shape);
    shape = *EvidentBroadcast(shapes);  // NarrowableElementwise checked it
  } else {
    DimExpr sum = (*g.value(leading[0]).shape)[axis];
    for (int k = 1; k < count; ++k) sum = sum + (*g.value(leading[k]).shape)[axis];
    shape[axis] = sum;
  }
  ASSIGN_OR_RETURN(ValueId part,
                   g.AddValue(g.UniqueValueName(g.value(g.node(n).outputs[0]).name + "_leading"),
                              ValueKind::kNodeOutput));
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

// Gives Split `n` explicit `sizes`: the attribute below opset 13, else a constant split input.
Status SetSplitSizes(Graph& g, NodeId n, const std::vector<int64_t>& sizes) {
  Node& node = g.mutable_node(n);
  node.attributes.erase("split");
  node.attributes.erase("num_outputs");
  if (g.OpsetFor("") < 13) {
    node.attributes["split"] = Attribute::Ints(sizes);
    return Status::Ok();
  }
  const int64_t k = static_cast<int64_t>(sizes.size());
  ASSIGN_OR_RETURN(ValueId c, NewValue(g, g.node(n).name + "_sizes", ValueKind::kConstant,
                                       DType::kI64, {DimExpr(k)}));
  g.mutable_value(c).data = TensorData::FromInt64s({k}, sizes);
  g.mutable_value(c).symbolic_value = std::vector<DimExpr>(sizes.begin(), sizes.end());
  g.SetNodeInput(n, 1, c);
  return Status::Ok();
}

// Split `n`, which has more outputs than `max_outputs`, as a Split of its input into spans of
// at most max_outputs consecutive outputs (n itself) and a Split of each span into those
// outputs (new nodes): each output is copied once more. Returns false (nothing changed) when
// an output is omitted or its size on the axis is not a constant (the spans' sizes would be
// run-time values).
StatusOr<bool> NarrowSplit(Graph& g, NodeId n, int max_outputs) {
  const Node& node = g.node(n);
  const ValueId x = node.inputs.empty() ? kNoValue : node.inputs[0];
  if (x == kNoValue || !g.value(x).shape) return false;
  const SymbolicShape xs = *g.value(x).shape;
  const Attribute* axis_attr = node.FindAttribute("axis");
  int64_t axis = axis_attr && axis_attr->type() == Attribute::Type::kInt ? axis_attr->i() : 0;
  const int64_t rank = static_cast<int64_t>(xs.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  std::vector<int64_t> sizes;
  for (ValueId o : node.outputs) {
    if (o == kNoValue || !g.value(o).shape || g.value(o).shape->size() != xs.size() ||
        !(*g.value(o).shape)[axis].is_const())
      return false;
    sizes.push_back((*g.value(o).shape)[axis].const_value());
  }
  const std::vector<ValueId> outputs = node.outputs;
  const int total = static_cast<int>(outputs.size());
  std::vector<ValueId> spans;
  std::vector<int64_t> span_sizes;
  for (int first = 0; first < total; first += max_outputs) {
    const int last = std::min(total, first + max_outputs);
    int64_t size = 0;
    for (int k = first; k < last; ++k) size += sizes[k];
    SymbolicShape shape = xs;
    shape[axis] = DimExpr(size);
    ASSIGN_OR_RETURN(ValueId span, NewValue(g, g.value(x).name + "_span", ValueKind::kNodeOutput,
                                            g.value(x).dtype, std::move(shape)));
    spans.push_back(span);
    span_sizes.push_back(size);
  }
  for (ValueId o : outputs) g.mutable_value(o).producer = kNoNode;
  g.mutable_node(n).outputs = spans;
  for (ValueId span : spans) g.mutable_value(span).producer = n;
  RETURN_IF_ERROR(SetSplitSizes(g, n, span_sizes));
  for (size_t j = 0; j < spans.size(); ++j) {
    const int first = static_cast<int>(j) * max_outputs;
    const int last = std::min(total, first + max_outputs);
    Node part;
    part.name = g.UniqueNodeName(g.node(n).name + "_span");
    part.op_type = "Split";
    part.domain = g.node(n).domain;
    part.inputs = {spans[j]};
    part.outputs.assign(outputs.begin() + first, outputs.begin() + last);
    part.attributes["axis"] = Attribute::Int(axis);
    ASSIGN_OR_RETURN(NodeId added, g.AddNode(std::move(part)));
    RETURN_IF_ERROR(
        SetSplitSizes(g, added, std::vector<int64_t>(sizes.begin() + first, sizes.begin() + last)));
  }
  return true;
}

}  // namespace

StatusOr<int> NarrowWideNodes(Graph& g, int max_inputs) {
  if (max_inputs < 2) return InvalidArgument("NarrowWideNodes: max_inputs must be >= 2");
  int added = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {  // nodes added here are visited too
    if (!DefaultDomain(g.node(n))) continue;
    if (g.node(n).op_type == "Split") {
      // Its buffers: the input, the sizes (when an input), the outputs.
      while (static_cast<int>(g.node(n).outputs.size()) > max_inputs - 1) {
        ASSIGN_OR_RETURN(bool narrowed, NarrowSplit(g, n, max_inputs - 1));
        if (!narrowed) break;
        added += static_cast<int>(g.node(n).outputs.size());
      }
      continue;
    }
    const std::vector<ValueId>& inputs = g.node(n).inputs;
    int present = static_cast<int>(
        std::count_if(inputs.begin(), inputs.end(), [](ValueId v) { return v != kNoValue; }));
    if (present <= max_inputs) continue;
    int axis = -1;
    if (g.node(n).op_type == "Concat") {
      axis = ConcatAxis(g, g.node(n));
      if (axis < 0) continue;  // shape inference reports such a node
    } else if (!NarrowableElementwise(g, g.node(n))) {
      continue;
    }
    if (g.node(n).op_type == "Mean") {
      ASSIGN_OR_RETURN(bool rewritten, MeanAsSumOverCount(g, n, present));
      if (!rewritten) continue;
      ++added;
    }
    RETURN_IF_ERROR(SplitOffLeading(g, n, axis, present - max_inputs + 1).status());
    ++added;
  }
  return added;
}

}  // namespace kiln::compiler
