// Planning of one function: emission units (nodes and external regions), dead code, the order
// units are emitted in, value lifetimes, the static arena (first fit by lifetime) and when
// registers die.
#include <algorithm>
#include <climits>

#include "compiler/emit/emitter.h"

namespace kiln::compiler::emit_internal {

std::vector<ValueId> Emitter::UnitInputs(const Unit& u) const {
  return u.region >= 0 ? regions_[u.region].inputs : Present(g_.node(u.node).inputs);
}

std::vector<ValueId> Emitter::UnitOutputs(const Unit& u) const {
  return u.region >= 0 ? regions_[u.region].outputs : Present(g_.node(u.node).outputs);
}

// Units, liveness (dead-code elimination), emission order and last uses.
Status Emitter::Plan() {
  RETURN_IF_ERROR(BuildUnits());
  ASSIGN_OR_RETURN(std::vector<bool> unit_live, LiveUnits());
  return OrderUnits(unit_live);
}

// One unit per region (its nodes map to it), then one per node outside every region in
// topological order.
Status Emitter::BuildUnits() {
  ASSIGN_OR_RETURN(order_, g_.TopologicalOrder());
  topo_pos_.assign(g_.num_nodes(), 0);
  for (size_t i = 0; i < order_.size(); ++i) topo_pos_[order_[i]] = static_cast<int>(i);
  region_of_node_.assign(g_.num_nodes(), -1);
  for (size_t r = 0; r < regions_.size(); ++r) {
    for (NodeId n : regions_[r].nodes) {
      if (n < 0 || n >= g_.num_nodes() || region_of_node_[n] >= 0) {
        return InvalidArgument("external region '" + regions_[r].name +
                               "' lists a node that is out of range or in another region");
      }
      region_of_node_[n] = static_cast<int>(r);
    }
  }
  unit_of_node_.assign(g_.num_nodes(), -1);
  for (size_t r = 0; r < regions_.size(); ++r) {
    for (NodeId n : regions_[r].nodes) unit_of_node_[n] = static_cast<int>(all_units_.size());
    all_units_.push_back({static_cast<int>(r), kNoNode});
  }
  for (NodeId n : order_) {
    if (region_of_node_[n] >= 0) continue;
    unit_of_node_[n] = static_cast<int>(all_units_.size());
    all_units_.push_back({-1, n});
  }
  return Status::Ok();
}

// The unit computing `v` at run time; -1 for inputs, captures and folded constants.
int Emitter::ProducerUnit(ValueId v) const {
  const Value& val = g_.value(v);
  if (val.kind != ValueKind::kNodeOutput || val.data || val.producer == kNoNode) return -1;
  return unit_of_node_[val.producer];
}

// Live units: backwards from the graph outputs. A node whose outputs are all folded constants
// needs not run.
StatusOr<std::vector<bool>> Emitter::LiveUnits() {
  std::vector<bool> unit_live(all_units_.size(), false);
  std::vector<ValueId> work(g_.outputs().begin(), g_.outputs().end());
  std::vector<bool> seen(g_.num_values(), false);
  while (!work.empty()) {
    ValueId v = work.back();
    work.pop_back();
    if (seen[v]) continue;
    seen[v] = true;
    int u = ProducerUnit(v);
    if (u < 0 || unit_live[u]) continue;
    unit_live[u] = true;
    const Unit& unit = all_units_[u];
    if (unit.region < 0) {
      const Node& node = g_.node(unit.node);
      if (node.op_type == "Scan") {
        return Unsupported(g_.DescribeNode(unit.node) + ": Scan is not supported (use Loop)");
      }
    } else {
      const ExternalRegionToEmit& r = regions_[unit.region];
      if (std::find(r.outputs.begin(), r.outputs.end(), v) == r.outputs.end()) {
        return InvalidArgument("external region '" + r.name + "' produces '" + g_.value(v).name +
                               "', which is read outside it, but does not list it as an output");
      }
    }
    for (ValueId in : UnitInputs(unit)) work.push_back(in);
    if (unit.region < 0) {
      for (ValueId in : g_.node(unit.node).implicit_inputs) work.push_back(in);
    }
  }
  return unit_live;
}

// A region's internal nodes may read values produced outside that are not listed as inputs
// only if they are constants; anything else is a codegen or partition bug.
Status Emitter::CheckRegionReads(int u, const std::vector<ValueId>& reads) const {
  const ExternalRegionToEmit& region = regions_[all_units_[u].region];
  for (NodeId n : region.nodes) {
    for (ValueId v : g_.node(n).inputs) {
      if (v == kNoValue) continue;
      int p = ProducerUnit(v);
      const Value& val = g_.value(v);
      bool constant = val.data && val.kind != ValueKind::kGraphInput;
      if (p != u && !constant && std::find(reads.begin(), reads.end(), v) == reads.end()) {
        return InvalidArgument("external region '" + region.name + "' reads '" + val.name +
                               "' without listing it as an input");
      }
    }
  }
  return Status::Ok();
}

// Emission order: Kahn over live units, earliest first node first (regions are convex, so the
// contracted graph is acyclic).
Status Emitter::OrderUnits(const std::vector<bool>& unit_live) {
  std::vector<int> min_pos(all_units_.size(), INT_MAX);
  for (NodeId n : order_) {
    min_pos[unit_of_node_[n]] = std::min(min_pos[unit_of_node_[n]], topo_pos_[n]);
  }
  std::vector<std::set<int>> succ(all_units_.size());
  std::vector<int> indeg(all_units_.size(), 0);
  for (size_t u = 0; u < all_units_.size(); ++u) {
    if (!unit_live[u]) continue;
    std::vector<ValueId> reads = UnitInputs(all_units_[u]);
    if (all_units_[u].region < 0) {
      const Node& node = g_.node(all_units_[u].node);
      reads.insert(reads.end(), node.implicit_inputs.begin(), node.implicit_inputs.end());
    } else {
      RETURN_IF_ERROR(CheckRegionReads(static_cast<int>(u), reads));
    }
    for (ValueId v : reads) {
      int p = ProducerUnit(v);
      if (p >= 0 && p != static_cast<int>(u) && succ[p].insert(static_cast<int>(u)).second) {
        ++indeg[u];
      }
    }
  }
  std::set<std::pair<int, int>> ready;  // (min_pos, unit)
  for (size_t u = 0; u < all_units_.size(); ++u) {
    if (unit_live[u] && indeg[u] == 0) ready.insert({min_pos[u], static_cast<int>(u)});
  }
  while (!ready.empty()) {
    int u = ready.begin()->second;
    ready.erase(ready.begin());
    units_.push_back(all_units_[u]);
    for (int w : succ[u]) {
      if (--indeg[w] == 0) ready.insert({min_pos[w], w});
    }
  }
  int live_units = 0;
  for (bool l : unit_live) live_units += l;
  if (static_cast<int>(units_.size()) != live_units) {
    return InvalidArgument("external regions make the program cyclic (a region is not convex)");
  }
  return Status::Ok();
}

// Where each value is defined and last read (by item position); which values are dynamic;
// which are allocated by a callee (If/Loop results).
Status Emitter::Liveness() {
  for (size_t pos = 0; pos < items_.size(); ++pos) {
    const Item& item = items_[pos];
    if (item.region < 0 && item.fused < 0 && IsControlFlow(g_.node(item.node))) {
      callee_allocated_.insert(item.outs.begin(), item.outs.end());
    }
    for (ValueId in : item.ins) {
      vals_[in].last_use = std::max(vals_[in].last_use, static_cast<int>(pos));
    }
    for (ValueId out : item.outs) {
      vals_[out].live = true;
      const Value& val = g_.value(out);
      if (!val.shape) return Internal("value '" + val.name + "' has no inferred shape");
      vals_[out].dynamic = !IsStatic(*val.shape);
      if (!vals_[out].dynamic) RETURN_IF_ERROR(CheckStaticBytes(val, kAlign));
      vals_[out].def = static_cast<int>(pos);
      if (vals_[out].last_use < 0) vals_[out].last_use = static_cast<int>(pos);
    }
  }
  for (ValueId v : g_.outputs()) vals_[v].last_use = INT_MAX;
  return Status::Ok();
}

namespace {

struct Block {
  ValueId v;
  int64_t size;
  int begin, end;
};

// Lowest offset where `b` overlaps no placed block alive at the same time.
int64_t FirstFit(const Block& b, const std::vector<Block>& placed,
                 const std::vector<ValueState>& vals) {
  std::vector<std::pair<int64_t, int64_t>> busy;
  for (const Block& p : placed) {
    if (p.begin <= b.end && b.begin <= p.end) {
      busy.emplace_back(vals[p.v].arena_offset, vals[p.v].arena_offset + p.size);
    }
  }
  std::sort(busy.begin(), busy.end());
  int64_t offset = 0;
  for (const auto& [lo, hi] : busy) {
    if (offset + b.size <= lo) break;
    offset = std::max(offset, hi);
  }
  return offset;
}

}  // namespace

// Arena: static intermediates that are not graph outputs, first fit by lifetime, largest first.
// Values that may be viewed (inputs of view ops) are kept out of it: the view's lifetime is not
// tracked. Emits the arena's one alloc_storage when anything is placed. InvalidArgument when
// the blocks together could pass int64 (no offset the file holds could place them).
Status Emitter::PlanArena() {
  std::set<ValueId> viewed;
  for (const Item& item : items_) {
    if (item.region >= 0 || item.fused >= 0 || !lowered_.count(item.node)) continue;
    const LoweredNode& l = lowered_.at(item.node);
    if (l.view_of >= 0) viewed.insert(g_.node(item.node).inputs[l.view_of]);
  }
  std::vector<Block> blocks;
  for (const Item& item : items_) {
    for (ValueId out : item.outs) {
      const ValueState& s = vals_[out];
      if (s.dynamic || s.last_use == INT_MAX || viewed.count(out) || callee_allocated_.count(out)) {
        continue;
      }
      blocks.push_back({out, AlignUp(std::max<int64_t>(StaticBytes(g_.value(out)), 1), kAlign),
                        s.def, s.last_use});
    }
  }
  int64_t total = 0;  // every offset FirstFit returns is at most this sum
  for (const Block& b : blocks) {
    if (__builtin_add_overflow(total, b.size, &total)) {
      return InvalidArgument("the static intermediates need more than 2^63 - 1 bytes together "
                             "(value '" + g_.value(b.v).name + "' passes the limit)");
    }
  }
  std::stable_sort(blocks.begin(), blocks.end(),
                   [](const Block& a, const Block& b) { return a.size > b.size; });
  std::vector<Block> placed;
  for (const Block& b : blocks) {
    int64_t offset = FirstFit(b, placed, vals_);
    vals_[b.v].arena_offset = offset;
    arena_bytes_ = std::max(arena_bytes_, offset + b.size);
    placed.push_back(b);
  }
  st_.planned_bytes = arena_bytes_;
  if (arena_bytes_ > 0) {
    fb_.SetSourceNode("");
    arena_reg_ = ScratchStorage(arena_bytes_);
  }
  return Status::Ok();
}

// Item position -> the node outputs whose last read it is (graph outputs never die).
std::map<int, std::vector<ValueId>> Emitter::KillSchedule() const {
  std::map<int, std::vector<ValueId>> kill_at;
  for (ValueId v = 0; v < g_.num_values(); ++v) {
    const ValueState& s = vals_[v];
    if (s.live && s.def >= 0 && s.last_use >= 0 && s.last_use != INT_MAX &&
        g_.value(v).kind == ValueKind::kNodeOutput) {
      kill_at[s.last_use].push_back(v);
    }
  }
  return kill_at;
}

}  // namespace kiln::compiler::emit_internal
