// Emission: graph -> bytecode. See emit.h for the shape of the emitted program.
#include "compiler/emit/emit.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "compiler/lower/fusion.h"
#include "jit/kernel_ir_serialize.h"
#include "vm/builder.h"
#include "base/dtype.h"

namespace kiln::compiler {
namespace {

constexpr int64_t kAlign = 64;
// Largest tensor a shape function lets the program allocate; larger (or overflowing) sizes
// become -1, which alloc_storage rejects.
constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;

int64_t AlignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

bool IsControlFlow(const Node& n) {
  return (n.domain.empty() || n.domain == "ai.onnx") && (n.op_type == "If" || n.op_type == "Loop");
}

bool IsStatic(const SymbolicShape& s) {
  for (const DimExpr& d : s) {
    if (!d.is_const()) return false;
  }
  return true;
}

std::vector<int64_t> StaticDims(const SymbolicShape& s) {
  std::vector<int64_t> out;
  for (const DimExpr& d : s) out.push_back(d.const_value());
  return out;
}

int64_t StaticBytes(const Value& v) {
  int64_t n = 1;
  for (const DimExpr& d : *v.shape) n *= d.const_value();
  return n * static_cast<int64_t>(DTypeSize(v.dtype));
}

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

// Where a symbol's value comes from at run time.
struct SymbolSource {
  int reg = -1;       // a tensor register
  int index = 0;      // axis (dim source) or element (shape-tensor source)
  bool dim = true;    // true: DimOf(tensor, index); false: shape_tensor[index]
  DType dtype = DType::kI64;
  int rank = 1;
};

// Per-value emission state.
struct ValueState {
  int reg = -1;
  bool live = false;
  bool dynamic = false;   // a shape with non-constant dims
  int shape_reg = -1;     // dynamic: i64[rank] computed by a shape function
  int bytes_reg = -1;     // dynamic: i64[1] byte size
  int64_t arena_offset = -1;  // static intermediates placed in the arena
  int def = -1;           // position of the unit producing it
  int last_use = -1;      // position of the last unit reading it (INT_MAX: a graph output)
};

// What every function of one executable shares: the builder, the kernel and shape-function
// tables (identical kernels stored once across functions) and the statistics.
struct Shared {
  explicit Shared(const EmitOptions& o) : opts(o), table(*o.table), eb(o.producer) {}
  const EmitOptions& opts;
  const LoweringTable& table;
  ExecutableBuilder eb;
  std::map<uint64_t, std::vector<std::pair<jit::Kernel, int>>> kernels;
  std::map<uint64_t, std::vector<std::pair<jit::Kernel, int>>> shape_funcs;
  std::map<std::vector<int64_t>, int> const_shapes;  // i64 constant -> constant index
  std::map<int, std::vector<jit::Expr>> kernel_pre, shape_func_pre;  // by table index
  EmitStats st;
  int subgraphs = 0;
};

class Emitter {
 public:
  /// Emits `g` into a new function `name`. The main graph carries the external regions;
  /// subgraphs (If branches, Loop bodies) take their captured outer values as extra
  /// parameters after their formal inputs.
  Emitter(Shared& sh, const Graph& g, const std::string& name, bool main)
      : sh_(sh),
        g_(g),
        opts_(sh.opts),
        table_(sh.table),
        eb_(sh.eb),
        fb_(sh.eb.AddFunction(name)),
        vals_(g.num_values()),
        regions_(main ? sh.opts.regions : NoRegions()),
        kernels_(sh.kernels),
        shape_funcs_(sh.shape_funcs),
        const_shapes_(sh.const_shapes),
        st_(sh.st) {}

  /// Emits the whole function.
  Status Run();
  int function_index() const { return fb_.index(); }
  /// The captured outer values, by name, in parameter order (after the formal inputs).
  const std::vector<std::string>& captures() const { return captures_; }

 private:
  Status Plan();
  Status EmitNode(NodeId n);
  StatusOr<int> RegFor(ValueId v);
  int NewReg() { return next_reg_++; }
  int ConstI64Tensor(const std::vector<int64_t>& values);
  int ScratchStorage(int64_t bytes);
  Status EnsureShapes(const std::vector<ValueId>& need, NodeId at);
  bool SymbolsBound(const SymbolicShape& s) const;
  jit::Expr ToExpr(const DimExpr& d, const std::map<std::string, jit::Expr>& vars) const;
  /// Preconditions of a kernel whose buffers hold `values` (in order): every dim equals its
  /// symbolic value, symbols bound at their first bare occurrence; then the DimFacts of the
  /// nodes `computes` (those over symbols the buffers carry); then `extra`.
  std::vector<jit::Expr> Preconditions(const jit::Kernel& k, const std::vector<ValueId>& values,
                                       std::vector<jit::Expr> extra = {},
                                       const std::vector<NodeId>& computes = {}) const;
  int AddKernel(const jit::Kernel& k, std::vector<DType> ins, std::vector<DType> outs,
                const std::vector<jit::Expr>& pre = {});
  int AddShapeFunction(const jit::Kernel& k, int num_inputs, std::vector<bool> data_dependent,
                       const std::vector<jit::Expr>& pre = {});

  static const std::vector<ExternalRegionToEmit>& NoRegions() {
    static const std::vector<ExternalRegionToEmit> none;
    return none;
  }
  Status EmitIf(NodeId n);
  Status EmitLoop(NodeId n);
  StatusOr<Emitter*> Subgraph(const Graph& body, const std::string& name);
  StatusOr<std::vector<int>> CaptureRegs(const Emitter& sub);
  void BindFromResults(const std::vector<ValueId>& outs);

  Shared& sh_;
  const Graph& g_;
  const EmitOptions& opts_;
  const LoweringTable& table_;
  ExecutableBuilder& eb_;
  FunctionBuilder& fb_;
  std::vector<ValueState> vals_;
  const std::vector<ExternalRegionToEmit>& regions_;
  std::vector<std::string> captures_;
  std::vector<std::unique_ptr<Emitter>> subs_;
  std::set<ValueId> callee_allocated_;  // If/Loop results: the callee allocates them
  // Emission units: a node outside every region, or a whole region.
  struct Unit {
    int region = -1;
    NodeId node = kNoNode;
  };
  std::vector<ValueId> UnitInputs(const Unit& u) const;
  std::vector<ValueId> UnitOutputs(const Unit& u) const;
  Status EmitRegion(int r);
  StatusOr<std::vector<int>> AllocOutputs(const std::vector<ValueId>& outs, NodeId at);
  StatusOr<int> ConstantIndexOf(ValueId v);

  // What is emitted, in order: a node's kernel or view, a region, or a fused kernel.
  struct Item {
    int region = -1;           // an external region
    NodeId node = kNoNode;     // a node (or, for a fused kernel, its last member)
    int fused = -1;            // index into fused_
    std::vector<ValueId> ins, outs;
  };
  Status Prepare();           // lower every live node (collecting unsupported ones)
  void Fuse(bool enable);     // fusion decisions -> items_
  Status Liveness();
  Status EmitFused(const Item& item);

