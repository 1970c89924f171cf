// Control flow: If branches and Loop bodies become VM functions of their own (named uniquely
// in the executable), called with their captured outer values as extra arguments. A Loop is a
// counted loop in the caller's bytecode; its scan outputs are written one row per iteration into
// a buffer that grows geometrically (amortized O(1) per row, not a copy of every row so far).
#include <functional>
#include <utility>

#include "compiler/emit/emitter.h"

namespace kiln::compiler::emit_internal {

// One Loop scan output: iteration i writes its value into row i of `buf`, a tensor whose leading
// dim is the capacity (rows written so far or more), in storage `buf_storage`; when the loop
// ends, `acc` is the view of its first i rows.
struct Emitter::Scan {
  int acc = -1, value = -1;
  int buf = -1, buf_storage = -1, full = -1;
  int rank = 0;  // of the per-iteration value
  DType dtype = DType::kInvalid;
  int full_k = -1, grow_fn = -1, copy_k = -1, store_k = -1, rows_fn = -1;
};

// The registers one Loop iterates with.
struct Emitter::LoopRegs {
  int function = -1;  // the body
  std::vector<int> caps;
  bool has_m = false;
  int i = -1, m = -1, cond = -1;
  std::vector<int> carried;
};

StatusOr<Emitter*> Emitter::Subgraph(const Graph& body, const std::string& name) {
  auto sub = std::make_unique<Emitter>(sh_, body, name, false);
  sub->parent_ = this;
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
  regs.insert(regs.end(), sub.symbol_sources().begin(), sub.symbol_sources().end());
  return regs;
}

void Emitter::BindFromResults(const std::vector<ValueId>& outs) {
  for (ValueId out : outs) BindSymbols(g_.value(out), vals_[out].reg);
}

// A register per output of `node` (omitted ones too: the callee returns them), bound to the
// present outputs, which are appended to *present.
std::vector<int> Emitter::ResultRegs(const Node& node, std::vector<ValueId>* present) {
  std::vector<int> outs;
  for (ValueId v : node.outputs) {
    int r = NewReg();
    outs.push_back(r);
    if (v != kNoValue) {
      vals_[v].reg = r;
      present->push_back(v);
    }
  }
  return outs;
}

Status Emitter::EmitIf(NodeId n) {
  const Node& node = g_.node(n);
  const Attribute* then_a = node.FindAttribute("then_branch");
  const Attribute* else_a = node.FindAttribute("else_branch");
  if (!then_a || !else_a || then_a->type() != Attribute::Type::kGraph ||
      else_a->type() != Attribute::Type::kGraph) {
    return InvalidFormat(g_.DescribeNode(n) + ": then_branch and else_branch must be graphs");
  }
  if (const Graph* known = ConstantIfBranch(g_, node)) return EmitKnownIf(n, *known);
  ASSIGN_OR_RETURN(Emitter * then_fn, Subgraph(*then_a->graph(),
                                               sh_.UniqueFunctionName(name_, node, n, "then")));
  ASSIGN_OR_RETURN(Emitter * else_fn, Subgraph(*else_a->graph(),
                                               sh_.UniqueFunctionName(name_, node, n, "else")));
  fb_.SetSourceNode(node.name);
  ASSIGN_OR_RETURN(int cond, RegFor(node.inputs[0]));
  ASSIGN_OR_RETURN(std::vector<int> then_caps, CaptureRegs(*then_fn));
  ASSIGN_OR_RETURN(std::vector<int> else_caps, CaptureRegs(*else_fn));
  std::vector<ValueId> out_values;
  std::vector<int> outs = ResultRegs(node, &out_values);
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

// An If whose cond is a compile-time constant: only the branch it takes (the only one shape
// inference typed) becomes a function, called unconditionally.
Status Emitter::EmitKnownIf(NodeId n, const Graph& branch) {
  const Node& node = g_.node(n);
  bool then = node.FindAttribute("then_branch")->graph().get() == &branch;
  ASSIGN_OR_RETURN(Emitter * fn, Subgraph(branch, sh_.UniqueFunctionName(name_, node, n,
                                                                         then ? "then" : "else")));
  fb_.SetSourceNode(node.name);
  ASSIGN_OR_RETURN(std::vector<int> caps, CaptureRegs(*fn));
  std::vector<ValueId> out_values;
  std::vector<int> outs = ResultRegs(node, &out_values);
  fb_.Invoke(fn->function_index(), caps, outs);
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
  ASSIGN_OR_RETURN(Emitter * body_fn,
                   Subgraph(body, sh_.UniqueFunctionName(name_, node, n, "body")));
  fb_.SetSourceNode(node.name);
  LoopRegs lr;
  lr.function = body_fn->function_index();
  ASSIGN_OR_RETURN(lr.caps, CaptureRegs(*body_fn));
  RETURN_IF_ERROR(LoopInit(n, carried, lr));
  std::vector<Scan> scan_state;
  for (int s = 0; s < scans; ++s) {
    ASSIGN_OR_RETURN(Scan sc,
                     ScanOutput(n, body.value(body.outputs()[1 + carried + s]), lr.has_m));
    scan_state.push_back(sc);
  }
  EmitIterations(lr, scan_state);
  FinishScans(lr, scan_state);
  std::vector<ValueId> out_values;
  for (int k = 0; k < carried + scans && k < static_cast<int>(node.outputs.size()); ++k) {
    ValueId v = node.outputs[k];
    if (v == kNoValue) continue;
    vals_[v].reg = k < carried ? lr.carried[k] : scan_state[k - carried].acc;
    out_values.push_back(v);
  }
  BindFromResults(out_values);
  return Status::Ok();
}

// The iteration counter (0), the trip count M, the condition (true when absent) and copies of
// the loop-carried values' initial values.
Status Emitter::LoopInit(NodeId n, int carried, LoopRegs& lr) {
  const Node& node = g_.node(n);
  lr.has_m = node.inputs[0] != kNoValue;
  const bool has_c = node.inputs[1] != kNoValue;
  lr.i = NewReg();
  fb_.LoadConsti(lr.i, 0);
  if (lr.has_m) {
    ASSIGN_OR_RETURN(lr.m, RegFor(node.inputs[0]));
  }
  lr.cond = NewReg();
  if (has_c) {
    ASSIGN_OR_RETURN(int c, RegFor(node.inputs[1]));
    fb_.Move(lr.cond, c);
  } else {
    uint8_t one = 1;
    int index = eb_.AddConstant(node.name + "/true", DType::kBool, {}, &one, 1);
    fb_.LoadConst(lr.cond, index);
  }
  for (int k = 0; k < carried; ++k) {
    ASSIGN_OR_RETURN(int init, RegFor(node.inputs[2 + k]));
    int r = NewReg();
    fb_.Move(r, init);
    lr.carried.push_back(r);
  }
  return Status::Ok();
}

namespace {

// The capacity of the first buffer; each later one doubles it, up to the trip count M.
constexpr int64_t kFirstScanRows = 8;

// Index variables s0..s{rank} and the expressions for them.
std::vector<jit::Var> IndexVars(int count) {
  std::vector<jit::Var> vars;
  for (int d = 0; d < count; ++d) vars.emplace_back("s" + std::to_string(d));
  return vars;
}

// A kernel named `name` over `buffers`, its body still to set.
jit::Kernel NewKernel(const char* name, std::vector<jit::Buffer> buffers) {
  jit::Kernel k;
  k.name = name;
  k.buffers = std::move(buffers);
  return k;
}

// `body` inside serial loops over vars[first..], var d running to extent(d), outermost first.
jit::Stmt SerialNest(const std::vector<jit::Var>& vars, int first,
                     const std::function<jit::Expr(int)>& extent, jit::Stmt body) {
  for (int d = static_cast<int>(vars.size()) - 1; d >= first; --d) {
    body = jit::For(vars[d], extent(d), jit::ForKind::kSerial, body);
  }
  return body;
}

// full = i >= rows of buf: the buffer has no room for this iteration's row.
jit::Kernel ScanFullKernel(const jit::Buffer& i, const jit::Buffer& buf, const jit::Buffer& full) {
  jit::Kernel k = NewKernel("scan_full", {i, buf, full});
  k.body = jit::Store(full, {}, jit::Ge(jit::Load(i, {}), jit::DimOf(buf, 0)));
  return k;
}

// shape = [capacity, value dims..., bytes] of the next buffer: twice the current rows (at least
// kFirstScanRows), at most M when the loop has a trip count.
jit::Kernel ScanGrowKernel(const jit::Buffer& buf, const jit::Buffer& val, const jit::Buffer* m,
                           const jit::Buffer& all, int rank, DType dtype) {
  jit::Kernel k;
  k.name = m ? "scan_grow_m" : "scan_grow";
  k.buffers = {buf, val};
  if (m) k.buffers.push_back(*m);
  k.buffers.push_back(all);
  jit::Expr rows = jit::Max(jit::Mul(jit::DimOf(buf, 0), jit::IntImm(2)),
                            jit::IntImm(kFirstScanRows));
  if (m) rows = jit::Max(jit::Min(rows, jit::Load(*m, {})), jit::Add(jit::DimOf(buf, 0),
                                                                    jit::IntImm(1)));
  std::vector<jit::Stmt> st;
  st.push_back(jit::Store(all, {jit::IntImm(0)}, rows));
  jit::Expr bytes = jit::Mul(rows, jit::IntImm(static_cast<int64_t>(DTypeSize(dtype))));
  for (int j = 0; j < rank; ++j) {
    st.push_back(jit::Store(all, {jit::IntImm(j + 1)}, jit::DimOf(val, j)));
    bytes = jit::Mul(bytes, jit::DimOf(val, j));
  }
  st.push_back(jit::Store(all, {jit::IntImm(rank + 1)}, bytes));
  k.body = jit::Seq(st);
  return k;
}

// grown[r, ...] = buf[r, ...] for the rows of buf (the rows past them are written later).
jit::Kernel ScanCopyKernel(const jit::Buffer& buf, const jit::Buffer& grown, int rank) {
  jit::Kernel k = NewKernel("scan_copy", {buf, grown});
  std::vector<jit::Var> vars = IndexVars(rank + 1);
  std::vector<jit::Expr> idx(vars.begin(), vars.end());
  k.body = SerialNest(vars, 0, [&](int d) { return jit::DimOf(d == 0 ? buf : grown, d); },
                      jit::Store(grown, idx, jit::Load(buf, idx)));
  return k;
}

// buf[i, ...] = value (row i only; a row past the capacity is never written).
jit::Kernel ScanStoreKernel(const jit::Buffer& val, const jit::Buffer& i, const jit::Buffer& buf,
                            int rank) {
  jit::Kernel k = NewKernel("scan_store", {val, i, buf});
  std::vector<jit::Var> vars = IndexVars(rank + 1);
  std::vector<jit::Expr> tail(vars.begin() + 1, vars.end());
  std::vector<jit::Expr> idx = {jit::Load(i, {})};
  idx.insert(idx.end(), tail.begin(), tail.end());
  jit::Stmt row = SerialNest(vars, 1, [&](int d) { return jit::DimOf(val, d - 1); },
                            jit::Store(buf, idx, jit::Load(val, tail)));
  k.body = jit::If(jit::Lt(jit::Load(i, {}), jit::DimOf(buf, 0)), row);
  return k;
}

// shape = [i, trailing dims of buf]: the rows the loop wrote.
jit::Kernel ScanRowsKernel(const jit::Buffer& buf, const jit::Buffer& i, const jit::Buffer& out,
                           int rank) {
  jit::Kernel k = NewKernel("scan_rows", {buf, i, out});
  std::vector<jit::Stmt> st = {jit::Store(out, {jit::IntImm(0)}, jit::Load(i, {}))};
  for (int j = 1; j <= rank; ++j) {
    st.push_back(jit::Store(out, {jit::IntImm(j)}, jit::DimOf(buf, j)));
  }
  k.body = jit::Seq(st);
  return k;
}

}  // namespace

// Scan outputs: each iteration's value is row i of the result. The buffer starts as an empty
// [0, 0, ...] tensor; when it is full a shape function sizes the next one (geometric growth, so
// the rows copied over a loop are fewer than twice the rows written), the rows so far are
// copied once, and the row is stored in place.
StatusOr<Emitter::Scan> Emitter::ScanOutput(NodeId n, const Value& sv, bool has_m) {
  if (!sv.shape) return Internal(g_.DescribeNode(n) + ": scan output has no shape");
  Scan sc;
  sc.rank = static_cast<int>(sv.shape->size());
  sc.dtype = sv.dtype;
  if (sc.rank + 1 > jit::kMaxRank) return Unsupported(g_.DescribeNode(n) + ": scan rank too large");
  sc.acc = NewReg();
  sc.value = NewReg();
  sc.buf = NewReg();
  sc.full = NewReg();
  sc.buf_storage = ScratchStorage(64);
  fb_.AllocTensor(sc.buf, sc.buf_storage, 0, sc.dtype, std::vector<int64_t>(sc.rank + 1, 0));
  fb_.AllocTensor(sc.full, sc.buf_storage, 0, DType::kBool, {});
  jit::Buffer buf = jit::Buffer::Param("buf", sc.dtype, sc.rank + 1);
  jit::Buffer val = jit::Buffer::Param("value", sc.dtype, sc.rank);
  jit::Buffer grown = jit::Buffer::Param("grown", sc.dtype, sc.rank + 1);
  jit::Buffer ib = jit::Buffer::Param("i", DType::kI64, 0);
  jit::Buffer mb = jit::Buffer::Param("m", DType::kI64, 0);
  jit::Buffer fb = jit::Buffer::Param("full", DType::kBool, 0);
  jit::Buffer all = jit::Buffer::Param("shape", DType::kI64, 1);
  sc.full_k = AddKernel(ScanFullKernel(ib, buf, fb), {DType::kI64, sc.dtype}, {DType::kBool});
  sc.grow_fn = AddShapeFunction(ScanGrowKernel(buf, val, has_m ? &mb : nullptr, all, sc.rank,
                                               sc.dtype),
                                has_m ? 3 : 2, has_m ? std::vector<bool>{false, false, true}
                                                     : std::vector<bool>{false, false},
                                {jit::Eq(jit::DimOf(all, 0), jit::IntImm(sc.rank + 2))});
  // The trailing dims of a non-empty buffer match every value (ONNX: scan outputs have one
  // shape across iterations), else a row would not fit: preconditions of the copy and store.
  jit::Expr copy_fits = jit::Eq(jit::DimOf(buf, 0), jit::IntImm(0));
  jit::Expr same = jit::IntImm(1, DType::kBool);
  std::vector<jit::Expr> store_pre;
  for (int j = 0; j < sc.rank; ++j) {
    same = jit::And(same, jit::Eq(jit::DimOf(buf, j + 1), jit::DimOf(grown, j + 1)));
    store_pre.push_back(jit::Eq(jit::DimOf(buf, j + 1), jit::DimOf(val, j)));
  }
  sc.copy_k = AddKernel(ScanCopyKernel(buf, grown, sc.rank), {sc.dtype}, {sc.dtype},
                        {jit::Or(copy_fits, same), jit::Ge(jit::DimOf(grown, 0),
                                                           jit::DimOf(buf, 0))});
  sc.store_k = AddKernel(ScanStoreKernel(val, ib, buf, sc.rank), {sc.dtype, DType::kI64},
                         {sc.dtype}, store_pre);
  sc.rows_fn = AddShapeFunction(ScanRowsKernel(buf, ib, all, sc.rank), 2, {false, true},
                                {jit::Eq(jit::DimOf(all, 0), jit::IntImm(sc.rank + 1))});
  return sc;
}

// The kernels of the loop's control (the VM has no scalar arithmetic): before the first
// iteration continue = (i < M) && cond; after each, one kernel computes both next = i + 1 and
// continue = (next < M) && cond (one call per iteration where there were two).
std::pair<int, int> Emitter::LoopControlKernels(bool has_m) {
  jit::Buffer ib = jit::Buffer::Param("i", DType::kI64, 0);
  jit::Buffer mb = jit::Buffer::Param("m", DType::kI64, 0);
  jit::Buffer cb = jit::Buffer::Param("cond", DType::kBool, 0);
  jit::Buffer nb = jit::Buffer::Param("next", DType::kI64, 0);
  jit::Buffer ob = jit::Buffer::Param("continue", DType::kBool, 0);
  std::vector<jit::Buffer> ins = {ib};
  std::vector<DType> in_types = {DType::kI64};
  if (has_m) ins.push_back(mb), in_types.push_back(DType::kI64);
  ins.push_back(cb), in_types.push_back(DType::kBool);
  auto go = [&](const jit::Expr& i) {
    jit::Expr cond = jit::Load(cb, {});
    return has_m ? jit::And(jit::Lt(i, jit::Load(mb, {})), cond) : cond;
  };
  jit::Kernel check;
  check.name = "loop_continue";
  check.buffers = ins;
  check.buffers.push_back(ob);
  check.body = jit::Store(ob, {}, go(jit::Load(ib, {})));
  int check_k = AddKernel(check, in_types, {DType::kBool});
  jit::Kernel step;
  step.name = "loop_step";
  step.buffers = ins;
  step.buffers.push_back(nb);
  step.buffers.push_back(ob);
  jit::Expr next = jit::Add(jit::Load(ib, {}), jit::IntImm(1));
  step.body = jit::Seq({jit::Store(nb, {}, next), jit::Store(ob, {}, go(next))});
  int step_k = AddKernel(step, in_types, {DType::kI64, DType::kBool});
  return {check_k, step_k};
}

// go = continue(i, M, cond); if !go exit; body: call the body (cond, carried values and this
// iteration's scan values come back); append scans; (i, go) = step(i, M, cond); if go body.
// The step's outputs get fresh storage each iteration: i, moved from the last one, is its input.
void Emitter::EmitIterations(const LoopRegs& lr, const std::vector<Scan>& scans) {
  auto [check_k, step_k] = LoopControlKernels(lr.has_m);
  Label body_l = fb_.NewLabel(), exit_l = fb_.NewLabel();
  std::vector<int> control_args = {lr.i};
  if (lr.has_m) control_args.push_back(lr.m);
  control_args.push_back(lr.cond);
  int first = ScratchStorage(8);
  int first_go = NewReg();
  fb_.AllocTensor(first_go, first, 0, DType::kBool, {});
  fb_.KillRegister(first);
  fb_.InvokeKernel(check_k, control_args, {first_go});
  fb_.If(first_go, body_l, exit_l);
  fb_.Bind(body_l);
  std::vector<int> args = {lr.i, lr.cond};
  args.insert(args.end(), lr.carried.begin(), lr.carried.end());
  args.insert(args.end(), lr.caps.begin(), lr.caps.end());
  std::vector<int> dsts = {lr.cond};
  dsts.insert(dsts.end(), lr.carried.begin(), lr.carried.end());
  for (const Scan& sc : scans) dsts.push_back(sc.value);
  fb_.Invoke(lr.function, args, dsts);
  AppendScans(lr, scans);
  int storage = ScratchStorage(16);
  int go_reg = NewReg(), next_reg = NewReg();
  fb_.AllocTensor(next_reg, storage, 0, DType::kI64, {});
  fb_.AllocTensor(go_reg, storage, 8, DType::kBool, {});
  fb_.KillRegister(storage);
  fb_.InvokeKernel(step_k, control_args, {next_reg, go_reg});
  fb_.Move(lr.i, next_reg);
  fb_.If(go_reg, body_l, exit_l);
  fb_.Bind(exit_l);
}

// Row i of each scan output: when its buffer is full, a buffer of the next capacity takes the
// rows so far; then the value is stored as row i.
void Emitter::AppendScans(const LoopRegs& lr, const std::vector<Scan>& scans) {
  for (const Scan& sc : scans) {
    Label grow_l = fb_.NewLabel(), store_l = fb_.NewLabel();
    fb_.InvokeKernel(sc.full_k, {lr.i, sc.buf}, {sc.full});
    fb_.If(sc.full, grow_l, store_l);
    fb_.Bind(grow_l);
    int meta = ScratchStorage(8 * (sc.rank + 2));
    int all = NewReg(), shape = NewReg(), bytes = NewReg();
    fb_.AllocTensor(all, meta, 0, DType::kI64, {sc.rank + 2});
    fb_.AllocTensor(shape, meta, 0, DType::kI64, {sc.rank + 1});
    fb_.AllocTensor(bytes, meta, 8 * (sc.rank + 1), DType::kI64, {1});
    fb_.KillRegister(meta);
    std::vector<int> grow_args = {sc.buf, sc.value};
    if (lr.has_m) grow_args.push_back(lr.m);
    fb_.InvokeShapeFunc(sc.grow_fn, grow_args, {all});
    int storage = NewReg(), grown = NewReg();
    fb_.AllocStorage(storage, bytes, kAlign);
    fb_.AllocTensorReg(grown, storage, 0, sc.dtype, shape);
    fb_.InvokeKernel(sc.copy_k, {sc.buf}, {grown});
    fb_.Move(sc.buf, grown);
    fb_.Move(sc.buf_storage, storage);
    for (int r : {all, shape, bytes, storage, grown}) fb_.KillRegister(r);
    fb_.Bind(store_l);
    fb_.InvokeKernel(sc.store_k, {sc.value, lr.i}, {sc.buf});
  }
}

// After the loop: each scan output is the view of its buffer's first i rows (i = iterations).
void Emitter::FinishScans(const LoopRegs& lr, const std::vector<Scan>& scans) {
  for (const Scan& sc : scans) {
    int meta = ScratchStorage(8 * (sc.rank + 1));
    int shape = NewReg();
    fb_.AllocTensor(shape, meta, 0, DType::kI64, {sc.rank + 1});
    fb_.KillRegister(meta);
    fb_.InvokeShapeFunc(sc.rows_fn, {sc.buf, lr.i}, {shape});
    fb_.AllocTensorReg(sc.acc, sc.buf_storage, 0, sc.dtype, shape);
    for (int r : {shape, sc.buf, sc.buf_storage, sc.full}) fb_.KillRegister(r);
  }
}

}  // namespace kiln::compiler::emit_internal
