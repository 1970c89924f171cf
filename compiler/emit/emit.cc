// Emission's driver: EmitExecutable and the order of one function's steps (Emitter::Run).
// See emit.h for the shape of the emitted program and emitter.h for where each step lives.
#include "compiler/emit/emit.h"

#include <algorithm>

#include "compiler/emit/emitter.h"

namespace kiln::compiler {
namespace emit_internal {

ValueSpec SpecOf(const Value& v) {
  ValueSpec spec;
  spec.name = v.name;
  spec.dtype = v.dtype;
  for (const DimExpr& d : *v.shape) {
    DimSpec ds;
    if (d.is_const()) {
      ds.value = d.const_value();
    } else if (d.is_symbol()) {
      ds.symbol = d.symbol_name();
    }
    spec.shape.push_back(ds);
  }
  return spec;
}

namespace {

// A graph input no node reads — such as CastLike's `like` once Simplify made the CastLike a
// Cast — and no output returns: the function never reads its dims or elements, so Invoke need
// not hold the caller to the declared shape (the ONNX node tests feed `like` as a [1] tensor
// against a declared [3, 4]). Only for fixed dims, so that no symbol is bound from a tensor
// whose shape is not checked.
bool OnlyItsDTypeIsRead(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (val.kind != ValueKind::kGraphInput || !g.Users(v).empty() || !val.shape) return false;
  for (const DimExpr& d : *val.shape) {
    if (!d.is_const()) return false;
  }
  return std::find(g.outputs().begin(), g.outputs().end(), v) == g.outputs().end();
}

// A capture nothing in the subgraph reads any more (weight packing pointed its products at a
// packed copy) and whose dims are constant (so it binds no symbol): not passed at all.
bool UnreadCapture(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (!g.Users(v).empty() || !val.shape) return false;
  for (const DimExpr& d : *val.shape) {
    if (!d.is_const()) return false;
  }
  return std::find(g.outputs().begin(), g.outputs().end(), v) == g.outputs().end();
}

}  // namespace

std::string Shared::UniqueFunctionName(const std::string& parent, const Node& node, NodeId id,
                                       const std::string& role) {
  // Node names are unique within one graph only (the importer names unnamed nodes
  // "<OpType>_<index>" per graph), so two branches may both hold an "If_0".
  const std::string own =
      (node.name.empty() ? node.op_type + "_" + std::to_string(id) : node.name) + "/" + role;
  std::string name = function_names.count(own) ? parent + "/" + own : own;
  const std::string stem = name;
  for (int k = 2; function_names.count(name); ++k) name = stem + "#" + std::to_string(k);
  function_names.insert(name);
  return name;
}

Emitter::Emitter(Shared& sh, const Graph& g, const std::string& name, bool main)
    : sh_(sh),
      g_(g),
      name_(name),
      opts_(sh.opts),
      table_(sh.table),
      eb_(sh.eb),
      fb_(sh.eb.AddFunction(name)),
      vals_(g.num_values()),
      regions_(main ? sh.opts.regions : NoRegions()),
      kernels_(sh.kernels),
      shape_funcs_(sh.shape_funcs),
      const_shapes_(sh.const_shapes),
      st_(sh.st) {
  sh.function_names.insert(name);
}

// Parameters first: registers 0..n-1 — the formal inputs, then (subgraphs) the captures it
// reads. Their dims bind the symbols they carry; then the results' signature.
Status Emitter::BindParams() {
  std::vector<ValueId> params(g_.inputs().begin(), g_.inputs().end());
  for (ValueId v = 0; v < g_.num_values(); ++v) {
    if (g_.value(v).kind == ValueKind::kCapture && !UnreadCapture(g_, v)) {
      params.push_back(v);
      captures_.push_back(g_.value(v).name);
    }
  }
  for (ValueId v : params) {
    const Value& val = g_.value(v);
    if (!val.shape) return Internal("graph input '" + val.name + "' has no shape");
    ValueSpec spec = SpecOf(val);
    spec.dtype_only = parent_ == nullptr && OnlyItsDTypeIsRead(g_, v);
    int r = fb_.AddParam(spec);
    vals_[v].reg = r;
    next_reg_ = std::max(next_reg_, r + 1);
    BindSymbols(val, r);
  }
  num_params_ = static_cast<int>(params.size());
  if (parent_) BindParentSymbols();
  for (ValueId v : g_.outputs()) {
    const Value& val = g_.value(v);
    if (!val.shape) return Internal("graph output '" + val.name + "' has no shape");
    fb_.AddResult(SpecOf(val));
  }
  return Status::Ok();
}

// Symbols this subgraph's shapes use that its parameters do not carry bare: when the parent
// reads one from a parameter of its own (never dropped), that tensor is passed too, after the
// captures, and read the same way here.
void Emitter::BindParentSymbols() {
  std::set<std::string> used;
  for (ValueId v = 0; v < g_.num_values(); ++v) {
    if (g_.value(v).shape) {
      for (const DimExpr& d : *g_.value(v).shape) d.CollectSymbols(&used);
    }
  }
  for (const std::string& s : used) {
    auto it = parent_->bound_.find(s);
    if (bound_.count(s) || it == parent_->bound_.end() || it->second.reg >= parent_->num_params_)
      continue;
    SymbolSource src = it->second;
    ValueSpec spec;
    spec.name = "kiln.symbol." + s;
    spec.dtype = src.dtype;
    spec.shape.resize(src.dim ? src.rank : 1);
    int r = fb_.AddParam(spec);
    next_reg_ = std::max(next_reg_, r + 1);
    num_params_ = std::max(num_params_, r + 1);  // a parameter too: nested subgraphs may read it
    symbol_sources_.push_back(src.reg);
    src.reg = r;
    bound_[s] = src;
  }
}

// Items in order; registers of values are dropped after their last use.
Status Emitter::EmitItems() {
  std::map<int, std::vector<ValueId>> kill_at = KillSchedule();
  for (size_t pos = 0; pos < items_.size(); ++pos) {
    const Item& item = items_[pos];
    RETURN_IF_ERROR(item.region >= 0  ? EmitRegion(item.region)
                    : item.fused >= 0 ? EmitFused(item)
                                      : EmitNode(item.node));
    for (ValueId v : kill_at[static_cast<int>(pos)]) {
      if (vals_[v].reg >= 0) fb_.KillRegister(vals_[v].reg);
    }
  }
  return Status::Ok();
}

Status Emitter::EmitReturn() {
  fb_.SetSourceNode("");
  std::vector<int> results;
  for (ValueId v : g_.outputs()) {
    ASSIGN_OR_RETURN(int r, RegFor(v));
    results.push_back(r);
  }
  fb_.Ret(results);
  st_.instructions += fb_.pc();
  return Status::Ok();
}

void Emitter::Abandon(const std::string& message) {
  fb_.Clear();
  fb_.Fatal(eb_.AddString(message));
}

Status Emitter::Run() {
  RETURN_IF_ERROR(BindParams());
  RETURN_IF_ERROR(Plan());
  RETURN_IF_ERROR(Prepare());
  Fuse(opts_.fuse);
  RETURN_IF_ERROR(Liveness());
  RETURN_IF_ERROR(PlanArena());
  RETURN_IF_ERROR(EmitItems());
  return EmitReturn();
}

}  // namespace emit_internal

StatusOr<std::vector<uint8_t>> EmitExecutable(const Graph& graph, const EmitOptions& options,
                                              EmitStats* stats) {
  using emit_internal::SpecOf;
  if (options.table == nullptr) return InvalidArgument("EmitOptions::table is required");
  emit_internal::Shared sh(options);
  emit_internal::Emitter main(sh, graph, "main", true);
  RETURN_IF_ERROR(main.Run());
  sh.st.main_kernels = static_cast<int>(sh.eb.kernels().size());
  sh.st.main_shape_functions = static_cast<int>(sh.eb.shape_functions().size());
  if (options.fallbacks) EmitFallbacks(sh, graph);
  MetadataDef md;
  for (ValueId v : graph.inputs()) md.inputs.push_back(SpecOf(graph.value(v)));
  for (ValueId v : graph.outputs()) md.outputs.push_back(SpecOf(graph.value(v)));
  md.entry = "main";
  md.opset = graph.OpsetFor("");
  md.producer_name = options.producer;
  md.doc = options.doc;
  sh.eb.SetMetadata(std::move(md));
  if (stats) *stats = sh.st;
  if (options.before_finish) RETURN_IF_ERROR(options.before_finish(sh.eb));
  return sh.eb.Finish();
}

}  // namespace kiln::compiler
