// Symbols and dynamic shapes in one function: where each symbol is read from at run time, the
// batched shape functions computing dims and byte sizes of dynamic values, and the
// preconditions every kernel carries (the shapes it was emitted for).
#include <algorithm>
#include <tuple>

#include "compiler/emit/emitter.h"
#include "vm/providers.h"

namespace kiln::compiler::emit_internal {

bool Emitter::SymbolsBound(const SymbolicShape& s) const { return SymbolsIn(s, bound_); }

// The symbol `d` determines when it is `s` or `s + c` (the dims subgraphs see of padded or
// framed tensors, e.g. `sequence + 192`), with c; nullopt otherwise.
std::optional<std::pair<std::string, int64_t>> Emitter::Invertible(const DimExpr& d) {
  if (d.is_symbol()) return std::pair{d.symbol_name(), int64_t{0}};
  if (d.kind() == DimExpr::Kind::kSum && d.operands().size() == 1 && d.sum_coeffs()[0] == 1 &&
      d.operands()[0].is_symbol()) {
    return std::pair{d.operands()[0].symbol_name(), d.sum_constant()};
  }
  return std::nullopt;
}

// Symbols appearing bare (or plus a constant) in `v`'s shape and not bound yet are read from
// the dims of the tensor in `reg` from now on.
void Emitter::BindSymbols(const Value& v, int reg) {
  for (size_t a = 0; a < v.shape->size(); ++a) {
    auto inv = Invertible((*v.shape)[a]);
    if (inv && !bound_.count(inv->first)) {
      bound_[inv->first] = SymbolSource{reg, static_cast<int>(a), true, v.dtype,
                                        static_cast<int>(v.shape->size()), inv->second};
    }
  }
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

// One batched shape function under construction.
struct Emitter::ShapeBatch {
  std::vector<ValueId> values;     // whose shapes it computes
  std::set<std::string> symbols;   // that their dims read
  // Source buffers: one per distinct register symbols are read from, then the output.
  std::vector<jit::Buffer> buffers;
  std::vector<int> in_regs;
  std::vector<bool> data_dependent;
  std::map<std::string, jit::Expr> vars;
  std::vector<std::pair<jit::Var, jit::Expr>> lets;
  std::vector<jit::Expr> pre;
  int64_t slots = 0;                                // i64 elements of the output
  std::vector<std::pair<ValueId, int64_t>> layout;  // distinct shapes: first value, rank
  std::vector<size_t> entry_of;                     // per value: its entry in `layout`
};

// Emits one batched shape function computing shape and byte size of every live dynamic value
// whose dims can be computed from the symbols bound so far (and which has none yet). `need` must
// be among them.
Status Emitter::EnsureShapes(const std::vector<ValueId>& need, NodeId at) {
  bool missing = false;
  for (ValueId v : need) missing |= vals_[v].shape_reg < 0;
  if (!missing) return Status::Ok();
  ShapeBatch b;
  RETURN_IF_ERROR(CollectShapeBatch(need, at, b));
  ReadSymbols(b);
  ASSIGN_OR_RETURN(int sf, BatchShapeFunction(b));
  EmitShapeViews(b, sf);
  return Status::Ok();
}

Status Emitter::CollectShapeBatch(const std::vector<ValueId>& need, NodeId at,
                                  ShapeBatch& b) const {
  for (ValueId v = 0; v < g_.num_values(); ++v) {
    const ValueState& s = vals_[v];
    if (!s.live || !s.dynamic || s.shape_reg >= 0 || callee_allocated_.count(v)) continue;
    const Value& val = g_.value(v);
    if (val.kind != ValueKind::kNodeOutput) continue;
    if (!SymbolsBound(*val.shape)) continue;
    b.values.push_back(v);
    for (const DimExpr& d : *val.shape) d.CollectSymbols(&b.symbols);
  }
  for (ValueId v : need) {
    if (std::find(b.values.begin(), b.values.end(), v) == b.values.end() &&
        vals_[v].shape_reg < 0) {
      return Internal((at == kNoNode ? std::string("emission") : g_.DescribeNode(at)) +
                      ": the shape of '" + g_.value(v).name + "' cannot be computed here");
    }
  }
  return Status::Ok();
}

// The batch's inputs: a buffer per register holding symbols, a let per symbol reading it (a
// dim, or an element of a shape tensor, which must then be long enough).
void Emitter::ReadSymbols(ShapeBatch& b) const {
  std::map<int, int> buffer_of_reg;
  for (const std::string& name : b.symbols) {
    const SymbolSource& src = bound_.at(name);
    auto it = buffer_of_reg.find(src.reg);
    if (it == buffer_of_reg.end()) {
      int i = static_cast<int>(b.buffers.size());
      b.buffers.push_back(jit::Buffer::Param("src" + std::to_string(i), src.dtype, src.rank));
      b.in_regs.push_back(src.reg);
      b.data_dependent.push_back(!src.dim);
      it = buffer_of_reg.emplace(src.reg, i).first;
    }
    const jit::Buffer& buf = b.buffers[it->second];
    jit::Var var(name);
    b.vars[name] = var;
    jit::Expr read = src.dim ? jit::DimOf(buf, src.index) : jit::Load(buf, {jit::IntImm(src.index)});
    if (src.offset != 0) read = jit::Sub(read, jit::IntImm(src.offset));
    b.lets.emplace_back(var, read);
    if (!src.dim) b.pre.push_back(jit::Gt(jit::DimOf(buf, 0), jit::IntImm(src.index)));
  }
}

namespace {

// acc * d; else acc when it is already negative (the first failure stays), -1 when d is
// negative, kShapeTooLarge when the product would exceed `limit`.
jit::Expr SaturatingMul(const jit::Expr& acc, const jit::Expr& d, int64_t limit) {
  jit::Expr fits = jit::Le(acc, jit::FloorDiv(jit::IntImm(limit), jit::Max(d, jit::IntImm(1))));
  jit::Expr bad_d =
      jit::Select(jit::Lt(d, jit::IntImm(0)), jit::IntImm(-1), jit::IntImm(kShapeTooLarge));
  jit::Expr failed = jit::Select(jit::Lt(acc, jit::IntImm(0)), acc, bad_d);
  jit::Expr ok = jit::And(jit::And(jit::Ge(acc, jit::IntImm(0)), jit::Ge(d, jit::IntImm(0))), fits);
  return jit::Select(ok, jit::Mul(acc, d), failed);
}

}  // namespace

// Adds the batch's kernel: one i64 output holding, per value, its dims then its byte size; the
// program reads them through views of the same storage (one buffer keeps the kernel within the
// dispatcher's argument limits however many values there are).
StatusOr<int> Emitter::BatchShapeFunction(ShapeBatch& b) {
  const int num_inputs = static_cast<int>(b.buffers.size());
  jit::Buffer all = jit::Buffer::Param("shapes", DType::kI64, 1);
  b.buffers.push_back(all);
  std::vector<jit::Stmt> stores;
  for (ValueId v : b.values) {
    const Value& val = g_.value(v);
    // Values of one shape and element size (a loop step's gates, its new state) share one
    // computed shape and size: fewer stores here and fewer views per call, which a loop body
    // pays on every iteration.
    auto same = std::find_if(b.layout.begin(), b.layout.end(), [&](const auto& entry) {
      const Value& other = g_.value(entry.first);
      return *other.shape == *val.shape && DTypeSize(other.dtype) == DTypeSize(val.dtype);
    });
    b.entry_of.push_back(static_cast<size_t>(same - b.layout.begin()));
    if (same != b.layout.end()) continue;
    int rank = static_cast<int>(val.shape->size());
    // bytes = product(dims) * size; -1 when a dim is negative, kShapeTooLarge when too large.
    const int64_t limit = kMaxTensorBytes / static_cast<int64_t>(DTypeSize(val.dtype));
    // Each dim and each partial product is bound to a variable: SaturatingMul reads both
    // several times, so without the bindings the expression tree of a rank-r product grows
    // like 5^r (swin_t's rank-6 windows passed the payload's tree-size limit).
    std::vector<std::pair<jit::Var, jit::Expr>> binds;
    std::vector<jit::Stmt> value_stores;
    jit::Expr acc = jit::IntImm(1);
    for (int a = 0; a < rank; ++a) {
      jit::Var d("d" + std::to_string(a));
      binds.emplace_back(d, ToExpr((*val.shape)[a], b.vars));
      value_stores.push_back(jit::Store(all, {jit::IntImm(b.slots++)}, d));
      jit::Var product("bytes" + std::to_string(a));
      binds.emplace_back(product, SaturatingMul(acc, d, limit));
      acc = product;
    }
    jit::Expr total = jit::Select(jit::Ge(acc, jit::IntImm(0)),
                                  jit::Mul(acc, jit::IntImm(DTypeSize(val.dtype))), acc);
    value_stores.push_back(jit::Store(all, {jit::IntImm(b.slots++)}, total));
    jit::Stmt value_body = jit::Seq(value_stores);
    for (auto it = binds.rbegin(); it != binds.rend(); ++it)
      value_body = jit::Let(it->first, it->second, value_body);
    stores.push_back(value_body);
    b.layout.emplace_back(v, rank);
  }
  jit::Stmt body = jit::Seq(stores);
  for (auto it = b.lets.rbegin(); it != b.lets.rend(); ++it) {
    body = jit::Let(it->first, it->second, body);
  }
  jit::Kernel k;
  k.name = "shapes_" + std::to_string(st_.shape_functions);
  k.buffers = b.buffers;
  k.body = body;
  Status valid = jit::ValidateKernel(k);
  if (!valid.ok()) return Internal("batched shape function: " + valid.message());
  b.pre.push_back(jit::Eq(jit::DimOf(all, 0), jit::IntImm(std::max<int64_t>(b.slots, 1))));
  return AddShapeFunction(k, num_inputs, b.data_dependent, b.pre);
}

// Scratch storage for the batch's output, a view per value's shape and byte size, the call.
void Emitter::EmitShapeViews(const ShapeBatch& b, int sf) {
  int storage = ScratchStorage(std::max<int64_t>(8 * b.slots, 8));
  int all_reg = NewReg();
  fb_.AllocTensor(all_reg, storage, 0, DType::kI64, {std::max<int64_t>(b.slots, 1)});
  int64_t offset = 0;
  std::vector<std::pair<int, int>> regs;  // per entry: shape, bytes (read only, so shared)
  for (const auto& entry : b.layout) {
    const int64_t rank = entry.second;
    regs.emplace_back(NewReg(), NewReg());
    fb_.AllocTensor(regs.back().first, storage, offset, DType::kI64, {rank});
    offset += 8 * rank;
    fb_.AllocTensor(regs.back().second, storage, offset, DType::kI64, {1});
    offset += 8;
  }
  for (size_t i = 0; i < b.values.size(); ++i) {
    ValueState& s = vals_[b.values[i]];
    std::tie(s.shape_reg, s.bytes_reg) = regs[b.entry_of[i]];
  }
  fb_.KillRegister(storage);
  fb_.InvokeShapeFunc(sf, b.in_regs, {all_reg});
  fb_.KillRegister(all_reg);
}

}  // namespace kiln::compiler::emit_internal
