// Lowering of every live node of one function and the fusion decisions: which elementwise nodes
// become one kernel, and which groups become the epilogue of the kernel producing their input.
// The result is the list of items Emitter::EmitItems emits in order.
#include <optional>

#include "compiler/emit/emitter.h"

namespace kiln::compiler::emit_internal {

// Lowers every live node. need_sf_[n]: the node's outputs have dims that no earlier symbol
// binding provides (data-dependent, or fresh dims), so it runs its own shape function.
Status Emitter::Prepare() {
  need_sf_.assign(g_.num_nodes(), false);
  std::set<std::string> bound;
  for (const auto& [name, src] : bound_) bound.insert(name);
  auto bind = [&](const SymbolicShape& shape) {
    for (const DimExpr& d : shape) d.CollectSymbols(&bound);
  };
  for (const Unit& u : units_) {
    if (u.region >= 0) {
      for (ValueId out : regions_[u.region].outputs) bind(*g_.value(out).shape);
      continue;
    }
    const Node& node = g_.node(u.node);
    bool need = node.data_dependent_shape;
    for (ValueId out : node.outputs) {
      if (out != kNoValue && !SymbolsIn(*g_.value(out).shape, bound)) need = true;
    }
    need_sf_[u.node] = need;
    for (ValueId out : node.outputs) {
      if (out != kNoValue) bind(*g_.value(out).shape);
    }
    if (IsControlFlow(node)) {
      need_sf_[u.node] = false;  // results come from the callee, with their shapes
      continue;
    }
    StatusOr<LoweredNode> lowered = LowerNode(g_, u.node, need, table_);
    if (!lowered.ok()) {
      if (lowered.status().code() != StatusCode::kUnsupported) return lowered.status();
      unsupported_[node.op_type].push_back(node.name);
      continue;
    }
    lowered_[u.node] = std::move(*lowered);
  }
  return unsupported_.empty() ? Status::Ok() : UnsupportedError();
}

// One error listing every op type kiln cannot lower, with up to three of its nodes.
Status Emitter::UnsupportedError() const {
  std::string msg = "uses " + std::to_string(unsupported_.size()) +
                    " op type(s) kiln cannot lower: ";
  bool first = true;
  for (const auto& [op, nodes] : unsupported_) {
    msg += std::string(first ? "" : ", ") + op + " (node" + (nodes.size() > 1 ? "s" : "") + " ";
    first = false;
    for (size_t i = 0; i < nodes.size() && i < 3; ++i) msg += (i ? ", '" : "'") + nodes[i] + "'";
    if (nodes.size() > 3) msg += ", ... " + std::to_string(nodes.size()) + " in all";
    msg += ")";
  }
  return Unsupported(msg);
}

// The decisions Fuse's steps share.
struct Emitter::FusionState {
  std::set<ValueId> graph_outputs;
  std::set<NodeId> live_nodes;
  // consumer_of[n]: a node of the group n is absorbed into (RootOf follows the chain).
  std::map<NodeId, NodeId> consumer_of;
  std::map<NodeId, std::vector<NodeId>> members_of;  // root -> members in unit order
  std::set<NodeId> absorbed;                         // nodes emitted inside another's kernel
  std::map<NodeId, int> fused_at;                    // root -> index into fused_

