// Code generation for parallel loops: body outlining, context capture and the run-time grain.
#include <algorithm>
#include <functional>
#include <unordered_map>
#include <unordered_set>

#include "jit/codegen_internal.h"

namespace kiln::jit {
namespace {

// Iterations of work one chunk should carry at least: enough to hide an OpenMP fork/join (a few
// microseconds idle, far more when the machine is loaded) behind real work.
constexpr int64_t kMinWorkPerChunk = int64_t{1} << 18;
constexpr int64_t kUnknownExtent = 256;  // an extent that is only known inside the loop
constexpr int64_t kMaxExtent = int64_t{1} << 20;
constexpr int64_t kMaxWork = int64_t{1} << 40;

// Vars and buffers a statement refers to, in first-use order.
class UseCollector {
 public:
  std::vector<const ExprNode*> vars;
  std::vector<const BufferNode*> buffers;
  bool loads_or_loops = false;  // a Load or a Reduce: not evaluated speculatively

  void Stmt(const StmtNode* s) {
    if (!s) return;
    if (s->buffer) AddBuffer(s->buffer.get());
    for (const jit::Expr& e : s->exprs) Expr(e);
    for (const auto& child : s->body) Stmt(child.get());
  }

  void Expr(const jit::Expr& e) {
    if (!e || !seen_.insert(e.get()).second) return;
    if (e->op == ExprOp::kVar) vars.push_back(e.get());
    if (e->op == ExprOp::kLoad || e->op == ExprOp::kReduce || e->op == ExprOp::kCheckIndex ||
        e->op == ExprOp::kTeamSize || e->op == ExprOp::kTeamBarrier) {
      loads_or_loops = true;  // a check must not fire for a loop that never runs; a team call
                              // is made by the team's threads only
    }
    if (e->buffer) AddBuffer(e->buffer.get());
    for (const jit::Expr& arg : e->args) Expr(arg);
  }

 private:
  void AddBuffer(const BufferNode* b) {
    if (seen_buffers_.insert(b).second) buffers.push_back(b);
  }
  std::unordered_set<const ExprNode*> seen_;
  std::unordered_set<const BufferNode*> seen_buffers_;
};

bool HasLoop(const StmtNode* s) {
  if (!s) return false;
  if (s->op == StmtOp::kFor) return true;
  for (const auto& child : s->body) {
    if (HasLoop(child.get())) return true;
  }
  return false;
}

void CollectReduces(const Expr& e, std::vector<const ExprNode*>* out) {
  if (!e) return;
  if (e->op == ExprOp::kReduce) out->push_back(e.get());
  for (const Expr& arg : e->args) CollectReduces(arg, out);
}

// Bounds are kept in [-kMaxWork, kMaxWork], so sums of two never overflow; an upper bound from
// kUnboundedAbove up means "nothing known" (an unbounded end plus or minus a little).
constexpr int64_t kUnboundedAbove = kMaxWork / 2;

// Run-time bounds [lo, hi] of an i64 value, emitted as IR.
struct Interval {
  llvm::Value* lo;
  llvm::Value* hi;
};

// Emits, before a parallel loop forks, an estimate of the work of one of its iterations. Loop
// extents inside the body often depend on the loop's index, on inner loop indices or on Lets
// (a GEMM task's rows, columns and K chunk: min(group, m - r0)); those are bounded by interval
// arithmetic over what the index and the Let values can be, instead of guessed, so a kernel of
// tiny tasks is seen to be small and stays serial.
class WorkEstimator {
 public:
  // `at_fork`: the value of an expression computable before the loop, or null.
  WorkEstimator(llvm::IRBuilder<>& b, std::function<llvm::Value*(const Expr&)> at_fork)
      : b_(b), at_fork_(std::move(at_fork)) {}

