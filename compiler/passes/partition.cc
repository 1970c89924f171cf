// Composite matching, annotation and convex greedy region merging.
#include "compiler/passes/partition.h"

#include <algorithm>
#include <map>
#include <set>

namespace kiln::compiler {

struct Pattern::Rep {
  bool any = false;
  std::vector<std::string> ops;
  std::vector<Pattern> inputs;
  bool commutative = false;
  bool optional = false;
  std::function<bool(const Graph&, NodeId)> predicate;
};

Pattern Pattern::Any() {
  auto r = std::make_shared<Rep>();
  r->any = true;
  return Pattern(std::move(r));
}

Pattern Pattern::Op(std::vector<std::string> ops, std::vector<Pattern> inputs) {
  auto r = std::make_shared<Rep>();
  r->ops = std::move(ops);
  r->inputs = std::move(inputs);
  return Pattern(std::move(r));
}

Pattern Pattern::Commutative() const {
  auto r = std::make_shared<Rep>(*rep_);
  r->commutative = true;
  return Pattern(std::move(r));
}

Pattern Pattern::Optional() const {
  auto r = std::make_shared<Rep>(*rep_);
  r->optional = true;
  return Pattern(std::move(r));
}

Pattern Pattern::Where(std::function<bool(const Graph&, NodeId)> predicate) const {
  auto r = std::make_shared<Rep>(*rep_);
  r->predicate = std::move(predicate);
  return Pattern(std::move(r));
}

bool Pattern::MatchValue(const Graph& g, ValueId v, std::vector<NodeId>* matched) const {
  if (rep_->any) return true;
  if (v == kNoValue) return false;
  const Value& val = g.value(v);
  if (val.kind == ValueKind::kNodeOutput && val.producer != kNoNode &&
      MatchNode(g, val.producer, matched)) {
    return true;
  }
  if (rep_->optional) return rep_->inputs.empty() || rep_->inputs[0].MatchValue(g, v, matched);
  return false;
}

bool Pattern::MatchNode(const Graph& g, NodeId n, std::vector<NodeId>* matched) const {
  if (rep_->any) return true;
  const Node& node = g.node(n);
  if (!node.domain.empty() && node.domain != "ai.onnx") return false;
  if (std::find(rep_->ops.begin(), rep_->ops.end(), node.op_type) == rep_->ops.end()) return false;
  if (rep_->predicate && !rep_->predicate(g, n)) return false;
  const size_t k = rep_->inputs.size();
  std::vector<std::vector<size_t>> orders = {{}};
  for (size_t i = 0; i < k; ++i) orders[0].push_back(i);
  if (rep_->commutative && k >= 2) {
    orders.push_back(orders[0]);
    std::swap(orders[1][0], orders[1][1]);
  }
  for (const std::vector<size_t>& order : orders) {
    size_t mark = matched->size();
    matched->push_back(n);
    bool ok = true;
    for (size_t i = 0; i < k && ok; ++i) {
      size_t slot = order[i];
      ValueId in = slot < node.inputs.size() ? node.inputs[slot] : kNoValue;
      ok = rep_->inputs[i].rep_->any ? true : rep_->inputs[i].MatchValue(g, in, matched);
    }
    if (ok) return true;
    matched->resize(mark);
  }
  return false;
}

bool Pattern::Match(const Graph& graph, NodeId node, std::vector<NodeId>* matched) const {
  size_t mark = matched->size();
  if (!MatchNode(graph, node, matched)) return false;
  std::set<NodeId> consumed(matched->begin() + mark, matched->end());
  std::set<ValueId> outputs(graph.outputs().begin(), graph.outputs().end());
  for (size_t i = mark + 1; i < matched->size(); ++i) {
    for (ValueId out : graph.node((*matched)[i]).outputs) {
      if (out == kNoValue) continue;
      bool escapes = outputs.count(out) > 0;
      for (NodeId user : graph.Users(out)) escapes |= consumed.count(user) == 0;
      if (escapes) {
        matched->resize(mark);
        return false;
      }
    }
  }
  // A node matched twice (a diagram with shared inputs) is listed once.
  std::vector<NodeId> unique;
  for (size_t i = mark; i < matched->size(); ++i) {
    if (std::find(unique.begin(), unique.end(), (*matched)[i]) == unique.end()) {
      unique.push_back((*matched)[i]);
    }
  }
  matched->resize(mark);
  matched->insert(matched->end(), unique.begin(), unique.end());
  return true;
}

namespace {

// A set of nodes as a bitset.
class NodeSet {
 public:
  explicit NodeSet(int n = 0) : bits_((n + 63) / 64, 0) {}
  void Add(int i) { bits_[i / 64] |= uint64_t{1} << (i % 64); }
  bool Has(int i) const { return (bits_[i / 64] >> (i % 64)) & 1; }
  void Union(const NodeSet& o) {
    for (size_t i = 0; i < bits_.size(); ++i) bits_[i] |= o.bits_[i];
  }
  bool Intersects(const NodeSet& o) const {
    for (size_t i = 0; i < bits_.size(); ++i) {
      if (bits_[i] & o.bits_[i]) return true;
    }
    return false;
  }

