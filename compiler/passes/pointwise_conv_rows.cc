#include "compiler/passes/pointwise_conv_rows.h"

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/ops/attributes.h"
#include "compiler/passes/graph_match.h"

namespace kiln::compiler {
namespace {

bool IsF32(const Graph& g, ValueId v) { return v != kNoValue && g.value(v).dtype == DType::kF32; }

// The chain one rewrite replaces, and what it needs of it.
struct Chain {
  NodeId transpose = kNoNode, conv = kNoNode, act = kNoNode, reduce = kNoNode;
  int64_t c = 0, o = 0;
  bool keepdims = true;
  bool axes_input = false;  // the reduction takes its axes as input 1 (else the attribute)
};

// The Conv reading Transpose `t` (perm [0, 3, 1, 2] of a float32 [N, P, k, C]) when it is a
// group-1, 1 x 1, unit-stride, unpadded convolution with constant weights [O, C, 1, 1] and an
// optional constant bias [O].
bool MatchConv(const Graph& g, NodeId t, Chain* ch) {
  const Node& tr = g.node(t);
  if (tr.op_type != "Transpose" || !tr.domain.empty() || tr.inputs.size() != 1 ||
      tr.outputs.size() != 1 || !IsF32(g, tr.inputs[0]))
    return false;
  const Attribute* perm = tr.FindAttribute("perm");
  if (perm == nullptr || perm->type() != Attribute::Type::kInts ||
      perm->ints() != std::vector<int64_t>{0, 3, 1, 2})
    return false;
  const Value& x = g.value(tr.inputs[0]);
  if (!x.shape || x.shape->size() != 4 || !(*x.shape)[3].is_const()) return false;
  const NodeId c = SoleDataReader(g, tr.outputs[0]);
  if (c == kNoNode) return false;
  const Node& conv = g.node(c);
  if (conv.op_type != "Conv" || !conv.domain.empty() || conv.inputs.size() < 2 ||
      conv.outputs.size() != 1 || !IsF32(g, conv.outputs[0]))
    return false;
  const TensorData* w = ConstantOf(g, conv.inputs[1]);
  const int64_t cin = (*x.shape)[3].const_value();
  if (w == nullptr || w->dtype() != DType::kF32 || w->dims().size() != 4 || w->dims()[1] != cin ||
      w->dims()[2] != 1 || w->dims()[3] != 1)
    return false;
  const int64_t cout = w->dims()[0];
  if (conv.inputs.size() > 2 && conv.inputs[2] != kNoValue) {
    const TensorData* b = ConstantOf(g, conv.inputs[2]);
    if (b == nullptr || b->dtype() != DType::kF32 || b->num_elements() != cout) return false;
  }
  StatusOr<ConvAttributes> a = ParseConvAttributes(conv, 2, std::vector<int64_t>{1, 1});
  if (!a.ok() || a->group != 1 || a->same()) return false;
  for (int d = 0; d < 2; ++d) {
    if (a->strides[d] != 1 || a->dilations[d] != 1) return false;
  }
  if (a->auto_pad == AutoPad::kNotSet) {
    for (int64_t p : a->pads) {
      if (p != 0) return false;
    }
  }
  ch->transpose = t;
  ch->conv = c;
  ch->c = cin;
  ch->o = cout;
  return true;
}

// An elementwise function of its first input alone (other inputs constant), float32 out.
bool IsActivation(const Graph& g, const Node& n) {
  static const std::set<std::string> kUnary = {
      "Relu", "LeakyRelu", "Clip",        "Sigmoid",   "Tanh",     "Elu",
      "Selu", "Celu",      "HardSigmoid", "HardSwish", "Softplus", "Softsign"};
  if (!n.domain.empty() || !kUnary.count(n.op_type) || n.outputs.size() != 1 ||
      !IsF32(g, n.outputs[0]))
    return false;
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    if (n.inputs[k] != kNoValue && ConstantOf(g, n.inputs[k]) == nullptr) return false;
  }
  return true;
}

// Whether node `r` reduces its rank-4 input over the last dim alone (axes [3] or [-1]).
bool MatchReduce(const Graph& g, NodeId r, Chain* ch) {
  static const std::set<std::string> kReduce = {"ReduceMax", "ReduceMin", "ReduceMean",
                                                "ReduceSum"};
  const Node& n = g.node(r);
  if (!n.domain.empty() || !kReduce.count(n.op_type) || n.outputs.size() != 1 ||
      !IsF32(g, n.outputs[0]))
    return false;
  std::vector<int64_t> axes;
  if (const Attribute* a = n.FindAttribute("axes")) {
    if (a->type() != Attribute::Type::kInts || n.inputs.size() > 1) return false;
    axes = a->ints();
  } else if (n.inputs.size() == 2 && n.inputs[1] != kNoValue) {
    const TensorData* d = ConstantOf(g, n.inputs[1]);
    if (d == nullptr) return false;
    StatusOr<std::vector<int64_t>> v = d->ToInt64s();
    if (!v.ok()) return false;
    axes = *v;
    ch->axes_input = true;
  }
  if (axes.size() != 1 || (axes[0] != 3 && axes[0] != -1)) return false;
  if (const Attribute* k = n.FindAttribute("keepdims")) {
    if (k->type() != Attribute::Type::kInt) return false;
    ch->keepdims = k->i() != 0;
  }
  ch->reduce = r;
  return true;
}

std::optional<Chain> MatchChain(const Graph& g, NodeId t) {
  Chain ch;
  if (!MatchConv(g, t, &ch)) return std::nullopt;
  NodeId next = SoleDataReader(g, g.node(ch.conv).outputs[0]);
  if (next != kNoNode && IsActivation(g, g.node(next))) {
    ch.act = next;
    next = SoleDataReader(g, g.node(next).outputs[0]);
  }
  if (next == kNoNode || !MatchReduce(g, next, &ch)) return std::nullopt;
  return ch;
}

StatusOr<ValueId> AddConstant(Graph& g, const std::string& base, DType dtype,
                              std::vector<int64_t> dims, const void* data, size_t bytes) {
  ASSIGN_OR_RETURN(ValueId id, g.AddValue(g.UniqueValueName(base), ValueKind::kConstant));
  SymbolicShape shape;
  for (int64_t d : dims) shape.push_back(DimExpr(d));
  ASSIGN_OR_RETURN(TensorDataRef t, TensorData::Copy(dtype, std::move(dims), data, bytes));
  Value& v = g.mutable_value(id);
  v.dtype = dtype;
  v.shape = std::move(shape);
  v.data = std::move(t);
  return id;
}

// Adds node `op` named after `base` reading `inputs`, writing a new float32 value of `shape`.
StatusOr<ValueId> AddNode(Graph& g, const std::string& base, const std::string& op,
                          std::vector<ValueId> inputs, const SymbolicShape& shape,
                          std::map<std::string, Attribute> attributes = {}) {
  ASSIGN_OR_RETURN(ValueId y, g.AddValue(g.UniqueValueName(base), ValueKind::kNodeOutput));
  g.mutable_value(y).dtype = DType::kF32;
  g.mutable_value(y).shape = shape;
  Node n;
  n.name = g.UniqueNodeName(base);
  n.op_type = op;
  n.inputs = std::move(inputs);
  n.outputs = {y};
  n.attributes = std::move(attributes);
  RETURN_IF_ERROR(g.AddNode(std::move(n)).status());
  return y;
}

Status Rewrite(Graph& g, const Chain& ch, std::vector<bool>* keep) {
  const Node conv = g.node(ch.conv);
  const std::string& name = conv.name;
  const ValueId x = g.node(ch.transpose).inputs[0];
  SymbolicShape rows = *g.value(x).shape;  // [N, P, k, C] -> [N, P, k, O]
  rows[3] = DimExpr(ch.o);
  // W [O, C] (1 x 1 taps) transposed to [C, O].
  const float* w = static_cast<const float*>(g.value(conv.inputs[1]).data->data());
  std::vector<float> wt(static_cast<size_t>(ch.c * ch.o));
  for (int64_t o = 0; o < ch.o; ++o) {
    for (int64_t c = 0; c < ch.c; ++c) wt[c * ch.o + o] = w[o * ch.c + c];
  }
  ASSIGN_OR_RETURN(ValueId wv, AddConstant(g, name + "_wt", DType::kF32, {ch.c, ch.o}, wt.data(),
                                           wt.size() * sizeof(float)));
  ASSIGN_OR_RETURN(ValueId y, AddNode(g, name + "_rows", "MatMul", {x, wv}, rows));
  if (conv.inputs.size() > 2 && conv.inputs[2] != kNoValue) {
    ASSIGN_OR_RETURN(y, AddNode(g, name + "_bias", "Add", {y, conv.inputs[2]}, rows));
  }
  if (ch.act != kNoNode) {
    const Node act = g.node(ch.act);
    std::vector<ValueId> inputs = act.inputs;
    inputs[0] = y;
    ASSIGN_OR_RETURN(y, AddNode(g, act.name + "_rows", act.op_type, inputs, rows, act.attributes));
  }
  // The reduction over the neighbours, now dim 2.
  const Node red = g.node(ch.reduce);
  SymbolicShape reduced = rows;
  if (ch.keepdims) {
    reduced[2] = DimExpr(1);
  } else {
    reduced.erase(reduced.begin() + 2);
  }
  std::vector<ValueId> inputs = {y};
  std::map<std::string, Attribute> attributes = red.attributes;
  const int64_t axis = 2;
  if (ch.axes_input) {
    ASSIGN_OR_RETURN(ValueId axes, AddConstant(g, red.name + "_axes", DType::kI64, {1}, &axis,
                                               sizeof(axis)));
    inputs.push_back(axes);
  } else {
    attributes["axes"] = Attribute::Ints({axis});
  }
  ASSIGN_OR_RETURN(y, AddNode(g, red.name + "_rows", red.op_type, inputs, reduced, attributes));
  // The reduction node becomes the Transpose back: its output value keeps its producer.
  for (size_t k = 1; k < red.inputs.size(); ++k) {
    g.SetNodeInput(ch.reduce, static_cast<int>(k), kNoValue);
  }
  g.SetNodeInput(ch.reduce, 0, y);
  Node& tr = g.mutable_node(ch.reduce);
  tr.inputs.resize(1);
  tr.op_type = "Transpose";
  tr.attributes.clear();
  tr.dim_facts.clear();
  tr.attributes["perm"] = Attribute::Ints(ch.keepdims ? std::vector<int64_t>{0, 3, 1, 2}
                                                      : std::vector<int64_t>{0, 2, 1});
  (*keep)[ch.transpose] = false;
  (*keep)[ch.conv] = false;
  if (ch.act != kNoNode) (*keep)[ch.act] = false;
  return Status::Ok();
}

}  // namespace

StatusOr<int> PointwiseConvsOverRows(Graph& graph) {
  int rewritten = 0;
  const int nodes = graph.num_nodes();
  std::vector<bool> keep(nodes, true);
  for (NodeId n = 0; n < nodes; ++n) {
    if (!keep[n]) continue;
    std::optional<Chain> ch = MatchChain(graph, n);
    if (!ch) continue;
    RETURN_IF_ERROR(Rewrite(graph, *ch, &keep));
    ++rewritten;
  }
  keep.resize(graph.num_nodes(), true);
  if (rewritten > 0) RETURN_IF_ERROR(graph.RemoveNodes(keep));
  return rewritten;
}

}  // namespace kiln::compiler