  // `var` lies in `range` inside what is walked next (until Unbind).
  void Bind(const ExprNode* var, Interval range) {
    ranges_[var] = range;
    memo_.clear();
  }
  void Unbind(const ExprNode* var) {
    ranges_.erase(var);
    flags_.erase(var);
    memo_.clear();
  }

  // Element operations one execution of `s` performs, in [1, kMaxWork].
  llvm::Value* Work(const StmtNode* s) {
    // A Let's reductions add to its body's work: a row kernel binds its statistics (Softmax's
    // max, LayerNorm's mean and variance) before the loop that stores, and counting only that
    // loop made them look a third of their size (serial on two threads).
    const bool adds = s->op == StmtOp::kSeq || s->op == StmtOp::kLet;
    llvm::Value* work = b_.getInt64(adds ? 0 : 1);
    if (s->op == StmtOp::kStore || s->op == StmtOp::kLet) {
      std::vector<const ExprNode*> reduces;
      for (const Expr& e : s->exprs) CollectReduces(e, &reduces);
      for (const ExprNode* r : reduces) {
        llvm::Value* count = b_.getInt64(1);
        for (size_t i = 1; i < r->args.size(); ++i) count = Times(count, Extent(r->args[i]));
        work = Plus(work, count);
      }
    }
    const ExprNode* bound = BindScope(*s);
    for (const auto& child : s->body) {
      llvm::Value* w = Work(child.get());
      work = adds ? Plus(work, w) : Smax(work, w);
    }
    if (bound) Unbind(bound);
    if (s->op == StmtOp::kFor) work = Times(work, Extent(s->exprs[1]));
    return Smax(work, b_.getInt64(1));
  }

 private:
  // Binds the var a For or an i64 Let introduces for its body; returns it (null if none).
  const ExprNode* BindScope(const StmtNode& s) {
    if (s.op == StmtOp::kFor) {
      Interval min = Bounds(s.exprs[0]), extent = Bounds(s.exprs[1]);
      Bind(s.var.get(), {min.lo, Clamp(b_.CreateSub(b_.CreateAdd(min.hi, extent.hi), One()))});
      return s.var.get();
    }
    if (s.op == StmtOp::kLet && s.var.dtype() == DType::kI64) {
      Bind(s.var.get(), Bounds(s.exprs[0]));
      return s.var.get();
    }
    if (s.op == StmtOp::kLet && s.var.dtype() == DType::kBool) {
      if (llvm::Value* v = at_fork_(s.exprs[0])) {
        flags_[s.var.get()] = v;
        memo_.clear();
        return s.var.get();
      }
    }
    return nullptr;
  }

  // The value before the fork of a bool condition: computable there, or a Let of one (a GEMM
  // task's "panels fastest" order, n < m); null otherwise.
  llvm::Value* FlagAtFork(const Expr& e) {
    if (e->op == ExprOp::kVar) {
      auto it = flags_.find(e.get());
      if (it != flags_.end()) return it->second;
    }
    return at_fork_(e);
  }

  // An upper bound of a loop extent in [1, kMaxExtent]; kUnknownExtent when nothing bounds it.
  llvm::Value* Extent(const Expr& e) {
    llvm::Value* hi = Bounds(e).hi;
    llvm::Value* clamped = Smin(Smax(hi, One()), b_.getInt64(kMaxExtent));
    return b_.CreateSelect(b_.CreateICmpSGE(hi, b_.getInt64(kUnboundedAbove)),
                           b_.getInt64(kUnknownExtent), clamped);
  }

