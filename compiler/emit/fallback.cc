// Fallback functions: for every external region, a VM function of JIT kernels that computes
// what the region computes (its nodes lowered as `--external=none` would lower them), which the
// VM runs in place of the region when its vendor declines it at load or is not registered.
#include <algorithm>
#include <map>

#include "compiler/emit/emitter.h"

namespace kiln::compiler::emit_internal {
namespace {

// Dim expressions of the region's inputs -> the fresh symbols that stand for them.
using Renaming = std::map<DimExpr, DimExpr>;

// `e` with every subexpression `renamed` holds replaced by its symbol.
DimExpr Rename(const DimExpr& e, const Renaming& renamed) {
  if (e.is_const() || e.is_symbol() || renamed.empty()) return e;
  if (auto it = renamed.find(e); it != renamed.end()) return it->second;
  const std::vector<DimExpr>& ops = e.operands();
  switch (e.kind()) {
    case DimExpr::Kind::kSum: {
      DimExpr r = e.sum_constant();
      for (size_t i = 0; i < ops.size(); ++i) r += Rename(ops[i], renamed) * e.sum_coeffs()[i];
      return r;
    }
    case DimExpr::Kind::kProduct: {
      DimExpr r = 1;
      for (const DimExpr& op : ops) r *= Rename(op, renamed);
      return r;
    }
    case DimExpr::Kind::kFloorDiv:
      return FloorDiv(Rename(ops[0], renamed), Rename(ops[1], renamed));
    case DimExpr::Kind::kMod:
      return Mod(Rename(ops[0], renamed), Rename(ops[1], renamed));
    case DimExpr::Kind::kMin:
      return Min(Rename(ops[0], renamed), Rename(ops[1], renamed));
    case DimExpr::Kind::kMax:
      return Max(Rename(ops[0], renamed), Rename(ops[1], renamed));
    default:
      return e;
  }
}

// A fresh symbol for every dim of the region's inputs that is an expression no tensor dim
// binds (the emitter binds `s` and `s + k` only): after a strided conv of a dynamic image an
// input is [batch, 72, floordiv(height + 1, 2), ...], and `height` itself reaches no region
// input, so without a symbol of their own none of the region's shapes could be computed
// (lraspp_mobilenet_v3_large's regions had no fallback).
Renaming RenameInputDims(const Graph& g, const std::vector<ValueId>& inputs) {
  Renaming renamed;
  for (ValueId v : inputs) {
    if (!g.value(v).shape) continue;
    for (const DimExpr& d : *g.value(v).shape) {
      bool bindable = d.is_const() || d.is_symbol() ||
                      (d.kind() == DimExpr::Kind::kSum && d.operands().size() == 1 &&
                       d.sum_coeffs()[0] == 1 && d.operands()[0].is_symbol());
      if (!bindable && !renamed.count(d)) renamed.emplace(d, g.shared_symbols()->Fresh());
    }
  }
  return renamed;
}

// Adds to `sub` a value like `v` of `g`, of `kind`, its dims renamed, and records the mapping.
StatusOr<ValueId> CopyValue(const Graph& g, ValueId v, ValueKind kind, Graph& sub,
                            std::map<ValueId, ValueId>& map, const Renaming& renamed) {
  const Value& from = g.value(v);
  ASSIGN_OR_RETURN(ValueId id, sub.AddValue(from.name, kind));
  Value& to = sub.mutable_value(id);
  to.dtype = from.dtype;
  to.shape = from.shape;
  to.symbolic_value = from.symbolic_value;
  for (auto* dims : {to.shape ? &*to.shape : nullptr,
                     to.symbolic_value ? &*to.symbolic_value : nullptr}) {
    if (!dims) continue;
    for (DimExpr& d : *dims) d = Rename(d, renamed);
  }
  // An input is computed at run time whatever shape inference folded; everything else keeps
  // its data (the same bytes, so the constant is stored once: Shared::constant_by_data).
  if (kind != ValueKind::kGraphInput) to.data = from.data;
  map[v] = id;
  return id;
}

// Input `in` of a region node: the mapped value, or a constant copied on first use. A value
// that is neither breaks the region's contract (its inputs list everything it reads).
StatusOr<ValueId> MapInput(const Graph& g, const ExternalRegionToEmit& r, ValueId in, Graph& sub,
                           std::map<ValueId, ValueId>& map, const Renaming& renamed) {
  if (in == kNoValue) return kNoValue;
  auto it = map.find(in);
  if (it != map.end()) return it->second;
  if (!g.value(in).data) {
    return Internal("region '" + r.name + "' reads '" + g.value(in).name +
                    "', which is neither one of its inputs, nor computed in it, nor a constant");
  }
  return CopyValue(g, in, ValueKind::kConstant, sub, map, renamed);
}

}  // namespace

// The region's nodes as a graph of their own: its inputs are the graph's inputs, its outputs
// the graph's outputs, the constants it reads shared by reference.
StatusOr<Graph> RegionGraph(const Graph& g, const std::vector<int>& topo_pos,
                            const ExternalRegionToEmit& r) {
  Graph sub;
  sub.set_name(r.name);
  sub.set_opset_imports(g.opset_imports());
  sub.set_shared_symbols(g.shared_symbols());
  std::map<ValueId, ValueId> map;
  const Renaming renamed = RenameInputDims(g, r.inputs);
  for (ValueId v : r.inputs) {
    ASSIGN_OR_RETURN(ValueId id, CopyValue(g, v, ValueKind::kGraphInput, sub, map, renamed));
    sub.AddInput(id);
  }
  std::vector<NodeId> nodes = r.nodes;
  std::sort(nodes.begin(), nodes.end(),
            [&](NodeId a, NodeId b) { return topo_pos[a] < topo_pos[b]; });
  for (NodeId n : nodes) {
    Node node = g.node(n);
    if (!node.implicit_inputs.empty()) {
      return Unsupported(g.DescribeNode(n) + " has subgraphs reading outer values");
    }
    for (ValueId& in : node.inputs) {
      ASSIGN_OR_RETURN(in, MapInput(g, r, in, sub, map, renamed));
    }
    for (ValueId& out : node.outputs) {
      if (out == kNoValue) continue;
      ASSIGN_OR_RETURN(out, CopyValue(g, out, ValueKind::kNodeOutput, sub, map, renamed));
    }
    RETURN_IF_ERROR(sub.AddNode(std::move(node)).status());
  }
  for (ValueId v : r.outputs) {
    auto it = map.find(v);
    if (it == map.end()) {
      return Internal("region '" + r.name + "' output '" + g.value(v).name +
                      "' is computed by none of its nodes");
    }
    sub.AddOutput(it->second);
  }
  return sub;
}

// One fallback function per emitted region, after "main" (whose constants they share). A
// region whose nodes cannot all run on the JIT gets none: it is reported in
// EmitStats::fallback_failures and needs its vendor at load.
void EmitFallbacks(Shared& sh, const Graph& g) {
  StatusOr<std::vector<NodeId>> order = g.TopologicalOrder();
  std::vector<int> topo_pos(g.num_nodes(), 0);
  if (order.ok()) {
    for (size_t i = 0; i < order->size(); ++i) topo_pos[(*order)[i]] = static_cast<int>(i);
  }
  for (size_t r = 0; r < sh.opts.regions.size(); ++r) {
    const ExternalRegionToEmit& region = sh.opts.regions[r];
    int index = r < sh.region_index.size() ? sh.region_index[r] : -1;
    if (index < 0) continue;  // not emitted (dead)
    const std::string where = "region '" + region.name + "' (" + region.vendor + ")";
    StatusOr<Graph> sub = order.ok() ? RegionGraph(g, topo_pos, region) : order.status();
    if (!sub.ok()) {
      sh.st.fallback_failures.push_back(where + ": " + sub.status().message());
      continue;
    }
    std::string name = region.name + "/fallback";
    for (int k = 2; sh.function_names.count(name); ++k) {
      name = region.name + "/fallback#" + std::to_string(k);
    }
    Emitter fallback(sh, *sub, name, false);
    fallback.ShareConstants();
    Status s = fallback.Run();
    if (!s.ok()) {
      // The function is in the builder already: leave a valid one nobody calls, saying why
      // (the loader quotes it when the region cannot run: Executable::NoFallbackReason).
      fallback.Abandon("no fallback function for " + where + ": " + s.message());
      sh.st.fallback_failures.push_back(where + ": " + s.message());
      continue;
    }
    sh.eb.SetRegionFallback(index, fallback.function_index());
    ++sh.st.fallback_functions;
  }
}

}  // namespace kiln::compiler::emit_internal