  NodeId RootOf(NodeId n) const {
    for (auto it = consumer_of.find(n); it != consumer_of.end(); it = consumer_of.find(n)) {
      n = it->second;
    }
    return n;
  }
};

bool Emitter::Elementwise(NodeId n) const {
  auto it = lowered_.find(n);
  return it != lowered_.end() && it->second.kernel && it->second.element_fn && !need_sf_[n] &&
         g_.node(n).outputs.size() >= 1 && g_.node(n).outputs[0] != kNoValue;
}

bool Emitter::SingleOutput(NodeId n) const {
  int present = 0;
  for (ValueId v : g_.node(n).outputs) present += v != kNoValue;
  return present == 1 && g_.node(n).outputs[0] != kNoValue;
}

std::vector<ElementwiseMember> Emitter::GroupOf(const std::vector<NodeId>& members) const {
  std::vector<ElementwiseMember> group;
  for (NodeId m : members) {
    const LoweredNode& l = lowered_.at(m);
    group.push_back({m, l.element_slots, l.element_fn});
  }
  return group;
}

// Fusion decisions. An elementwise node whose output (not returned) is read only by elementwise
// nodes of the same output shape that all belong to one group is absorbed into that group; a
// node nothing absorbs roots a group. A group's input produced by a single-output kernel
// (matmul, conv, reduction, ...) that nothing else reads becomes that kernel's epilogue.
void Emitter::Fuse(bool enable) {
  FusionState fs;
  fs.graph_outputs.insert(g_.outputs().begin(), g_.outputs().end());
  for (const Unit& u : units_) {
    if (u.region < 0) fs.live_nodes.insert(u.node);
  }
  if (enable) DecideChains(fs);
  FuseChains(fs);
  if (enable) FuseEpilogues(fs);
  BuildItems(fs);
}

// Consumers are decided first (reverse unit order), so a value read by several nodes of one
// group (the x of x * erf(x / sqrt 2)) joins that group.
void Emitter::DecideChains(FusionState& fs) const {
  for (auto u = units_.rbegin(); u != units_.rend(); ++u) {
    if (u->region >= 0 || !Elementwise(u->node) || !SingleOutput(u->node)) continue;
    ValueId o = g_.node(u->node).outputs[0];
    const std::vector<NodeId>& users = g_.Users(o);
    if (fs.graph_outputs.count(o) || users.empty()) continue;
    std::optional<NodeId> root;
    bool joins = true;
    for (NodeId c : users) {
      if (!fs.live_nodes.count(c) || !Elementwise(c) ||
          *g_.value(g_.node(c).outputs[0]).shape != *g_.value(o).shape) {
        joins = false;
        break;
      }
      NodeId r = fs.RootOf(c);
      if (root && *root != r) {
        joins = false;
        break;
      }
      root = r;
    }
    if (joins) fs.consumer_of[u->node] = users[0];
  }
}

// One kernel per group of chained elementwise nodes (a group FuseElementwise declines is
// emitted unfused).
void Emitter::FuseChains(FusionState& fs) {
  for (const Unit& u : units_) {
    if (u.region < 0 && fs.consumer_of.count(u.node)) {
      fs.members_of[fs.RootOf(u.node)].push_back(u.node);
    }
  }
  for (auto& [root, members] : fs.members_of) {
    members.push_back(root);
    StatusOr<FusedKernel> fk = FuseElementwise(g_, GroupOf(members));
    if (!fk.ok()) continue;
    fs.fused_at[root] = static_cast<int>(fused_.size());
    fused_.push_back(std::move(*fk));
    for (NodeId m : members) {
      if (m != root) fs.absorbed.insert(m);
    }
  }
}

// Epilogues: groups (or single elementwise nodes) reading a kernel output nobody else reads.
void Emitter::FuseEpilogues(FusionState& fs) {
  for (const Unit& u : units_) {
    if (u.region >= 0 || fs.absorbed.count(u.node) || !Elementwise(u.node)) continue;
    FuseEpilogueOf(u.node, fs);
  }
}

// The node producing `v` when its kernel may take the group `members` as its epilogue: a live,
// unfused, single-output, non-elementwise kernel whose output only the group reads.
std::optional<NodeId> Emitter::EpilogueAnchor(ValueId v, const std::set<NodeId>& members,
                                              const FusionState& fs) const {
  const Value& val = g_.value(v);
  if (val.kind != ValueKind::kNodeOutput || val.data || val.producer == kNoNode) return {};
  NodeId a = val.producer;
  if (!fs.live_nodes.count(a) || fs.absorbed.count(a) || fs.fused_at.count(a) || need_sf_[a] ||
      !SingleOutput(a) || fs.graph_outputs.count(v)) {
    return {};
  }
  auto it = lowered_.find(a);
  if (it == lowered_.end() || !it->second.kernel || it->second.element_fn) return {};
  for (NodeId user : g_.Users(v)) {
    if (!members.count(user)) return {};
  }
  return a;
}

// Fuses the group rooted at `root` into the first anchor (in member and slot order) that
// accepts it; true when one did.
bool Emitter::FuseEpilogueOf(NodeId root, FusionState& fs) {
  std::vector<NodeId> members =
      fs.members_of.count(root) ? fs.members_of[root] : std::vector<NodeId>{root};
  std::set<NodeId> member_set(members.begin(), members.end());
  std::vector<ElementwiseMember> group = GroupOf(members);
  for (const ElementwiseMember& m : group) {
    for (int slot : m.slots) {
      ValueId v = g_.node(m.node).inputs[slot];
      std::optional<NodeId> a = EpilogueAnchor(v, member_set, fs);
      if (!a) continue;
      std::optional<FusedKernel> fk =
          FuseEpilogue(g_, *lowered_.at(*a).kernel, Present(g_.node(*a).inputs), v, group);
      if (!fk) continue;
      if (fs.fused_at.count(root)) {
        fused_[fs.fused_at[root]] = std::move(*fk);
      } else {
        fs.fused_at[root] = static_cast<int>(fused_.size());
        fused_.push_back(std::move(*fk));
      }
      for (NodeId mm : members) {
        if (mm != root) fs.absorbed.insert(mm);
      }
      fs.absorbed.insert(*a);
      return true;
    }
  }
  return false;
}

// Items in unit order: regions, fused kernels (at their root), and the nodes nothing absorbed.
void Emitter::BuildItems(const FusionState& fs) {
  for (const Unit& u : units_) {
    Item item;
    if (u.region >= 0) {
      item.region = u.region;
      item.ins = UnitInputs(u);
      item.outs = UnitOutputs(u);
    } else if (fs.absorbed.count(u.node)) {
      continue;
    } else if (fs.fused_at.count(u.node)) {
      item.node = u.node;
      item.fused = fs.fused_at.at(u.node);
      item.ins = fused_[item.fused].inputs;
      item.outs = {fused_[item.fused].output};
    } else {
      item.node = u.node;
      item.ins = UnitInputs(u);
      for (ValueId v : g_.node(u.node).implicit_inputs) item.ins.push_back(v);
      item.outs = UnitOutputs(u);
    }
    items_.push_back(std::move(item));
  }
  st_.fused_kernels = static_cast<int>(fused_.size());
  st_.fused_nodes = static_cast<int>(fs.absorbed.size());
}

}  // namespace kiln::compiler::emit_internal