  Interval Bounds(const Expr& e) {
    if (!e || e.dtype() != DType::kI64) return Unknown();
    auto it = memo_.find(e.get());
    if (it != memo_.end()) return it->second;
    Interval r = Unknown();
    if (llvm::Value* v = at_fork_(e)) {
      r = {Clamp(v), Clamp(v)};
    } else if (e->op == ExprOp::kVar) {
      auto var = ranges_.find(e.get());
      if (var != ranges_.end()) r = var->second;
    } else if (e->op == ExprOp::kDim && e->buffer->scope == BufferScope::kLocal) {
      llvm::Value* v = b_.getInt64(e->buffer->local_shape[e->int_value]);
      r = {v, v};
    } else if (e->op == ExprOp::kCheckIndex) {
      r = {b_.getInt64(0), Smax(b_.CreateSub(Bounds(e->args[1]).hi, One()), b_.getInt64(0))};
    } else {
      r = Arithmetic(*e);
    }
    memo_[e.get()] = r;
    return r;
  }

  // Bounds of an arithmetic node from its operands' bounds; Unknown for anything else.
  Interval Arithmetic(const ExprNode& n) {
    switch (n.op) {
      case ExprOp::kNeg: {
        Interval a = Bounds(n.args[0]);
        return {b_.CreateNeg(a.hi), b_.CreateNeg(a.lo)};
      }
      case ExprOp::kSelect: {
        Interval a = Bounds(n.args[1]), c = Bounds(n.args[2]);
        // A condition known at the fork picks its arm's bounds: a GEMM of one row group has
        // its tasks' row offset 0 and rows min(group, m), not the union of both orders.
        if (llvm::Value* flag = FlagAtFork(n.args[0])) {
          return {b_.CreateSelect(flag, a.lo, c.lo), b_.CreateSelect(flag, a.hi, c.hi)};
        }
        return {Smin(a.lo, c.lo), Smax(a.hi, c.hi)};
      }
      case ExprOp::kAdd:
      case ExprOp::kSub:
      case ExprOp::kMul:
      case ExprOp::kMin:
      case ExprOp::kMax:
      case ExprOp::kDiv:
      case ExprOp::kFloorDiv:
      case ExprOp::kMod:
      case ExprOp::kFloorMod:
        return BinaryBounds(n.op, Bounds(n.args[0]), Bounds(n.args[1]));
      default:
        return Unknown();
    }
  }

  Interval BinaryBounds(ExprOp op, Interval a, Interval c) {
    switch (op) {
      case ExprOp::kAdd:
        return {Clamp(b_.CreateAdd(a.lo, c.lo)), Clamp(b_.CreateAdd(a.hi, c.hi))};
      case ExprOp::kSub:
        return {Clamp(b_.CreateSub(a.lo, c.hi)), Clamp(b_.CreateSub(a.hi, c.lo))};
      case ExprOp::kMin:
        return {Smin(a.lo, c.lo), Smin(a.hi, c.hi)};
      case ExprOp::kMax:
        return {Smax(a.lo, c.lo), Smax(a.hi, c.hi)};
      case ExprOp::kMul:
        return Product(a, c);
      case ExprOp::kDiv:
      case ExprOp::kFloorDiv:
        return Quotient(a, c, op == ExprOp::kFloorDiv);
      default:
        return Remainder(a, c, op == ExprOp::kFloorMod);
    }
  }

  // Products of bounds up to 2^80 in double (exact below 2^53, clamped long before it matters).
  Interval Product(Interval a, Interval c) {
    llvm::Type* f64 = b_.getDoubleTy();
    llvm::Value* al = b_.CreateSIToFP(a.lo, f64);
    llvm::Value* ah = b_.CreateSIToFP(a.hi, f64);
    llvm::Value* cl = b_.CreateSIToFP(c.lo, f64);
    llvm::Value* ch = b_.CreateSIToFP(c.hi, f64);
    llvm::Value* p[] = {b_.CreateFMul(al, cl), b_.CreateFMul(al, ch), b_.CreateFMul(ah, cl),
                        b_.CreateFMul(ah, ch)};
    llvm::Value* lo = b_.CreateMinNum(b_.CreateMinNum(p[0], p[1]), b_.CreateMinNum(p[2], p[3]));
    llvm::Value* hi = b_.CreateMaxNum(b_.CreateMaxNum(p[0], p[1]), b_.CreateMaxNum(p[2], p[3]));
    llvm::Value* limit = llvm::ConstantFP::get(f64, static_cast<double>(kMaxWork));
    auto to_int = [&](llvm::Value* v) {
      v = b_.CreateMaxNum(b_.CreateMinNum(v, limit), b_.CreateFNeg(limit));
      return b_.CreateFPToSI(v, b_.getInt64Ty());
    };
    return {to_int(lo), to_int(hi)};
  }