 private:
  std::vector<uint64_t> bits_;
};

std::vector<NodeId> Producers(const Graph& g, NodeId n) {
  std::vector<NodeId> out;
  const Node& node = g.node(n);
  auto add = [&](ValueId v) {
    if (v == kNoValue) return;
    const Value& val = g.value(v);
    // A folded value is a constant: the nodes that computed it (e.g. a Slice's end from
    // Shape(x) of a region's value) are no dependency, and counting them closed false cycles.
    if (val.data != nullptr) return;
    if (val.kind == ValueKind::kNodeOutput && val.producer != kNoNode) out.push_back(val.producer);
  };
  for (ValueId v : node.inputs) add(v);
  for (ValueId v : node.implicit_inputs) add(v);
  return out;
}

}  // namespace

StatusOr<std::vector<PartitionedRegion>> PartitionGraph(const Graph& g, const VendorRules& rules) {
  ASSIGN_OR_RETURN(std::vector<NodeId> order, g.TopologicalOrder());
  const int n = g.num_nodes();
  std::vector<int> pos(n, -1);
  for (size_t i = 0; i < order.size(); ++i) pos[order[i]] = static_cast<int>(i);
  // Ancestors of every node.
  std::vector<NodeSet> anc(n, NodeSet(n));
  for (NodeId m : order) {
    for (NodeId p : Producers(g, m)) {
      anc[m].Union(anc[p]);
      anc[m].Add(p);
    }
  }
  auto claimable = [&](NodeId m) {
    const Node& node = g.node(m);
    return node.op_type != "If" && node.op_type != "Loop" && node.op_type != "Scan";
  };
  // 1. Composites (consumers first, so the largest pattern rooted at a consumer wins), then
  //    2. single supported nodes. unit[m]: the annotation unit m belongs to.
  std::vector<int> unit(n, -1);
  std::vector<std::vector<NodeId>> units;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    NodeId m = *it;
    if (unit[m] >= 0 || !claimable(m)) continue;
    for (const CompositePattern& c : rules.composites) {
      std::vector<NodeId> matched;
      if (!c.pattern.Match(g, m, &matched)) continue;
      bool free = true;
      for (NodeId x : matched) free &= unit[x] < 0 && claimable(x);
      if (!free) continue;
      for (NodeId x : matched) unit[x] = static_cast<int>(units.size());
      units.push_back(matched);
      break;
    }
  }
  for (NodeId m : order) {
    if (unit[m] >= 0 || !claimable(m) || !rules.supported || !rules.supported(g, m)) continue;
    unit[m] = static_cast<int>(units.size());
    units.push_back({m});
  }
  // 3. Greedy convex merging in topological order.
  auto convex = [&](const NodeSet& s, const std::vector<NodeId>& members) {
    for (NodeId m : members) {
      for (NodeId p : Producers(g, m)) {
        if (!s.Has(p) && anc[p].Intersects(s)) return false;
      }
    }
    return true;
  };
  std::vector<int> region_of(n, -1);
  std::vector<std::vector<NodeId>> regions;
  std::vector<NodeSet> region_set;
  std::vector<bool> unit_done(units.size(), false);
  for (NodeId m : order) {
    int u = unit[m];
    if (u < 0 || unit_done[u]) continue;
    unit_done[u] = true;
    const std::vector<NodeId>& members = units[u];
    NodeSet own(n);
    for (NodeId x : members) own.Add(x);
    std::vector<int> candidates;
    for (NodeId x : members) {
      for (NodeId p : Producers(g, x)) {
        int r = region_of[p];
        if (r >= 0 && std::find(candidates.begin(), candidates.end(), r) == candidates.end()) {
          candidates.push_back(r);
        }
      }
    }
    auto try_merge = [&](const std::vector<int>& rs) {
      NodeSet s = own;
      std::vector<NodeId> all = members;
      for (int r : rs) {
        s.Union(region_set[r]);
        all.insert(all.end(), regions[r].begin(), regions[r].end());
      }
      if (!convex(s, all)) return false;
      int target = rs.empty() ? -1 : rs[0];
      if (target < 0) {
        target = static_cast<int>(regions.size());
        regions.emplace_back();
        region_set.emplace_back(n);
      }
      for (int r : rs) {
        if (r == target) continue;
        for (NodeId x : regions[r]) region_of[x] = target;
        regions[target].insert(regions[target].end(), regions[r].begin(), regions[r].end());
        regions[r].clear();
        region_set[r] = NodeSet(n);
      }
      for (NodeId x : members) region_of[x] = target;
      regions[target].insert(regions[target].end(), members.begin(), members.end());
      region_set[target] = s;
      return true;
    };
    bool merged = !candidates.empty() && try_merge(candidates);
    for (size_t i = 0; !merged && i < candidates.size(); ++i) merged = try_merge({candidates[i]});
    if (!merged && !try_merge({})) {
      // A composite that is not convex on its own is dropped (its nodes stay unclaimed).
      continue;
    }
  }
  // 4. Regions with an anchor op, as PartitionedRegion records.
  std::set<ValueId> graph_outputs(g.outputs().begin(), g.outputs().end());
  std::vector<PartitionedRegion> out;
  for (size_t r = 0; r < regions.size(); ++r) {
    std::vector<NodeId> nodes = regions[r];
    if (nodes.empty()) continue;
    if (!rules.anchor_ops.empty()) {
      bool anchored = false;
      for (NodeId x : nodes) {
        anchored |= std::find(rules.anchor_ops.begin(), rules.anchor_ops.end(),
                              g.node(x).op_type) != rules.anchor_ops.end();
      }
      if (!anchored) continue;
    }
    std::sort(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) { return pos[a] < pos[b]; });
    PartitionedRegion reg;
    reg.vendor = rules.vendor;
    reg.nodes = nodes;
    const NodeSet& s = region_set[r];
    for (NodeId x : nodes) {
      const Node& node = g.node(x);
      std::vector<ValueId> reads = node.inputs;
      reads.insert(reads.end(), node.implicit_inputs.begin(), node.implicit_inputs.end());
      for (ValueId v : reads) {
        if (v == kNoValue) continue;
        const Value& val = g.value(v);
        bool inside = val.kind == ValueKind::kNodeOutput && val.producer != kNoNode &&
                      s.Has(val.producer);
        bool constant = val.data != nullptr && val.kind != ValueKind::kGraphInput;
        if (inside || constant) continue;
        if (std::find(reg.inputs.begin(), reg.inputs.end(), v) == reg.inputs.end()) {
          reg.inputs.push_back(v);
        }
      }
      for (ValueId v : node.outputs) {
        if (v == kNoValue) continue;
        bool escapes = graph_outputs.count(v) > 0;
        for (NodeId user : g.Users(v)) escapes |= !s.Has(user);
        if (escapes) reg.outputs.push_back(v);
      }
    }
    out.push_back(std::move(reg));
  }
  std::sort(out.begin(), out.end(), [&](const PartitionedRegion& a, const PartitionedRegion& b) {
    return pos[a.nodes[0]] < pos[b.nodes[0]];
  });
  return out;
}

}  // namespace kiln::compiler
