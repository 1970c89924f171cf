// Control flow: If branches and Loop bodies become VM functions of their own (named uniquely
// in the executable), called with their captured outer values as extra arguments. A Loop is a
// counted loop in the caller's bytecode; its scan outputs grow by one row per iteration.
#include "compiler/emit/emitter.h"

namespace kiln::compiler::emit_internal {

// One Loop scan output: the accumulator the caller appends each iteration's value to.
struct Emitter::Scan {
  int acc = -1, value = -1;
  int rank = 0;  // of the per-iteration value
  DType dtype = DType::kInvalid;
  int shape_fn = -1, append = -1;
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
    ASSIGN_OR_RETURN(Scan sc, ScanOutput(n, body.value(body.outputs()[1 + carried + s])));
    scan_state.push_back(sc);
  }
  EmitIterations(lr, scan_state);
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

// shape = [rows + 1, value dims...] and its byte size, after the last dim.
jit::Kernel ScanShapeKernel(const jit::Buffer& acc, const jit::Buffer& val,
                            const jit::Buffer& all, int rank, DType dtype) {
  jit::Kernel k;
  k.name = "scan_shape";
  k.buffers = {acc, val, all};
  std::vector<jit::Stmt> st;
  jit::Expr rows = jit::Add(jit::DimOf(acc, 0), jit::IntImm(1));
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

// out = the rows of acc, then value as the last row.
jit::Kernel ScanAppendKernel(const jit::Buffer& acc, const jit::Buffer& val,
                             const jit::Buffer& out, int rank) {
  jit::Kernel k;
  k.name = "scan_append";
  k.buffers = {acc, val, out};
  std::vector<jit::Var> vars;
  std::vector<jit::Expr> idx, tail;
  for (int d = 0; d <= rank; ++d) {
    vars.emplace_back("s" + std::to_string(d));
    idx.push_back(vars.back());
    if (d > 0) tail.push_back(vars.back());
  }
  jit::Stmt body_st = jit::If(jit::Lt(idx[0], jit::DimOf(acc, 0)),
                              jit::Store(out, idx, jit::Load(acc, idx)),
                              jit::Store(out, idx, jit::Load(val, tail)));
  for (int d = rank; d >= 0; --d) {
    body_st = jit::For(vars[d], jit::DimOf(out, d), jit::ForKind::kSerial, body_st);
  }
  k.body = body_st;
  return k;
}

}  // namespace

// Scan outputs: each iteration's value is appended along a new leading axis. The accumulator
// starts as an empty [0, 0, ...] tensor; each append computes the new shape and byte size in a
// shape function and copies the old rows and the new one.
StatusOr<Emitter::Scan> Emitter::ScanOutput(NodeId n, const Value& sv) {
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
  for (int j = 0; j < sc.rank; ++j) {
    same = jit::And(same, jit::Eq(jit::DimOf(acc, j + 1), jit::DimOf(val, j)));
  }
  fits = jit::Or(fits, same);
  sc.shape_fn = AddShapeFunction(ScanShapeKernel(acc, val, all, sc.rank, sc.dtype), 2,
                                 {false, false},
                                 {fits, jit::Eq(jit::DimOf(all, 0), jit::IntImm(sc.rank + 2))});
  std::vector<jit::Expr> pre = {
      fits, jit::Eq(jit::DimOf(out, 0), jit::Add(jit::DimOf(acc, 0), jit::IntImm(1)))};
  for (int j = 0; j < sc.rank; ++j) {
    pre.push_back(jit::Eq(jit::DimOf(out, j + 1), jit::DimOf(val, j)));
  }
  sc.append = AddKernel(ScanAppendKernel(acc, val, out, sc.rank), {sc.dtype, sc.dtype},
                        {sc.dtype}, pre);
  return sc;
}

// The kernels of the loop's control (the VM has no scalar arithmetic): continue = (i < M) &&
// cond, and next = i + 1.
std::pair<int, int> Emitter::LoopControlKernels(bool has_m) {
  jit::Buffer ib = jit::Buffer::Param("i", DType::kI64, 0);
  jit::Buffer mb = jit::Buffer::Param("m", DType::kI64, 0);
  jit::Buffer cb = jit::Buffer::Param("cond", DType::kBool, 0);
  jit::Buffer ob = jit::Buffer::Param("continue", DType::kBool, 0);
  jit::Kernel check;
  check.name = "loop_continue";
  jit::Expr go = jit::Load(cb, {});
  if (has_m) go = jit::And(jit::Lt(jit::Load(ib, {}), jit::Load(mb, {})), go);
  check.buffers = has_m ? std::vector<jit::Buffer>{ib, mb, cb, ob}
                        : std::vector<jit::Buffer>{ib, cb, ob};
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
  return {check_k, inc_k};
}

// head: go = continue(i, M, cond); if !go exit; call the body (cond, carried values and this
// iteration's scan values come back); append scans; i = i + 1; goto head.
void Emitter::EmitIterations(const LoopRegs& lr, const std::vector<Scan>& scans) {
  auto [check_k, inc_k] = LoopControlKernels(lr.has_m);
  Label head = fb_.NewLabel(), body_l = fb_.NewLabel(), exit_l = fb_.NewLabel();
  fb_.Bind(head);
  int storage = ScratchStorage(16);
  int go_reg = NewReg(), next_reg = NewReg();
  fb_.AllocTensor(go_reg, storage, 0, DType::kBool, {});
  fb_.AllocTensor(next_reg, storage, 8, DType::kI64, {});
  fb_.KillRegister(storage);
  std::vector<int> check_args = {lr.i};
  if (lr.has_m) check_args.push_back(lr.m);
  check_args.push_back(lr.cond);
  fb_.InvokeKernel(check_k, check_args, {go_reg});
  fb_.If(go_reg, body_l, exit_l);
  fb_.Bind(body_l);
  std::vector<int> args = {lr.i, lr.cond};
  args.insert(args.end(), lr.carried.begin(), lr.carried.end());
  args.insert(args.end(), lr.caps.begin(), lr.caps.end());
  std::vector<int> dsts = {lr.cond};
  dsts.insert(dsts.end(), lr.carried.begin(), lr.carried.end());
  for (const Scan& sc : scans) dsts.push_back(sc.value);
  fb_.Invoke(lr.function, args, dsts);
  AppendScans(scans);
  fb_.InvokeKernel(inc_k, {lr.i}, {next_reg});
  fb_.Move(lr.i, next_reg);
  fb_.Goto(head);
  fb_.Bind(exit_l);
}

// acc = append(acc, value) for each scan output, into storage sized by its shape function.
void Emitter::AppendScans(const std::vector<Scan>& scans) {
  for (const Scan& sc : scans) {
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
}

}  // namespace kiln::compiler::emit_internal