  // Division by a divisor known positive: extremes at the corners (truncating division is
  // monotone in each operand there); floor division is at most one below truncation.
  Interval Quotient(Interval a, Interval c, bool floor) {
    llvm::Value* positive = b_.CreateICmpSGE(c.lo, One());
    llvm::Value* cl = Smax(c.lo, One());
    llvm::Value* ch = Smax(c.hi, One());
    llvm::Value* q[] = {b_.CreateSDiv(a.lo, cl), b_.CreateSDiv(a.lo, ch), b_.CreateSDiv(a.hi, cl),
                        b_.CreateSDiv(a.hi, ch)};
    llvm::Value* lo = Smin(Smin(q[0], q[1]), Smin(q[2], q[3]));
    llvm::Value* hi = Smax(Smax(q[0], q[1]), Smax(q[2], q[3]));
    if (floor) lo = b_.CreateSub(lo, One());
    return Known(positive, {lo, hi});
  }

  // Remainder by a divisor known positive: below the divisor in magnitude and, for C's
  // remainder, no larger in magnitude than the dividend; floor remainder is never negative.
  Interval Remainder(Interval a, Interval c, bool floor) {
    llvm::Value* positive = b_.CreateICmpSGE(c.lo, One());
    llvm::Value* m = b_.CreateSub(Smax(c.hi, One()), One());
    llvm::Value* zero = b_.getInt64(0);
    llvm::Value* nonnegative = b_.CreateICmpSGE(a.lo, zero);
    llvm::Value* hi = b_.CreateSelect(nonnegative, Smin(a.hi, m), m);
    if (floor) return Known(positive, {zero, hi});
    llvm::Value* lo = b_.CreateSelect(nonnegative, zero, Smax(b_.CreateNeg(m), a.lo));
    hi = b_.CreateSelect(b_.CreateICmpSGE(a.hi, zero), Smin(a.hi, m), zero);
    return Known(positive, {lo, hi});
  }

  Interval Known(llvm::Value* condition, Interval r) {
    Interval unknown = Unknown();
    return {b_.CreateSelect(condition, r.lo, unknown.lo),
            b_.CreateSelect(condition, r.hi, unknown.hi)};
  }
  Interval Unknown() { return {b_.getInt64(-kMaxWork), b_.getInt64(kMaxWork)}; }
  llvm::Value* Clamp(llvm::Value* v) {
    return Smin(Smax(v, b_.getInt64(-kMaxWork)), b_.getInt64(kMaxWork));
  }
  llvm::Value* One() { return b_.getInt64(1); }
  llvm::Value* Smin(llvm::Value* a, llvm::Value* c) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, c);
  }
  llvm::Value* Smax(llvm::Value* a, llvm::Value* c) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, c);
  }
  llvm::Value* Times(llvm::Value* a, llvm::Value* c) {
    return Smin(b_.CreateMul(a, c), b_.getInt64(kMaxWork));
  }
  llvm::Value* Plus(llvm::Value* a, llvm::Value* c) {
    return Smin(b_.CreateAdd(a, c), b_.getInt64(kMaxWork));
  }

  llvm::IRBuilder<>& b_;
  std::function<llvm::Value*(const Expr&)> at_fork_;
  std::unordered_map<const ExprNode*, Interval> ranges_;  // vars bound inside the body
  std::unordered_map<const ExprNode*, llvm::Value*> flags_;  // bool Lets known at the fork
  std::unordered_map<const ExprNode*, Interval> memo_;    // valid until the next (un)binding
};

}  // namespace