  std::vector<NodeId> order_;
  std::vector<int> region_of_node_;
  std::vector<Item> items_;
  std::map<NodeId, LoweredNode> lowered_;
  std::vector<bool> need_sf_;
  std::vector<FusedKernel> fused_;
  std::vector<Unit> units_;        // live units in emission order
  std::vector<int> unit_of_node_;  // index into all_units_
  std::vector<Unit> all_units_;
  std::map<ValueId, int> constant_index_;
  std::map<std::string, SymbolSource> bound_;
  std::map<uint64_t, std::vector<std::pair<jit::Kernel, int>>>& kernels_;
  std::map<uint64_t, std::vector<std::pair<jit::Kernel, int>>>& shape_funcs_;
  std::map<std::vector<int64_t>, int>& const_shapes_;
  int next_reg_ = 0;
  int arena_reg_ = -1;
  int64_t arena_bytes_ = 0;
  EmitStats& st_;
  std::map<std::string, std::vector<std::string>> unsupported_;  // op type -> node names
};

bool Emitter::SymbolsBound(const SymbolicShape& s) const {
  for (const DimExpr& d : s) {
    std::set<std::string> names;
    d.CollectSymbols(&names);
    for (const std::string& n : names) {
      if (!bound_.count(n)) return false;
    }
  }
  return true;
}

jit::Expr Emitter::ToExpr(const DimExpr& d, const std::map<std::string, jit::Expr>& vars) const {
  switch (d.kind()) {
    case DimExpr::Kind::kConst:
      return jit::IntImm(d.const_value());
    case DimExpr::Kind::kSymbol:
      return vars.at(d.symbol_name());
    case DimExpr::Kind::kSum: {
      jit::Expr acc = jit::IntImm(d.sum_constant());
      for (size_t i = 0; i < d.operands().size(); ++i) {
        acc = jit::Add(acc, jit::Mul(jit::IntImm(d.sum_coeffs()[i]), ToExpr(d.operands()[i], vars)));
      }
      return acc;
    }
    case DimExpr::Kind::kProduct: {
      jit::Expr acc = jit::IntImm(1);
      for (const DimExpr& f : d.operands()) acc = jit::Mul(acc, ToExpr(f, vars));
      return acc;
    }
    case DimExpr::Kind::kFloorDiv:
      return jit::FloorDiv(ToExpr(d.operands()[0], vars), ToExpr(d.operands()[1], vars));
    case DimExpr::Kind::kMod:
      return jit::FloorMod(ToExpr(d.operands()[0], vars), ToExpr(d.operands()[1], vars));
    case DimExpr::Kind::kMin:
      return jit::Min(ToExpr(d.operands()[0], vars), ToExpr(d.operands()[1], vars));
    case DimExpr::Kind::kMax:
      return jit::Max(ToExpr(d.operands()[0], vars), ToExpr(d.operands()[1], vars));
  }
  return jit::IntImm(-1);
}

std::vector<jit::Expr> Emitter::Preconditions(const jit::Kernel& k,
                                              const std::vector<ValueId>& values,
                                              std::vector<jit::Expr> extra,
                                              const std::vector<NodeId>& computes) const {
  std::vector<jit::Expr> out;
  std::map<std::string, jit::Expr> sym;
  for (size_t i = 0; i < values.size() && i < k.buffers.size(); ++i) {
    const SymbolicShape& shape = *g_.value(values[i]).shape;
    for (size_t a = 0; a < shape.size(); ++a) {
      jit::Expr dim = jit::DimOf(k.buffers[i], static_cast<int>(a));
      const DimExpr& d = shape[a];
      if (d.is_const()) {
        out.push_back(jit::Eq(dim, jit::IntImm(d.const_value())));
      } else if (d.is_symbol()) {
        auto it = sym.find(d.symbol_name());
        if (it == sym.end()) {
          sym[d.symbol_name()] = dim;
        } else {
          out.push_back(jit::Eq(dim, it->second));
        }
      }
    }
  }
  // An expression over a symbol no buffer carries bare (a fused intermediate's fresh dim) cannot
  // be checked here: such dims are kept conservative (lowerings read them with DimOf), and the
  // facts checked are those over the kernel's own inputs and output, which bound its indexing.
  auto checkable = [&](const DimExpr& d) {
    std::set<std::string> names;
    d.CollectSymbols(&names);
    for (const std::string& n : names) {
      if (!sym.count(n)) return false;
    }
    return true;
  };
  for (size_t i = 0; i < values.size() && i < k.buffers.size(); ++i) {
    const SymbolicShape& shape = *g_.value(values[i]).shape;
    for (size_t a = 0; a < shape.size(); ++a) {
      const DimExpr& d = shape[a];
      if (d.is_const() || d.is_symbol() || !checkable(d)) continue;
      out.push_back(jit::Eq(jit::DimOf(k.buffers[i], static_cast<int>(a)), ToExpr(d, sym)));
    }
  }
  for (NodeId n : computes) {
    for (const DimFact& f : g_.node(n).dim_facts) {
      if (!checkable(f.a) || !checkable(f.b)) continue;
      jit::Expr a = ToExpr(f.a, sym), b = ToExpr(f.b, sym);
      out.push_back(f.kind == DimFact::Kind::kEqual
                        ? jit::Eq(a, b)
                        : jit::Or(jit::Eq(a, jit::IntImm(1)), jit::Eq(a, b)));
    }
  }
  for (jit::Expr& e : extra) out.push_back(std::move(e));
  return out;
}

namespace {
std::string PreKey(const std::vector<jit::Expr>& pre) {
  std::string key;
  for (const jit::Expr& e : pre) key += jit::ToText(e) + ";";
  return key;
}
}  // namespace

int Emitter::AddKernel(const jit::Kernel& k, std::vector<DType> ins, std::vector<DType> outs,
                       const std::vector<jit::Expr>& pre) {
  const std::string pre_key = PreKey(pre);
  uint64_t h = jit::HashKernel(k) ^ std::hash<std::string>()(pre_key);
  for (const auto& [kernel, index] : kernels_[h]) {
    if (jit::StructurallyEqual(kernel, k) && PreKey(sh_.kernel_pre[index]) == pre_key) return index;
  }
  KernelDef def;
  def.name = k.name;
  def.inputs = std::move(ins);
  def.outputs = std::move(outs);
  def.payload_format = jit::kPayloadFormat;
  def.payload = jit::SerializeKernel(k, {}, pre);
  int index = eb_.AddKernel(std::move(def));
  kernels_[h].emplace_back(k, index);
  sh_.kernel_pre[index] = pre;
  ++st_.kernels;
  return index;
}

int Emitter::AddShapeFunction(const jit::Kernel& k, int num_inputs,
                              std::vector<bool> data_dependent,
                              const std::vector<jit::Expr>& pre) {
  const std::string pre_key = PreKey(pre);
  uint64_t h = jit::HashKernel(k) ^ std::hash<std::string>()(pre_key);
  for (const auto& [kernel, index] : shape_funcs_[h]) {
    if (jit::StructurallyEqual(kernel, k) && PreKey(sh_.shape_func_pre[index]) == pre_key) {
      return index;
    }
  }
  ShapeFunctionDef def;
  def.name = k.name;
  def.num_inputs = num_inputs;
  def.num_outputs = static_cast<int>(k.buffers.size()) - num_inputs;
  def.data_dependent = std::move(data_dependent);
  def.payload_format = jit::kPayloadFormat;
  def.payload = jit::SerializeKernel(k, {}, pre);
  int index = eb_.AddShapeFunction(std::move(def));
  shape_funcs_[h].emplace_back(k, index);
  sh_.shape_func_pre[index] = pre;
  ++st_.shape_functions;
  return index;
}

int Emitter::ConstI64Tensor(const std::vector<int64_t>& values) {
  auto it = const_shapes_.find(values);
  int index;
  if (it != const_shapes_.end()) {
    index = it->second;
  } else {
    index = eb_.AddConstant("shape" + std::to_string(const_shapes_.size()), DType::kI64,
                            {static_cast<int64_t>(values.size())}, values.data(),
                            values.size() * sizeof(int64_t));
    const_shapes_[values] = index;
  }
  int r = NewReg();
  fb_.LoadConst(r, index);
  return r;
}

int Emitter::ScratchStorage(int64_t bytes) {
  int size = NewReg();
  fb_.LoadConsti(size, bytes);
  int storage = NewReg();
  fb_.AllocStorage(storage, size);
  fb_.KillRegister(size);
  return storage;
}

StatusOr<int> Emitter::RegFor(ValueId v) {
  ValueState& s = vals_[v];
  if (s.reg >= 0) return s.reg;
  const Value& val = g_.value(v);
  if (val.data && val.kind != ValueKind::kGraphInput) {
    ASSIGN_OR_RETURN(int index, ConstantIndexOf(v));
    s.reg = NewReg();
    fb_.LoadConst(s.reg, index);
    return s.reg;
  }
  return Internal("value '" + val.name + "' is used before it is computed");
}

// Emits one batched shape function computing shape and byte size of every live dynamic value
// whose dims can be computed from the symbols bound so far (and which has none yet). `need` must
// be among them.
Status Emitter::EnsureShapes(const std::vector<ValueId>& need, NodeId at) {
  bool missing = false;
  for (ValueId v : need) missing |= vals_[v].shape_reg < 0;
  if (!missing) return Status::Ok();
  std::vector<ValueId> batch;
  std::set<std::string> symbols;
  for (ValueId v = 0; v < g_.num_values(); ++v) {
    const ValueState& s = vals_[v];
    if (!s.live || !s.dynamic || s.shape_reg >= 0 || callee_allocated_.count(v)) continue;
    const Value& val = g_.value(v);
    if (val.kind != ValueKind::kNodeOutput) continue;
    if (!SymbolsBound(*val.shape)) continue;
    batch.push_back(v);
    for (const DimExpr& d : *val.shape) d.CollectSymbols(&symbols);
  }
  for (ValueId v : need) {
    if (std::find(batch.begin(), batch.end(), v) == batch.end() && vals_[v].shape_reg < 0) {
      return Internal((at == kNoNode ? std::string("emission") : g_.DescribeNode(at)) +
                      ": the shape of '" + g_.value(v).name +
                      "' cannot be computed here");
    }
  }
  // Source buffers: one per distinct register symbols are read from.
  std::vector<jit::Buffer> buffers;
  std::vector<int> in_regs;
  std::vector<bool> data_dependent;
  std::map<int, int> buffer_of_reg;
  std::map<std::string, jit::Expr> vars;
  std::vector<std::pair<jit::Var, jit::Expr>> lets;
  std::vector<jit::Expr> pre;
  for (const std::string& name : symbols) {
    const SymbolSource& src = bound_.at(name);
    auto it = buffer_of_reg.find(src.reg);
    if (it == buffer_of_reg.end()) {
      int b = static_cast<int>(buffers.size());
      buffers.push_back(jit::Buffer::Param("src" + std::to_string(b), src.dtype, src.rank));
      in_regs.push_back(src.reg);
      data_dependent.push_back(!src.dim);
      it = buffer_of_reg.emplace(src.reg, b).first;
    }
    const jit::Buffer& b = buffers[it->second];
    jit::Var var(name);
    vars[name] = var;
    lets.emplace_back(var, src.dim ? jit::DimOf(b, src.index)
                                   : jit::Load(b, {jit::IntImm(src.index)}));
    if (!src.dim) pre.push_back(jit::Gt(jit::DimOf(b, 0), jit::IntImm(src.index)));
  }
  const int num_inputs = static_cast<int>(buffers.size());
  // One i64 output holding, per value, its dims then its byte size; the program reads them
  // through views of the same storage (one buffer keeps the kernel within the dispatcher's
  // argument limits however many values there are).
  jit::Buffer all = jit::Buffer::Param("shapes", DType::kI64, 1);
  buffers.push_back(all);
  std::vector<jit::Stmt> stores;
  std::vector<std::pair<ValueId, int64_t>> layout;  // value, rank
  int64_t slot = 0;
  for (ValueId v : batch) {
    const Value& val = g_.value(v);
    int rank = static_cast<int>(val.shape->size());
    // bytes = product(dims) * size, or -1 when a dim is negative or the product is too large.
    const int64_t limit = kMaxTensorBytes / static_cast<int64_t>(DTypeSize(val.dtype));
    jit::Expr acc = jit::IntImm(1);
    for (int a = 0; a < rank; ++a) {
      jit::Expr d = ToExpr((*val.shape)[a], vars);
      stores.push_back(jit::Store(all, {jit::IntImm(slot++)}, d));
      jit::Expr ok = jit::And(jit::And(jit::Ge(acc, jit::IntImm(0)), jit::Ge(d, jit::IntImm(0))),
                              jit::Le(acc, jit::FloorDiv(jit::IntImm(limit),
                                                         jit::Max(d, jit::IntImm(1)))));
      acc = jit::Select(ok, jit::Mul(acc, d), jit::IntImm(-1));
    }
    jit::Expr total = jit::Select(jit::Ge(acc, jit::IntImm(0)),
                                  jit::Mul(acc, jit::IntImm(DTypeSize(val.dtype))), jit::IntImm(-1));
    stores.push_back(jit::Store(all, {jit::IntImm(slot++)}, total));
    layout.emplace_back(v, rank);
  }
  jit::Stmt body = jit::Seq(stores);
  for (auto it = lets.rbegin(); it != lets.rend(); ++it) body = jit::Let(it->first, it->second, body);
  jit::Kernel k;
  k.name = "shapes_" + std::to_string(st_.shape_functions);
  k.buffers = buffers;
  k.body = body;
  Status valid = jit::ValidateKernel(k);
  if (!valid.ok()) return Internal("batched shape function: " + valid.message());
  pre.push_back(jit::Eq(jit::DimOf(all, 0), jit::IntImm(std::max<int64_t>(slot, 1))));
  int sf = AddShapeFunction(k, num_inputs, data_dependent, pre);
  int storage = ScratchStorage(std::max<int64_t>(8 * slot, 8));
  int all_reg = NewReg();
  fb_.AllocTensor(all_reg, storage, 0, DType::kI64, {std::max<int64_t>(slot, 1)});
  int64_t offset = 0;
  for (const auto& [v, rank] : layout) {
    ValueState& s = vals_[v];
    s.shape_reg = NewReg();
    fb_.AllocTensor(s.shape_reg, storage, offset, DType::kI64, {rank});
    offset += 8 * rank;
    s.bytes_reg = NewReg();
    fb_.AllocTensor(s.bytes_reg, storage, offset, DType::kI64, {1});
    offset += 8;
  }
  fb_.KillRegister(storage);
  fb_.InvokeShapeFunc(sf, in_regs, {all_reg});
  fb_.KillRegister(all_reg);
  return Status::Ok();
}

std::vector<ValueId> Emitter::UnitInputs(const Unit& u) const {
  if (u.region >= 0) return regions_[u.region].inputs;
  std::vector<ValueId> out;
  for (ValueId v : g_.node(u.node).inputs) {
    if (v != kNoValue) out.push_back(v);
  }
  return out;
}

std::vector<ValueId> Emitter::UnitOutputs(const Unit& u) const {
  if (u.region >= 0) return regions_[u.region].outputs;
  std::vector<ValueId> out;
  for (ValueId v : g_.node(u.node).outputs) {
    if (v != kNoValue) out.push_back(v);
  }
  return out;
}

// Units, liveness (dead-code elimination), emission order and last uses.
Status Emitter::Plan() {
  ASSIGN_OR_RETURN(order_, g_.TopologicalOrder());
  std::vector<int> topo_pos(g_.num_nodes(), 0);
  for (size_t i = 0; i < order_.size(); ++i) topo_pos[order_[i]] = static_cast<int>(i);
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
  auto producer_unit = [&](ValueId v) -> int {
    const Value& val = g_.value(v);
    if (val.kind != ValueKind::kNodeOutput || val.data || val.producer == kNoNode) return -1;
    return unit_of_node_[val.producer];
  };
  // Live units: backwards from the graph outputs. A node whose outputs are all folded
  // constants needs not run.
  std::vector<bool> unit_live(all_units_.size(), false);
  std::vector<ValueId> work(g_.outputs().begin(), g_.outputs().end());
  std::vector<bool> seen(g_.num_values(), false);
  while (!work.empty()) {
    ValueId v = work.back();
    work.pop_back();
    if (seen[v]) continue;
    seen[v] = true;
    int u = producer_unit(v);
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
  // Emission order: Kahn over live units, earliest first node first (regions are convex, so
  // the contracted graph is acyclic).
  std::vector<int> min_pos(all_units_.size(), INT_MAX);
  for (NodeId n : order_) min_pos[unit_of_node_[n]] = std::min(min_pos[unit_of_node_[n]], topo_pos[n]);
  std::vector<std::set<int>> succ(all_units_.size());
  std::vector<int> indeg(all_units_.size(), 0);
  for (size_t u = 0; u < all_units_.size(); ++u) {
    if (!unit_live[u]) continue;
    std::vector<ValueId> reads = UnitInputs(all_units_[u]);
    if (all_units_[u].region < 0) {
      const Node& node = g_.node(all_units_[u].node);
      reads.insert(reads.end(), node.implicit_inputs.begin(), node.implicit_inputs.end());
    } else {
      // A region's internal nodes may read values produced outside that are not listed as
      // inputs only if they are constants; anything else is a codegen or partition bug.
      for (NodeId n : regions_[all_units_[u].region].nodes) {
        for (ValueId v : g_.node(n).inputs) {
          if (v == kNoValue) continue;
          int p = producer_unit(v);
          const Value& val = g_.value(v);
          bool constant = val.data && val.kind != ValueKind::kGraphInput;
          if (p != static_cast<int>(u) && !constant &&
              std::find(reads.begin(), reads.end(), v) == reads.end()) {
            return InvalidArgument("external region '" + regions_[all_units_[u].region].name +
                                   "' reads '" + val.name + "' without listing it as an input");
          }
        }
      }
    }
    for (ValueId v : reads) {
      int p = producer_unit(v);
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

// Lowers every live node. need_sf_[n]: the node's outputs have dims that no earlier symbol
// binding provides (data-dependent, or fresh dims), so it runs its own shape function.
Status Emitter::Prepare() {
  need_sf_.assign(g_.num_nodes(), false);
  std::set<std::string> bound;
  for (const auto& [name, src] : bound_) bound.insert(name);
  auto all_bound = [&](const SymbolicShape& shape) {
    for (const DimExpr& d : shape) {
      std::set<std::string> names;
      d.CollectSymbols(&names);
      for (const std::string& n : names) {
        if (!bound.count(n)) return false;
      }
    }
    return true;
  };
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
      if (out != kNoValue && !all_bound(*g_.value(out).shape)) need = true;
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
  if (unsupported_.empty()) return Status::Ok();
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

// Fusion decisions. An elementwise node whose output (not returned) is read only by elementwise
// nodes of the same output shape that all belong to one group is absorbed into that group; a
// node nothing absorbs roots a group. A group's input produced by a single-output kernel (matmul, conv,
// reduction, ...) that nothing else reads becomes that kernel's epilogue.
void Emitter::Fuse(bool enable) {
  std::set<ValueId> graph_outputs(g_.outputs().begin(), g_.outputs().end());
  auto elementwise = [&](NodeId n) {
    auto it = lowered_.find(n);
    return it != lowered_.end() && it->second.kernel && it->second.element_fn &&
           !need_sf_[n] && g_.node(n).outputs.size() >= 1 && g_.node(n).outputs[0] != kNoValue;
  };
  auto single_output = [&](NodeId n) {
    int present = 0;
    for (ValueId v : g_.node(n).outputs) present += v != kNoValue;
    return present == 1 && g_.node(n).outputs[0] != kNoValue;
  };
  std::set<NodeId> live_nodes;
  for (const Unit& u : units_) {
    if (u.region < 0) live_nodes.insert(u.node);
  }
  // consumer_of[n]: a node of the group n is absorbed into (root_of follows the chain). Decided
  // consumers first (reverse unit order), so a value read by several nodes of one group (the x
  // of x * erf(x / sqrt 2)) joins that group.
  std::map<NodeId, NodeId> consumer_of;
  auto root_of = [&](NodeId n) {
    while (consumer_of.count(n)) n = consumer_of[n];
    return n;
  };
  if (enable) {
    for (auto u = units_.rbegin(); u != units_.rend(); ++u) {
      if (u->region >= 0 || !elementwise(u->node) || !single_output(u->node)) continue;
      ValueId o = g_.node(u->node).outputs[0];
      const std::vector<NodeId>& users = g_.Users(o);
      if (graph_outputs.count(o) || users.empty()) continue;
      std::optional<NodeId> root;
      bool joins = true;
      for (NodeId c : users) {
        if (!live_nodes.count(c) || !elementwise(c) ||
            *g_.value(g_.node(c).outputs[0]).shape != *g_.value(o).shape) {
          joins = false;
          break;
        }
        NodeId r = root_of(c);
        if (root && *root != r) {
          joins = false;
          break;
        }
        root = r;
      }
      if (joins) consumer_of[u->node] = users[0];
    }
  }
  std::map<NodeId, std::vector<NodeId>> members_of;  // root -> members in unit order
  for (const Unit& u : units_) {
    if (u.region < 0 && consumer_of.count(u.node)) members_of[root_of(u.node)].push_back(u.node);
  }
  std::set<NodeId> absorbed;
  std::map<NodeId, int> fused_at;  // root -> index into fused_
  for (auto& [root, members] : members_of) {
    members.push_back(root);
    std::vector<ElementwiseMember> group;
    for (NodeId m : members) group.push_back({m, lowered_[m].element_slots, lowered_[m].element_fn});
    StatusOr<FusedKernel> fk = FuseElementwise(g_, group);
    if (!fk.ok()) continue;  // emit unfused
    fused_at[root] = static_cast<int>(fused_.size());
    fused_.push_back(std::move(*fk));
    for (NodeId m : members) {
      if (m != root) absorbed.insert(m);
    }
  }
  // Epilogues: groups (or single elementwise nodes) reading a kernel output nobody else reads.
  if (enable) {
    for (const Unit& u : units_) {
      if (u.region >= 0 || absorbed.count(u.node) || !elementwise(u.node)) continue;
      NodeId root = u.node;
      std::vector<NodeId> members = members_of.count(root) ? members_of[root] : std::vector<NodeId>{root};
      std::set<NodeId> member_set(members.begin(), members.end());
      std::vector<ElementwiseMember> group;
      for (NodeId m : members) group.push_back({m, lowered_[m].element_slots, lowered_[m].element_fn});
      for (const ElementwiseMember& m : group) {
        bool done = false;
        for (int slot : m.slots) {
          ValueId v = g_.node(m.node).inputs[slot];
          const Value& val = g_.value(v);
          if (val.kind != ValueKind::kNodeOutput || val.data || val.producer == kNoNode) continue;
          NodeId a = val.producer;
          if (!live_nodes.count(a) || absorbed.count(a) || fused_at.count(a) || need_sf_[a] ||
              !single_output(a) || graph_outputs.count(v)) {
            continue;
          }
          auto it = lowered_.find(a);
          if (it == lowered_.end() || !it->second.kernel || it->second.element_fn) continue;
          bool private_use = true;
          for (NodeId user : g_.Users(v)) private_use &= member_set.count(user) > 0;
          if (!private_use) continue;
          std::vector<ValueId> anchor_inputs;
          for (ValueId in : g_.node(a).inputs) {
            if (in != kNoValue) anchor_inputs.push_back(in);
          }
          std::optional<FusedKernel> fk =
              FuseEpilogue(g_, *it->second.kernel, anchor_inputs, v, group);
          if (!fk) continue;
          if (fused_at.count(root)) {
            fused_[fused_at[root]] = std::move(*fk);
          } else {
            fused_at[root] = static_cast<int>(fused_.size());
            fused_.push_back(std::move(*fk));
          }
          for (NodeId mm : members) {
            if (mm != root) absorbed.insert(mm);
          }
          absorbed.insert(a);
          done = true;
          break;
        }
        if (done) break;
      }
    }
  }
  for (const Unit& u : units_) {
    Item item;
    if (u.region >= 0) {
      item.region = u.region;
      item.ins = UnitInputs(u);
      item.outs = UnitOutputs(u);
    } else if (absorbed.count(u.node)) {
      continue;
    } else if (fused_at.count(u.node)) {
      item.node = u.node;
      item.fused = fused_at[u.node];
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
  st_.fused_nodes = static_cast<int>(absorbed.size());
}

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
      vals_[out].def = static_cast<int>(pos);
      if (vals_[out].last_use < 0) vals_[out].last_use = static_cast<int>(pos);
    }
  }
  for (ValueId v : g_.outputs()) vals_[v].last_use = INT_MAX;
  return Status::Ok();
}

Status Emitter::EmitFused(const Item& item) {
  const FusedKernel& fk = fused_[item.fused];
  fb_.SetSourceNode(g_.node(item.node).name);
  std::vector<int> in_regs;
  std::vector<DType> in_dtypes;
  for (ValueId in : fk.inputs) {
    ASSIGN_OR_RETURN(int r, RegFor(in));
    in_regs.push_back(r);
    in_dtypes.push_back(g_.value(in).dtype);
  }
  ASSIGN_OR_RETURN(std::vector<int> out_regs, AllocOutputs({fk.output}, item.node));
  std::vector<ValueId> values = fk.inputs;
  values.push_back(fk.output);
  int k = AddKernel(fk.kernel, in_dtypes, {g_.value(fk.output).dtype},
                    Preconditions(fk.kernel, values, {}, fk.nodes));
  fb_.InvokeKernel(k, in_regs, out_regs);
  return Status::Ok();
}

Status Emitter::EmitNode(NodeId n) {
  const Node& node = g_.node(n);
  fb_.SetSourceNode(node.name);
  if (node.op_type == "If") return EmitIf(n);
  if (node.op_type == "Loop") return EmitLoop(n);
  const LoweredNode* lowered = &lowered_.at(n);
  std::vector<int> in_regs;
  for (ValueId in : node.inputs) {
    if (in == kNoValue) continue;
    ASSIGN_OR_RETURN(int r, RegFor(in));
    in_regs.push_back(r);
  }
  std::vector<ValueId> outs;
  for (ValueId out : node.outputs) {
    if (out != kNoValue) outs.push_back(out);
  }
  if (lowered->shape_function) {
    std::vector<int> shape_regs;
    int64_t total = 0;
    for (ValueId out : outs) total += 8 * static_cast<int64_t>(g_.value(out).shape->size());
    int storage = ScratchStorage(std::max<int64_t>(total, 8));
    int64_t offset = 0;
    for (ValueId out : outs) {
      int64_t rank = static_cast<int64_t>(g_.value(out).shape->size());
      int r = NewReg();
      fb_.AllocTensor(r, storage, offset, DType::kI64, {rank});
      offset += 8 * rank;
      shape_regs.push_back(r);
    }
    fb_.KillRegister(storage);
    std::vector<bool> dd(in_regs.size(), true);
    std::vector<ValueId> in_values;
    for (ValueId in : node.inputs) {
      if (in != kNoValue) in_values.push_back(in);
    }
    std::vector<jit::Expr> extra;
    const jit::Kernel& sk = *lowered->shape_function;
    for (size_t j = 0; j < outs.size(); ++j) {
      extra.push_back(jit::Eq(jit::DimOf(sk.buffers[in_values.size() + j], 0),
                              jit::IntImm(static_cast<int64_t>(g_.value(outs[j]).shape->size()))));
    }
    int sf = AddShapeFunction(sk, static_cast<int>(in_regs.size()), dd,
                              Preconditions(sk, in_values, std::move(extra)));
    fb_.InvokeShapeFunc(sf, in_regs, shape_regs);
    for (size_t j = 0; j < outs.size(); ++j) {
      const SymbolicShape& shape = *g_.value(outs[j]).shape;
      for (size_t a = 0; a < shape.size(); ++a) {
        const DimExpr& d = shape[a];
        if (d.is_symbol() && !bound_.count(d.symbol_name())) {
          bound_[d.symbol_name()] = SymbolSource{shape_regs[j], static_cast<int>(a), false,
                                                 DType::kI64, 1};
        }
      }
      if (!SymbolsBound(shape)) {
        return Unsupported(g_.DescribeNode(n) + ": output '" + g_.value(outs[j]).name +
                           "' has shape " + ShapeToString(shape) +
                           " whose dims cannot be computed at run time");
      }
    }
  }
  if (lowered->view_of >= 0) {
    ValueId src = node.inputs[lowered->view_of];
    ValueId dst = outs[0];
    const Value& dv = g_.value(dst);
    int r = NewReg();
    int shape_reg;
    ASSIGN_OR_RETURN(int src_reg, RegFor(src));
    if (*g_.value(src).shape == *dv.shape) {
      fb_.Move(r, src_reg);
    } else {
      if (IsStatic(*dv.shape)) {
        shape_reg = ConstI64Tensor(StaticDims(*dv.shape));
      } else {
        RETURN_IF_ERROR(EnsureShapes({dst}, n));
        shape_reg = vals_[dst].shape_reg;
      }
      fb_.ReshapeTensor(r, src_reg, shape_reg);
    }
    vals_[dst].reg = r;
    return Status::Ok();
  }
  std::vector<DType> in_dtypes, out_dtypes;
  for (ValueId in : node.inputs) {
    if (in != kNoValue) in_dtypes.push_back(g_.value(in).dtype);
  }
  for (ValueId out : outs) out_dtypes.push_back(g_.value(out).dtype);
  ASSIGN_OR_RETURN(std::vector<int> out_regs, AllocOutputs(outs, n));
  std::vector<ValueId> values;
  for (ValueId in : node.inputs) {
    if (in != kNoValue) values.push_back(in);
  }
  values.insert(values.end(), outs.begin(), outs.end());
  int k = AddKernel(*lowered->kernel, in_dtypes, out_dtypes,
                    Preconditions(*lowered->kernel, values, {}, {n}));
  fb_.InvokeKernel(k, in_regs, out_regs);
  return Status::Ok();
}

// Allocates the tensors a kernel or region writes: in the arena, in storage of their own
// (returned values), or sized by a shape function (dynamic shapes).
StatusOr<std::vector<int>> Emitter::AllocOutputs(const std::vector<ValueId>& outs, NodeId at) {
  std::vector<ValueId> dyn;
  for (ValueId out : outs) {
    if (vals_[out].dynamic) dyn.push_back(out);
  }
  if (!dyn.empty()) RETURN_IF_ERROR(EnsureShapes(dyn, at));
  std::vector<int> out_regs;
  for (ValueId out : outs) {
    const Value& v = g_.value(out);
    ValueState& s = vals_[out];
    s.reg = NewReg();
    if (s.dynamic) {
      int storage = NewReg();
      fb_.AllocStorage(storage, s.bytes_reg, kAlign);
      fb_.AllocTensorReg(s.reg, storage, 0, v.dtype, s.shape_reg);
      fb_.KillRegister(storage);
    } else if (s.arena_offset >= 0) {
      fb_.AllocTensor(s.reg, arena_reg_, s.arena_offset, v.dtype, StaticDims(*v.shape));
    } else {
      int storage = ScratchStorage(std::max<int64_t>(StaticBytes(v), 1));
      fb_.AllocTensor(s.reg, storage, 0, v.dtype, StaticDims(*v.shape));
      fb_.KillRegister(storage);
    }
    out_regs.push_back(s.reg);
  }
  return out_regs;
}

StatusOr<int> Emitter::ConstantIndexOf(ValueId v) {
  auto it = constant_index_.find(v);
  if (it != constant_index_.end()) return it->second;
  const Value& val = g_.value(v);
  if (!val.data || val.kind == ValueKind::kGraphInput) {
    return InvalidArgument("'" + val.name + "' is not a constant");
  }
  const TensorData& d = *val.data;
  int index = eb_.AddConstant(val.name, d.dtype(), d.dims(), d.data(), d.size_bytes());
  ++st_.constants;
  st_.constant_bytes += static_cast<int64_t>(d.size_bytes());
  constant_index_[v] = index;
  return index;
}

Status Emitter::EmitRegion(int r) {
  const ExternalRegionToEmit& region = regions_[r];
  fb_.SetSourceNode(region.nodes.empty() ? region.name : g_.node(region.nodes.back()).name);
  const std::string where = "external region '" + region.name + "' (" + region.vendor + ")";
  for (ValueId out : region.outputs) {
    if (!SymbolsBound(*g_.value(out).shape)) {
      return Unsupported(where + ": output '" + g_.value(out).name + "' has shape " +
                         ShapeToString(*g_.value(out).shape) +
                         ", which is only known after the region runs");
    }
  }
  std::vector<int> in_regs;
  for (ValueId in : region.inputs) {
    ASSIGN_OR_RETURN(int reg, RegFor(in));
    in_regs.push_back(reg);
  }
  ExternalRegionDef def;
  def.name = region.name;
  def.vendor = region.vendor;
  def.blob = region.blob;
  def.num_inputs = static_cast<int>(region.inputs.size());
  def.num_outputs = static_cast<int>(region.outputs.size());
  for (size_t i = 0; i < region.constants.size(); ++i) {
    const ExternalRegionToEmit::Constant& c = region.constants[i];
    if (c.value != kNoValue) {
      ASSIGN_OR_RETURN(int index, ConstantIndexOf(c.value));
      def.constants.push_back(static_cast<uint32_t>(index));
    } else if (c.data) {
      const TensorData& d = *c.data;
      int index = eb_.AddConstant(region.name + "_c" + std::to_string(i), d.dtype(), d.dims(),
                                  d.data(), d.size_bytes());
      ++st_.constants;
      st_.constant_bytes += static_cast<int64_t>(d.size_bytes());
      def.constants.push_back(static_cast<uint32_t>(index));
    } else {
      return InvalidArgument(where + ": constant " + std::to_string(i) + " has neither a value nor data");
    }
  }
  NodeId at = region.nodes.empty() ? kNoNode : region.nodes.back();
  ASSIGN_OR_RETURN(std::vector<int> out_regs, AllocOutputs(region.outputs, at));
  int index = eb_.AddExternalRegion(std::move(def));
  ++st_.external_regions;
  fb_.InvokeExternal(index, in_regs, out_regs);
  return Status::Ok();
}

// ---- Control flow: If and Loop as VM functions ---------------------------------------------

StatusOr<Emitter*> Emitter::Subgraph(const Graph& body, const std::string& name) {
  auto sub = std::make_unique<Emitter>(sh_, body, name, false);
  RETURN_IF_ERROR(sub->Run().WithContext("subgraph '" + name + "'"));
  subs_.push_back(std::move(sub));
  ++sh_.subgraphs;
  return subs_.back().get();
}

StatusOr<std::vector<int>> Emitter::CaptureRegs(const Emitter& sub) {
  std::vector<int> regs;
  for (const std::string& name : sub.captures()) {
    std::optional<ValueId> v = g_.FindValue(name);
    if (!v) return InvalidFormat("a subgraph captures '" + name + "', which is not in scope");
    ASSIGN_OR_RETURN(int r, RegFor(*v));
    regs.push_back(r);
  }
  return regs;
}

void Emitter::BindFromResults(const std::vector<ValueId>& outs) {
  for (ValueId out : outs) {
    const Value& v = g_.value(out);
    for (size_t a = 0; a < v.shape->size(); ++a) {
      const DimExpr& d = (*v.shape)[a];
      if (d.is_symbol() && !bound_.count(d.symbol_name())) {
        bound_[d.symbol_name()] = SymbolSource{vals_[out].reg, static_cast<int>(a), true, v.dtype,
                                               static_cast<int>(v.shape->size())};
      }
    }
  }
}

Status Emitter::EmitIf(NodeId n) {
  const Node& node = g_.node(n);
  const Attribute* then_a = node.FindAttribute("then_branch");
  const Attribute* else_a = node.FindAttribute("else_branch");
  if (!then_a || !else_a || then_a->type() != Attribute::Type::kGraph ||
      else_a->type() != Attribute::Type::kGraph) {
    return InvalidFormat(g_.DescribeNode(n) + ": then_branch and else_branch must be graphs");
  }
  ASSIGN_OR_RETURN(Emitter * then_fn, Subgraph(*then_a->graph(), node.name + "/then"));
  ASSIGN_OR_RETURN(Emitter * else_fn, Subgraph(*else_a->graph(), node.name + "/else"));
  fb_.SetSourceNode(node.name);
  ASSIGN_OR_RETURN(int cond, RegFor(node.inputs[0]));
  ASSIGN_OR_RETURN(std::vector<int> then_caps, CaptureRegs(*then_fn));
  ASSIGN_OR_RETURN(std::vector<int> else_caps, CaptureRegs(*else_fn));
  std::vector<int> outs;
  std::vector<ValueId> out_values;
  for (ValueId v : node.outputs) {
    int r = NewReg();
    outs.push_back(r);
    if (v != kNoValue) {
      vals_[v].reg = r;
      out_values.push_back(v);
    }
  }
  Label then_l = fb_.NewLabel(), else_l = fb_.NewLabel(), end_l = fb_.NewLabel();
  fb_.If(cond, then_l, else_l);
  fb_.Bind(then_l);
  fb_.Invoke(then_fn->function_index(), then_caps, outs);
  fb_.Goto(end_l);
  fb_.Bind(else_l);
  fb_.Invoke(else_fn->function_index(), else_caps, outs);
  fb_.Bind(end_l);
  BindFromResults(out_values);
  return Status::Ok();
}

Status Emitter::EmitLoop(NodeId n) {
  const Node& node = g_.node(n);
  const Attribute* body_a = node.FindAttribute("body");
  if (!body_a || body_a->type() != Attribute::Type::kGraph) {
    return InvalidFormat(g_.DescribeNode(n) + ": body must be a graph");
  }
  const Graph& body = *body_a->graph();
  const int carried = static_cast<int>(node.inputs.size()) - 2;
  const int scans = static_cast<int>(body.outputs().size()) - 1 - carried;
  if (carried < 0 || scans < 0) {
    return InvalidFormat(g_.DescribeNode(n) + ": the body has " +
                         std::to_string(body.outputs().size()) + " outputs for " +
                         std::to_string(carried) + " loop-carried values");
  }
  ASSIGN_OR_RETURN(Emitter * body_fn, Subgraph(body, node.name + "/body"));
  fb_.SetSourceNode(node.name);
  ASSIGN_OR_RETURN(std::vector<int> caps, CaptureRegs(*body_fn));
  const bool has_m = node.inputs[0] != kNoValue, has_c = node.inputs[1] != kNoValue;
  int i_reg = NewReg();
  fb_.LoadConsti(i_reg, 0);
  int m_reg = -1;
  if (has_m) {
    ASSIGN_OR_RETURN(m_reg, RegFor(node.inputs[0]));
  }
  int cond_reg = NewReg();
  if (has_c) {
    ASSIGN_OR_RETURN(int c, RegFor(node.inputs[1]));
    fb_.Move(cond_reg, c);
  } else {
    uint8_t one = 1;
    int index = eb_.AddConstant(node.name + "/true", DType::kBool, {}, &one, 1);
    fb_.LoadConst(cond_reg, index);
  }
  std::vector<int> v_regs;
  for (int k = 0; k < carried; ++k) {
    ASSIGN_OR_RETURN(int init, RegFor(node.inputs[2 + k]));
    int r = NewReg();
    fb_.Move(r, init);
    v_regs.push_back(r);
  }
  // Scan outputs: each iteration's value is appended along a new leading axis. The
  // accumulator starts as an empty [0, 0, ...] tensor; each append computes the new shape and
  // byte size in a shape function and copies the old rows and the new one.
  struct Scan {
    int acc = -1, value = -1;
    int rank = 0;  // of the per-iteration value
    DType dtype = DType::kInvalid;
    int shape_fn = -1, append = -1;
  };
  std::vector<Scan> scan_state;
  for (int s = 0; s < scans; ++s) {
    const Value& sv = body.value(body.outputs()[1 + carried + s]);
    if (!sv.shape) return Internal(g_.DescribeNode(n) + ": scan output has no shape");
    Scan sc;
    sc.rank = static_cast<int>(sv.shape->size());
    sc.dtype = sv.dtype;
    if (sc.rank + 1 > jit::kMaxRank) return Unsupported(g_.DescribeNode(n) + ": scan rank too large");
    sc.acc = NewReg();
    sc.value = NewReg();
    int storage = ScratchStorage(64);
    fb_.AllocTensor(sc.acc, storage, 0, sc.dtype, std::vector<int64_t>(sc.rank + 1, 0));
    fb_.KillRegister(storage);
    jit::Buffer acc = jit::Buffer::Param("acc", sc.dtype, sc.rank + 1);
    jit::Buffer val = jit::Buffer::Param("value", sc.dtype, sc.rank);
    jit::Buffer out = jit::Buffer::Param("out", sc.dtype, sc.rank + 1);
    jit::Buffer all = jit::Buffer::Param("shape", DType::kI64, 1);
    // The trailing dims of a non-empty accumulator match the value (else the copy would not
    // fit): a precondition of both kernels.
    jit::Expr fits = jit::Eq(jit::DimOf(acc, 0), jit::IntImm(0));
    jit::Expr same = jit::IntImm(1, DType::kBool);
    for (int j = 0; j < sc.rank; ++j) same = jit::And(same, jit::Eq(jit::DimOf(acc, j + 1), jit::DimOf(val, j)));
    fits = jit::Or(fits, same);
    {
      jit::Kernel k;
      k.name = "scan_shape";
      k.buffers = {acc, val, all};
      std::vector<jit::Stmt> st;
      jit::Expr rows = jit::Add(jit::DimOf(acc, 0), jit::IntImm(1));
      st.push_back(jit::Store(all, {jit::IntImm(0)}, rows));
      jit::Expr bytes = jit::Mul(rows, jit::IntImm(static_cast<int64_t>(DTypeSize(sc.dtype))));
      for (int j = 0; j < sc.rank; ++j) {
        st.push_back(jit::Store(all, {jit::IntImm(j + 1)}, jit::DimOf(val, j)));
        bytes = jit::Mul(bytes, jit::DimOf(val, j));
      }
      st.push_back(jit::Store(all, {jit::IntImm(sc.rank + 1)}, bytes));
      k.body = jit::Seq(st);
      sc.shape_fn = AddShapeFunction(
          k, 2, {false, false}, {fits, jit::Eq(jit::DimOf(all, 0), jit::IntImm(sc.rank + 2))});
    }
    {
      jit::Kernel k;
      k.name = "scan_append";
      k.buffers = {acc, val, out};
      std::vector<jit::Var> vars;
      std::vector<jit::Expr> idx, tail;
      for (int d = 0; d <= sc.rank; ++d) {
        vars.emplace_back("s" + std::to_string(d));
        idx.push_back(vars.back());
        if (d > 0) tail.push_back(vars.back());
      }
      jit::Stmt body_st = jit::If(jit::Lt(idx[0], jit::DimOf(acc, 0)),
                                  jit::Store(out, idx, jit::Load(acc, idx)),
                                  jit::Store(out, idx, jit::Load(val, tail)));
      for (int d = sc.rank; d >= 0; --d) {
        body_st = jit::For(vars[d], jit::DimOf(out, d), jit::ForKind::kSerial, body_st);
      }
      k.body = body_st;
      std::vector<jit::Expr> pre = {fits, jit::Eq(jit::DimOf(out, 0),
                                                  jit::Add(jit::DimOf(acc, 0), jit::IntImm(1)))};
      for (int j = 0; j < sc.rank; ++j) pre.push_back(jit::Eq(jit::DimOf(out, j + 1), jit::DimOf(val, j)));
      sc.append = AddKernel(k, {sc.dtype, sc.dtype}, {sc.dtype}, pre);
    }
    scan_state.push_back(sc);
  }
  // continue = (i < M) && cond, as a kernel (the VM has no scalar arithmetic).
  jit::Buffer ib = jit::Buffer::Param("i", DType::kI64, 0);
  jit::Buffer mb = jit::Buffer::Param("m", DType::kI64, 0);
  jit::Buffer cb = jit::Buffer::Param("cond", DType::kBool, 0);
  jit::Buffer ob = jit::Buffer::Param("continue", DType::kBool, 0);
  jit::Kernel check;
  check.name = "loop_continue";
  jit::Expr go = jit::Load(cb, {});
  if (has_m) go = jit::And(jit::Lt(jit::Load(ib, {}), jit::Load(mb, {})), go);
  check.buffers = has_m ? std::vector<jit::Buffer>{ib, mb, cb, ob} : std::vector<jit::Buffer>{ib, cb, ob};
  check.body = jit::Store(ob, {}, go);
  std::vector<DType> check_in = has_m ? std::vector<DType>{DType::kI64, DType::kI64, DType::kBool}
                                      : std::vector<DType>{DType::kI64, DType::kBool};
  int check_k = AddKernel(check, check_in, {DType::kBool});
  jit::Buffer nb = jit::Buffer::Param("next", DType::kI64, 0);
  jit::Kernel inc;
  inc.name = "loop_increment";
  inc.buffers = {ib, nb};
  inc.body = jit::Store(nb, {}, jit::Add(jit::Load(ib, {}), jit::IntImm(1)));
  int inc_k = AddKernel(inc, {DType::kI64}, {DType::kI64});

  Label head = fb_.NewLabel(), body_l = fb_.NewLabel(), exit_l = fb_.NewLabel();
  fb_.Bind(head);
  int storage = ScratchStorage(16);
  int go_reg = NewReg(), next_reg = NewReg();
  fb_.AllocTensor(go_reg, storage, 0, DType::kBool, {});
  fb_.AllocTensor(next_reg, storage, 8, DType::kI64, {});
  fb_.KillRegister(storage);
  std::vector<int> check_args = {i_reg};
  if (has_m) check_args.push_back(m_reg);
  check_args.push_back(cond_reg);
  fb_.InvokeKernel(check_k, check_args, {go_reg});
  fb_.If(go_reg, body_l, exit_l);
  fb_.Bind(body_l);
  std::vector<int> args = {i_reg, cond_reg};
  args.insert(args.end(), v_regs.begin(), v_regs.end());
  args.insert(args.end(), caps.begin(), caps.end());
  std::vector<int> dsts = {cond_reg};
  dsts.insert(dsts.end(), v_regs.begin(), v_regs.end());
  for (const Scan& sc : scan_state) dsts.push_back(sc.value);
  fb_.Invoke(body_fn->function_index(), args, dsts);
  for (const Scan& sc : scan_state) {
    int meta = ScratchStorage(8 * (sc.rank + 2));
    int all = NewReg(), shape = NewReg(), bytes = NewReg();
    fb_.AllocTensor(all, meta, 0, DType::kI64, {sc.rank + 2});
    fb_.AllocTensor(shape, meta, 0, DType::kI64, {sc.rank + 1});
    fb_.AllocTensor(bytes, meta, 8 * (sc.rank + 1), DType::kI64, {1});
    fb_.KillRegister(meta);
    fb_.InvokeShapeFunc(sc.shape_fn, {sc.acc, sc.value}, {all});
    int storage = NewReg(), grown = NewReg();
    fb_.AllocStorage(storage, bytes, kAlign);
    fb_.AllocTensorReg(grown, storage, 0, sc.dtype, shape);
    fb_.KillRegister(storage);
    fb_.InvokeKernel(sc.append, {sc.acc, sc.value}, {grown});
    fb_.Move(sc.acc, grown);
    fb_.KillRegister(grown);
  }
  fb_.InvokeKernel(inc_k, {i_reg}, {next_reg});
  fb_.Move(i_reg, next_reg);
  fb_.Goto(head);
  fb_.Bind(exit_l);
  std::vector<ValueId> out_values;
  for (int k = 0; k < carried + scans && k < static_cast<int>(node.outputs.size()); ++k) {
    ValueId v = node.outputs[k];
    if (v == kNoValue) continue;
    vals_[v].reg = k < carried ? v_regs[k] : scan_state[k - carried].acc;
    out_values.push_back(v);
  }
  BindFromResults(out_values);
  return Status::Ok();
}

Status Emitter::Run() {
  // Parameters first: registers 0..n-1 — the formal inputs, then (subgraphs) the captures.
  std::vector<ValueId> params(g_.inputs().begin(), g_.inputs().end());
  for (ValueId v = 0; v < g_.num_values(); ++v) {
    if (g_.value(v).kind == ValueKind::kCapture) {
      params.push_back(v);
      captures_.push_back(g_.value(v).name);
    }
  }
  for (ValueId v : params) {
    const Value& val = g_.value(v);
    if (!val.shape) return Internal("graph input '" + val.name + "' has no shape");
    int r = fb_.AddParam(SpecOf(val));
    vals_[v].reg = r;
    next_reg_ = std::max(next_reg_, r + 1);
    for (size_t a = 0; a < val.shape->size(); ++a) {
      const DimExpr& d = (*val.shape)[a];
      if (d.is_symbol() && !bound_.count(d.symbol_name())) {
        bound_[d.symbol_name()] = SymbolSource{r, static_cast<int>(a), true, val.dtype,
                                               static_cast<int>(val.shape->size())};
      }
    }
  }
  for (ValueId v : g_.outputs()) {
    const Value& val = g_.value(v);
    if (!val.shape) return Internal("graph output '" + val.name + "' has no shape");
    fb_.AddResult(SpecOf(val));
  }
  RETURN_IF_ERROR(Plan());
  RETURN_IF_ERROR(Prepare());
  Fuse(opts_.fuse);
  RETURN_IF_ERROR(Liveness());
  // Arena: static intermediates that are not graph outputs, first fit by lifetime. Values that
  // may be viewed (inputs of view ops) are kept out of it: the view's lifetime is not tracked.
  std::set<ValueId> viewed;
  static const std::set<std::string> kViewOps = {"Reshape", "Flatten", "Squeeze", "Unsqueeze",
                                                 "Identity", "Dropout"};
  for (const Item& item : items_) {
    if (item.region >= 0 || item.fused >= 0 || !lowered_.count(item.node)) continue;
    const LoweredNode& l = lowered_.at(item.node);
    if (l.view_of >= 0) viewed.insert(g_.node(item.node).inputs[l.view_of]);
  }
  struct Block {
    ValueId v;
    int64_t size;
    int begin, end;
  };
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
  std::stable_sort(blocks.begin(), blocks.end(),
                   [](const Block& a, const Block& b) { return a.size > b.size; });
  std::vector<Block> placed;
  for (const Block& b : blocks) {
    // Lowest offset that does not overlap a placed block alive at the same time.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Block& p : placed) {
      if (p.begin <= b.end && b.begin <= p.end) {
        busy.emplace_back(vals_[p.v].arena_offset, vals_[p.v].arena_offset + p.size);
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : busy) {
      if (offset + b.size <= lo) break;
      offset = std::max(offset, hi);
    }
    vals_[b.v].arena_offset = offset;
    arena_bytes_ = std::max(arena_bytes_, offset + b.size);
    placed.push_back(b);
  }
  st_.planned_bytes = arena_bytes_;
  if (arena_bytes_ > 0) {
    fb_.SetSourceNode("");
    arena_reg_ = ScratchStorage(arena_bytes_);
  }
  // Nodes in order; registers of dynamic values are dropped after their last use.
  std::map<int, std::vector<ValueId>> kill_at;
  for (ValueId v = 0; v < g_.num_values(); ++v) {
    const ValueState& s = vals_[v];
    if (s.live && s.def >= 0 && s.last_use >= 0 && s.last_use != INT_MAX &&
        g_.value(v).kind == ValueKind::kNodeOutput) {
      kill_at[s.last_use].push_back(v);
    }
  }
  for (size_t pos = 0; pos < items_.size(); ++pos) {
    const Item& item = items_[pos];
    RETURN_IF_ERROR(item.region >= 0  ? EmitRegion(item.region)
                    : item.fused >= 0 ? EmitFused(item)
                                      : EmitNode(item.node));
    for (ValueId v : kill_at[static_cast<int>(pos)]) {
      if (vals_[v].reg >= 0) fb_.KillRegister(vals_[v].reg);
    }
  }
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

}  // namespace

StatusOr<std::vector<uint8_t>> EmitExecutable(const Graph& graph, const EmitOptions& options,
                                              EmitStats* stats) {
  if (options.table == nullptr) return InvalidArgument("EmitOptions::table is required");
  Shared sh(options);
  Emitter main(sh, graph, "main", true);
  RETURN_IF_ERROR(main.Run());
  MetadataDef md;
  for (ValueId v : graph.inputs()) md.inputs.push_back(SpecOf(graph.value(v)));
  for (ValueId v : graph.outputs()) md.outputs.push_back(SpecOf(graph.value(v)));
  md.entry = "main";
  md.opset = graph.OpsetFor("");
  md.producer_name = options.producer;
  md.doc = options.doc;
  sh.eb.SetMetadata(std::move(md));
  if (stats) *stats = sh.st;
  return sh.eb.Finish();
}

}  // namespace kiln::compiler
