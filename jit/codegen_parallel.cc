// Code generation for parallel loops: body outlining, context capture and the run-time grain.
#include <algorithm>
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
    if (e->op == ExprOp::kLoad || e->op == ExprOp::kReduce || e->op == ExprOp::kCheckIndex) {
      loads_or_loops = true;  // a check must not fire for a loop that never runs
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

}  // namespace

// An extent usable before the loop runs: no loads (the loop might not run, so a load could be
// out of bounds), no reductions, and only vars and buffers already bound; else a guess.
llvm::Value* CodeGenerator::ExtentBeforeLoop(const Expr& extent) {
  UseCollector uses;
  uses.Expr(extent);
  bool available = !uses.loads_or_loops;
  for (const ExprNode* v : uses.vars) available = available && env_.vars.count(v);
  for (const BufferNode* b : uses.buffers) available = available && env_.buffers.count(b);
  StatusOr<llvm::Value*> value = available ? EmitExpr(extent) : StatusOr<llvm::Value*>(nullptr);
  if (!value.ok() || !*value) return b_.getInt64(kUnknownExtent);
  llvm::Value* v = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, *value, b_.getInt64(1));
  return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, v, b_.getInt64(kMaxExtent));
}

// Run-time estimate of the element operations one iteration of `s` performs, in [1, 2^40].
llvm::Value* CodeGenerator::RuntimeWork(const StmtNode* s) {
  auto times = [&](llvm::Value* a, llvm::Value* b) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateMul(a, b),
                                    b_.getInt64(kMaxWork));
  };
  auto plus = [&](llvm::Value* a, llvm::Value* b) {
    return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, b_.CreateAdd(a, b),
                                    b_.getInt64(kMaxWork));
  };
  llvm::Value* work = b_.getInt64(s->op == StmtOp::kSeq ? 0 : 1);
  if (s->op == StmtOp::kStore) {
    std::vector<const ExprNode*> reduces;
    for (const Expr& e : s->exprs) CollectReduces(e, &reduces);
    for (const ExprNode* r : reduces) {
      llvm::Value* count = b_.getInt64(1);
      for (size_t i = 1; i < r->args.size(); ++i)
        count = times(count, ExtentBeforeLoop(r->args[i]));
      work = plus(work, count);
    }
  }
  for (const auto& child : s->body) {
    llvm::Value* w = RuntimeWork(child.get());
    work = s->op == StmtOp::kSeq ? plus(work, w)
                                 : b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, work, w);
  }
  if (s->op == StmtOp::kFor) work = times(work, ExtentBeforeLoop(s->exprs[1]));
  return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, work, b_.getInt64(1));
}

Status CodeGenerator::EmitParallelFor(const StmtNode& s, llvm::Value* begin, llvm::Value* end) {
  llvm::Value* grain = b_.CreateBinaryIntrinsic(
      llvm::Intrinsic::smax,
      b_.CreateSDiv(b_.getInt64(kMinWorkPerChunk), RuntimeWork(s.body[0].get())), b_.getInt64(1));
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
  llvm::Type* i64 = b_.getInt64Ty();
  llvm::FunctionCallee parallel_for = module_.getOrInsertFunction(
      kParallelForSymbol, b_.getVoidTy(), i64, i64, i64, b_.getPtrTy(), b_.getPtrTy());
  b_.CreateCall(parallel_for, {begin, end, grain, body, ctx});
  return Status::Ok();
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
  // Iterations are independent, so an innermost parallel loop may also be vectorized.
  ForKind kind = HasLoop(s.body[0].get()) ? ForKind::kSerial : ForKind::kVectorized;
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