// An expression usable before the loop runs: no loads (the loop might not run, so a load could
// be out of bounds), no reductions or checks, and only vars and buffers already bound; else null.
llvm::Value* CodeGenerator::ValueBeforeLoop(const Expr& e) {
  UseCollector uses;
  uses.Expr(e);
  bool available = !uses.loads_or_loops;
  for (const ExprNode* v : uses.vars) available = available && env_.vars.count(v);
  for (const BufferNode* b : uses.buffers) available = available && env_.buffers.count(b);
  if (!available) return nullptr;
  StatusOr<llvm::Value*> value = EmitExpr(e);
  return value.ok() ? *value : nullptr;
}

// Run-time estimate of the element operations one iteration of the parallel loop `s` (running
// [begin, end)) performs, in [1, 2^40].
llvm::Value* CodeGenerator::RuntimeWork(const StmtNode& s, llvm::Value* begin, llvm::Value* end) {
  WorkEstimator estimator(b_, [this](const Expr& e) { return ValueBeforeLoop(e); });
  estimator.Bind(s.var.get(), {begin, b_.CreateSub(end, b_.getInt64(1))});
  return estimator.Work(s.body[0].get());
}

Status CodeGenerator::EmitParallelFor(const StmtNode& s, llvm::Value* begin, llvm::Value* end) {
  llvm::Value* grain = b_.CreateBinaryIntrinsic(
      llvm::Intrinsic::smax,
      b_.CreateSDiv(b_.getInt64(kMinWorkPerChunk), RuntimeWork(s, begin, end)), b_.getInt64(1));
  ASSIGN_OR_RETURN(auto outlined, OutlineLoopBody(s));
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::FunctionCallee parallel_for = module_.getOrInsertFunction(
      kParallelForSymbol, b_.getVoidTy(), i64, i64, i64, b_.getPtrTy(), b_.getPtrTy());
  b_.CreateCall(parallel_for, {begin, end, grain, outlined.first, outlined.second});
  return Status::Ok();
}

// A team loop: kiln_parallel_team runs the outlined body for one index per team thread.
Status CodeGenerator::EmitTeamFor(const StmtNode& s, llvm::Value* begin, llvm::Value* extent) {
  ASSIGN_OR_RETURN(auto outlined, OutlineLoopBody(s));
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::FunctionCallee team = module_.getOrInsertFunction(
      kParallelTeamSymbol, b_.getVoidTy(), i64, i64, b_.getPtrTy(), b_.getPtrTy());
  b_.CreateCall(team, {begin, extent, outlined.first, outlined.second});
  return Status::Ok();
}

StatusOr<std::pair<llvm::Function*, llvm::Value*>> CodeGenerator::OutlineLoopBody(
    const StmtNode& s) {
  UseCollector uses;
  uses.Stmt(s.body[0].get());
  // Captured values in a fixed order; constants (e.g. unit strides) stay constants in the body.
  std::vector<llvm::Value*> values;
  auto capture = [&](llvm::Value* v) {
    if (!llvm::isa<llvm::Constant>(v)) values.push_back(v);
  };
  for (const BufferNode* b : uses.buffers) {
    auto it = env_.buffers.find(b);
    if (it == env_.buffers.end()) continue;  // allocated inside the body
    capture(it->second.base);
    for (llvm::Value* v : it->second.shape) capture(v);
    for (llvm::Value* v : it->second.strides) capture(v);
  }
  for (const ExprNode* v : uses.vars) {
    auto it = env_.vars.find(v);
    if (it != env_.vars.end()) capture(it->second);
  }
  std::vector<llvm::Type*> types;
  for (llvm::Value* v : values) types.push_back(v->getType());
  llvm::StructType* ctx_type = llvm::StructType::get(ctx_, types);
  llvm::AllocaInst* ctx = EntryAlloca(ctx_type, 1, "par.ctx");
  for (size_t i = 0; i < values.size(); ++i) {
    b_.CreateStore(values[i], b_.CreateStructGEP(ctx_type, ctx, i));
  }
  ASSIGN_OR_RETURN(llvm::Function * body, EmitOutlinedBody(s, uses.buffers, uses.vars, ctx_type));
  return std::make_pair(body, static_cast<llvm::Value*>(ctx));
}

