#include "compiler/passes/simplify.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

namespace kiln::compiler {
namespace {

bool IsDefault(const Node& n) { return n.domain.empty() || n.domain == "ai.onnx"; }

// The permutation of a Transpose node (default: reversed dims), or empty if malformed.
std::vector<int64_t> PermOf(const Graph& g, const Node& n) {
  const Value& in = g.value(n.inputs[0]);
  int rank = in.shape ? static_cast<int>(in.shape->size()) : -1;
  const Attribute* a = n.FindAttribute("perm");
  std::vector<int64_t> perm;
  if (a && a->type() == Attribute::Type::kInts && !a->ints().empty()) {
    perm = a->ints();
  } else {
    for (int i = rank - 1; i >= 0; --i) perm.push_back(i);
  }
  if (static_cast<int>(perm.size()) != rank) return {};
  return perm;
}

// The producer of v if it is a node of `op_type` in the default domain.
const Node* ProducerOf(const Graph& g, ValueId v, const std::set<std::string>& op_types,
                       NodeId* id) {
  const Value& val = g.value(v);
  if (val.kind != ValueKind::kNodeOutput || val.producer == kNoNode || val.data) return nullptr;
  const Node& p = g.node(val.producer);
  if (!IsDefault(p) || !op_types.count(p.op_type)) return nullptr;
  *id = val.producer;
  return &p;
}

// Whether Pad node `n` pads nothing: its pads (the input from opset 11, the attribute before)
// are known and all zero. Any mode then returns its input unchanged.
bool PadsNothing(const Graph& g, const Node& n) {
  std::vector<int64_t> pads;
  if (n.inputs.size() >= 2 && n.inputs[1] != kNoValue) {
    const Value& v = g.value(n.inputs[1]);
    if (!v.data) return false;
    StatusOr<std::vector<int64_t>> p = v.data->ToInt64s();
    if (!p.ok()) return false;
    pads = *p;
  } else if (const Attribute* a = n.FindAttribute("pads");
             a && a->type() == Attribute::Type::kInts) {
    pads = a->ints();
  } else {
    return false;
  }
  for (int64_t p : pads) {
    if (p != 0) return false;
  }
  return true;
}

// Points every reader of Pad node `n`'s output at its input instead, when all of them read it
// as an ordinary input (a subgraph's capture names the value) and it is not a graph output.
// torchvision's DenseNet exports each transition's AvgPool as Pad(pads = 0) + AveragePool:
// the Pad split its oneDNN region in four, with layout reorders and JIT copies between them.
bool BypassPad(Graph& g, const Node& n) {
  ValueId out = n.outputs.empty() ? kNoValue : n.outputs[0];
  if (out == kNoValue || !PadsNothing(g, n)) return false;
  for (ValueId o : g.outputs()) {
    if (o == out) return false;
  }
  std::vector<NodeId> users = g.Users(out);
  for (NodeId u : users) {
    const std::vector<ValueId>& implicit = g.node(u).implicit_inputs;
    if (std::find(implicit.begin(), implicit.end(), out) != implicit.end()) return false;
  }
  for (NodeId u : users) {
    for (size_t k = 0; k < g.node(u).inputs.size(); ++k) {
      if (g.node(u).inputs[k] == out) g.SetNodeInput(u, static_cast<int>(k), n.inputs[0]);
    }
  }
  return true;
}

// Gives each reader of a run-time DequantizeLinear after the first its own copy (ONNX Runtime's
// "dedicated QDQ pair"), so a vendor can fuse DQ -> Conv / MatMul -> Q per reader (a shared DQ
// output would escape each pattern). A DQ of a constant is folded and left alone; a reader
// through a subgraph capture keeps the original. Returns the copies made.
StatusOr<int> DedicateDequantize(Graph& g, NodeId n) {
  const Node& dq = g.node(n);
  if (!IsDefault(dq) || dq.op_type != "DequantizeLinear" || dq.outputs.empty()) return 0;
  ValueId v = dq.outputs[0];
  if (v == kNoValue || g.value(v).data || g.Users(v).size() < 2) return 0;
  std::vector<NodeId> readers(g.Users(v).begin() + 1, g.Users(v).end());
  int copies = 0;
  for (NodeId r : readers) {
    std::vector<size_t> slots;
    for (size_t i = 0; i < g.node(r).inputs.size(); ++i) {
      if (g.node(r).inputs[i] == v) slots.push_back(i);
    }
    if (slots.empty()) continue;  // reads v as a capture only
    std::string name = g.value(v).name + "_dedicated";
    for (int k = 1; g.FindValue(name); ++k)
      name = g.value(v).name + "_dedicated_" + std::to_string(k);
    ASSIGN_OR_RETURN(ValueId copy, g.AddValue(name, ValueKind::kNodeOutput));
    g.mutable_value(copy).dtype = g.value(v).dtype;
    g.mutable_value(copy).shape = g.value(v).shape;
    Node node = g.node(n);
    node.name = g.UniqueNodeName(node.name);
    node.outputs = {copy};
    RETURN_IF_ERROR(g.AddNode(std::move(node)).status());
    for (size_t i : slots) g.SetNodeInput(r, static_cast<int>(i), copy);
    ++copies;
  }
  return copies;
}

}  // namespace

Status Simplify(Graph& g, SimplifyStats* stats) {
  SimplifyStats local;
  SimplifyStats& st = stats ? *stats : local;
  ASSIGN_OR_RETURN(std::vector<NodeId> order, g.TopologicalOrder());
  static const std::set<std::string> kTranspose = {"Transpose"};
  // Views whose output depends only on the element order and the output shape.
  static const std::set<std::string> kViews = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};
  for (NodeId n : order) {
    ASSIGN_OR_RETURN(int copies, DedicateDequantize(g, n));
    st.dequantize_dedicated += copies;
    Node& node = g.mutable_node(n);
    if (!IsDefault(node) || node.inputs.empty() || node.inputs[0] == kNoValue) continue;
    if (node.op_type == "Transpose") {
      NodeId pid;
      const Node* p = ProducerOf(g, node.inputs[0], kTranspose, &pid);
      if (!p || p->inputs.empty() || p->inputs[0] == kNoValue) continue;
      std::vector<int64_t> outer = PermOf(g, node), inner = PermOf(g, *p);
      if (outer.empty() || outer.size() != inner.size()) continue;
      // out[k] = mid[outer[k]] = in[inner[outer[k]]].
      std::vector<int64_t> composed;
      for (int64_t k : outer) composed.push_back(inner[k]);
      ValueId source = p->inputs[0];
      node.attributes["perm"] = Attribute::Ints(composed);
      g.SetNodeInput(n, 0, source);
      ++st.transposes_merged;
    } else if (node.op_type == "CastLike" && node.inputs.size() == 2 &&
               node.inputs[1] != kNoValue) {
      // Only `like`'s dtype matters, and inference knows it: as a Cast the node no longer reads
      // `like`, so its kernel does not take it and a graph input used only there may have any
      // shape (the emitter declares such an input dtype-only).
      int to = DTypeToOnnx(g.value(node.inputs[1]).dtype);
      if (to == 0) continue;
      node.op_type = "Cast";
      node.attributes["to"] = Attribute::Int(to);
      g.SetNodeInput(n, 1, kNoValue);
      g.mutable_node(n).inputs.resize(1);
      ++st.castlikes_to_cast;
    } else if (kViews.count(node.op_type)) {
      // Reshape(Reshape(x)) reads x: the element order is the same, the node's own target
      // (its shape input or axes, and its inferred output shape) decides the result. Only the
      // first input is rewired; a Reshape whose shape input has 0 entries ("copy this dim")
      // refers to its input's dims, so it is left alone.
      NodeId pid;
      const Node* p = ProducerOf(g, node.inputs[0], kViews, &pid);
      if (!p || p->inputs.empty() || p->inputs[0] == kNoValue) continue;
      if (node.op_type != "Reshape" && node.op_type != "Flatten") continue;
      if (node.op_type == "Reshape") {
        if (node.inputs.size() < 2 || node.inputs[1] == kNoValue) continue;
        const Value& shape = g.value(node.inputs[1]);
        if (!shape.data) continue;
        StatusOr<std::vector<int64_t>> dims = shape.data->ToInt64s();
        if (!dims.ok()) continue;
        bool copies = false;
        for (int64_t d : *dims) copies |= d == 0;
        if (copies) continue;
      } else {
        continue;  // Flatten's axis refers to its input's rank
      }
      g.SetNodeInput(n, 0, p->inputs[0]);
      ++st.views_shortcut;
    } else if (node.op_type == "Pad" && BypassPad(g, node)) {
      ++st.pads_bypassed;
    }
  }
  return Status::Ok();
}

}  // namespace kiln::compiler
