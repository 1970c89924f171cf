#include "compiler/passes/simplify.h"

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

}  // namespace

Status Simplify(Graph& g, SimplifyStats* stats) {
  SimplifyStats local;
  SimplifyStats& st = stats ? *stats : local;
  ASSIGN_OR_RETURN(std::vector<NodeId> order, g.TopologicalOrder());
  static const std::set<std::string> kTranspose = {"Transpose"};
  // Views whose output depends only on the element order and the output shape.
  static const std::set<std::string> kViews = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"};
  for (NodeId n : order) {
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
    }
  }
  return Status::Ok();
}

}  // namespace kiln::compiler