// `void body(i64 begin, i64 end, ptr ctx)`: reloads the captured values and runs iterations
// [begin, end) of the loop.
StatusOr<llvm::Function*> CodeGenerator::EmitOutlinedBody(
    const StmtNode& s, const std::vector<const BufferNode*>& buffers,
    const std::vector<const ExprNode*>& vars, llvm::StructType* ctx_type) {
  llvm::Type* i64 = b_.getInt64Ty();
  auto* type = llvm::FunctionType::get(b_.getVoidTy(), {i64, i64, b_.getPtrTy()}, false);
  llvm::Function* body =
      NewFunction(symbol_ + ".par" + std::to_string(outlined_++), type, /*internal=*/true);
  body->addParamAttr(2, llvm::Attribute::NoCapture);
  body->addParamAttr(2, llvm::Attribute::ReadOnly);
  llvm::Function* saved_fn = fn_;
  Env saved_env = std::move(env_);
  auto saved_ip = b_.saveIP();
  auto saved_groups = std::move(access_groups_);
  access_groups_.clear();
  fn_ = body;
  b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", body));
  env_ = ReloadCaptures(saved_env, buffers, vars, ctx_type, body->getArg(2));
  // Iterations are independent, so an innermost parallel loop may also be vectorized (a team
  // body runs one iteration and may hold a barrier: kept serial).
  ForKind kind = HasLoop(s.body[0].get()) || s.for_kind == ForKind::kTeam ? ForKind::kSerial
                                                                            : ForKind::kVectorized;
  Status status = EmitLoop(body->getArg(0), body->getArg(1), kind, false, s.var.name(),
                           [&](llvm::Value* index) {
                             env_.vars[s.var.get()] = index;
                             return EmitStmt(s.body[0].get());
                           });
  b_.CreateRetVoid();
  fn_ = saved_fn;
  env_ = std::move(saved_env);
  b_.restoreIP(saved_ip);
  access_groups_ = std::move(saved_groups);
  RETURN_IF_ERROR(status);
  return body;
}

// The environment of an outlined body: only what was captured (values of the caller's function
// must not leak in), loaded from `ctx` in the order EmitParallelFor stored them.
CodeGenerator::Env CodeGenerator::ReloadCaptures(const Env& outer,
                                                 const std::vector<const BufferNode*>& buffers,
                                                 const std::vector<const ExprNode*>& vars,
                                                 llvm::StructType* ctx_type, llvm::Value* ctx) {
  Env env;
  unsigned field = 0;
  auto reload = [&](llvm::Value*& v) {
    if (llvm::isa<llvm::Constant>(v)) return;
    llvm::Value* slot = b_.CreateStructGEP(ctx_type, ctx, field);
    v = b_.CreateLoad(ctx_type->getElementType(field++), slot);
  };
  for (const BufferNode* b : buffers) {
    auto it = outer.buffers.find(b);
    if (it == outer.buffers.end()) continue;
    BufferValue bv = it->second;
    reload(bv.base);
    for (llvm::Value*& v : bv.shape) reload(v);
    for (llvm::Value*& v : bv.strides) reload(v);
    env.buffers[b] = std::move(bv);
  }
  for (const ExprNode* v : vars) {
    auto it = outer.vars.find(v);
    if (it == outer.vars.end()) continue;
    env.vars[v] = it->second;
    reload(env.vars[v]);
  }
  return env;
}

}  // namespace kiln::jit
