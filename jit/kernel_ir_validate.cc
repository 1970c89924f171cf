// ValidateKernel: type, scope and size checks run before a kernel is generated.
#include <string>
#include <unordered_set>
#include <vector>

#include "jit/kernel_ir.h"

namespace kiln::jit {
namespace {

class Validator {
 public:
  explicit Validator(const Kernel& kernel) : kernel_(kernel) {}

  Status Run() {
    RETURN_IF_ERROR(CheckName("the kernel", kernel_.name));
    RETURN_IF_ERROR(CheckSignature());
    if (!kernel_.body) return Fail("kernel has no body");
    return CheckStmt(kernel_.body.get());
  }

 private:
  Status Fail(const std::string& what) const {
    std::string where;
    for (const std::string& p : path_) where += (where.empty() ? "" : "/") + p;
    if (!where.empty()) where += ": ";
    std::string message = "kernel '" + kernel_.name + "': " + where + what;
    // A NUL in a name (rejected by CheckName) would cut the message short where it is printed.
    for (size_t i = message.find('\0'); i != std::string::npos; i = message.find('\0', i)) {
      message.replace(i, 1, "\\0");
    }
    return InvalidArgument(message);
  }

  // Names become LLVM value, module and metadata names, and a NUL byte in one crashes LLVM
  // (the optimized compile's orc::cloneToNewContext), so payloads must not carry one.
  Status CheckName(const std::string& what, const std::string& name) const {
    size_t nul = name.find('\0');
    if (nul == std::string::npos) return Status::Ok();
    return Fail(what + "'s name has a NUL byte (at " + std::to_string(nul) + ")");
  }

  Status CheckSignature() {
    for (size_t i = 0; i < kernel_.buffers.size(); ++i) {
      const Buffer& b = kernel_.buffers[i];
      std::string at = "buffers[" + std::to_string(i) + "]";
      if (!b) return Fail(at + " is null");
      RETURN_IF_ERROR(CheckName(at, b->name));
      if (b->scope != BufferScope::kParam) return Fail(at + " (" + b->name + ") is not a param");
      if (!IsValidDType(static_cast<uint8_t>(b->dtype))) return Fail(at + " has no dtype");
      if (b->rank < 0 || b->rank > kMaxRank) {
        return Fail(at + " (" + b->name + ") has rank " + std::to_string(b->rank));
      }
      if (!buffers_.insert(b.get()).second) return Fail(at + " (" + b->name + ") is listed twice");
    }
    for (size_t i = 0; i < kernel_.dims.size(); ++i) {
      const Var& v = kernel_.dims[i];
      std::string at = "dims[" + std::to_string(i) + "]";
      if (!v) return Fail(at + " is null");
      RETURN_IF_ERROR(CheckName(at, v.name()));
      if (v.dtype() != DType::kI64) return Fail(at + " (" + v.name() + ") is not i64");
      if (!vars_.insert(v.get()).second) return Fail(at + " (" + v.name() + ") is listed twice");
    }
    return Status::Ok();
  }

  Status Bind(const Var& var) {
    if (!var) return Fail("binding of a null var");
    RETURN_IF_ERROR(CheckName("a bound var", var.name()));
    if (!vars_.insert(var.get()).second) return Fail("var " + var.name() + " is bound twice");
    return Status::Ok();
  }

  Status CheckBuffer(const Buffer& b) {
    if (!b) return Fail("null buffer");
    if (!buffers_.count(b.get())) return Fail("buffer " + b->name + " is not in scope");
    return Status::Ok();
  }

  // Counts nesting for the duration of one CheckExpr/CheckStmt call.
  class DepthGuard {
   public:
    explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
    ~DepthGuard() { --*depth_; }

   private:
    int* depth_;
  };

  Status CheckExpr(const Expr& e) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxDepth) return Fail("nested deeper than " + std::to_string(kMaxDepth));
    if (!e) return Fail("null expression");
    const ExprNode& n = *e;
    if (n.op == ExprOp::kVar && !vars_.count(e.get())) {
      return Fail("var " + n.name + " is not in scope");
    }
    if (n.op == ExprOp::kLoad || n.op == ExprOp::kDim) RETURN_IF_ERROR(CheckBuffer(n.buffer));
    if (n.op == ExprOp::kReduce) return CheckReduce(e);
    if ((n.op == ExprOp::kTeamSize || n.op == ExprOp::kTeamBarrier) && !in_team_) {
      return Fail(std::string(ExprOpName(n.op)) +
                  " outside a team loop's body (or inside a parallel loop within it)");
    }
    for (const Expr& arg : n.args) RETURN_IF_ERROR(CheckExpr(arg));
    return CheckType(n);
  }

  Status CheckType(const ExprNode& n) {
    std::string why;
    DType t = InferType(n, &why);
    if (t == DType::kInvalid) return Fail(std::string(ExprOpName(n.op)) + ": " + why);
    if (t != n.dtype) {
      return Fail(std::string(ExprOpName(n.op)) + " records dtype " + DTypeShortName(n.dtype) +
                  " but its operands give " + DTypeShortName(t));
    }
    return Status::Ok();
  }

  Status CheckReduce(const Expr& e) {
    const ExprNode& n = *e;
    if (n.reduce_op > ReduceOp::kArgMin) return Fail("unknown reduction");
    if (n.args.empty() || n.args.size() != n.axes.size() + 1) {
      // (a malformed payload: the body and one extent per axis are required)
      return Fail("reduce has " + std::to_string(n.args.size()) + " operands for " +
                  std::to_string(n.axes.size()) + " axes");
    }
    path_.push_back(std::string("reduce ") + ReduceOpName(n.reduce_op));
    for (size_t i = 1; i < n.args.size(); ++i) RETURN_IF_ERROR(CheckExpr(n.args[i]));
    for (const Var& axis : n.axes) RETURN_IF_ERROR(Bind(axis));
    RETURN_IF_ERROR(CheckExpr(n.args[0]));
    for (const Var& axis : n.axes) vars_.erase(axis.get());
    RETURN_IF_ERROR(CheckType(n));
    path_.pop_back();
    return Status::Ok();
  }

  Status CheckI64(const Expr& e, const char* what) {
    RETURN_IF_ERROR(CheckExpr(e));
    if (e.dtype() != DType::kI64) return Fail(std::string(what) + " is not i64");
    return Status::Ok();
  }

  Status CheckBody(const StmtNode& s, size_t i) {
    if (i >= s.body.size() || !s.body[i]) return Fail("missing body");
    return CheckStmt(s.body[i].get());
  }

  Status CheckStmt(const StmtNode* s) {
    DepthGuard guard(&depth_);
    if (depth_ > kMaxDepth) return Fail("nested deeper than " + std::to_string(kMaxDepth));
    if (!s) return Fail("null statement");
    switch (s->op) {
      case StmtOp::kFor:
        return CheckFor(*s);
      case StmtOp::kStore:
        return CheckStore(*s);
      case StmtOp::kLet:
        return CheckLet(*s);
      case StmtOp::kIf:
        return CheckIf(*s);
      case StmtOp::kAllocate:
        return CheckAllocate(*s);
      case StmtOp::kSeq:
        return CheckSeq(*s);
    }
    return Fail("unknown statement");
  }

  Status CheckFor(const StmtNode& s) {
    path_.push_back(std::string(ForKindName(s.for_kind)) + " for " + s.var.name());
    if (s.exprs.size() != 2) return Fail("for needs min and extent");
    RETURN_IF_ERROR(CheckI64(s.exprs[0], "loop min"));
    RETURN_IF_ERROR(CheckI64(s.exprs[1], "loop extent"));
    if (s.for_kind > ForKind::kTeam) return Fail("unknown loop kind");
    RETURN_IF_ERROR(Bind(s.var));
    if (s.var.dtype() != DType::kI64) return Fail("loop var is not i64");
    // A team's size and barrier belong to the team's own threads: a parallel loop inside it
    // runs its iterations elsewhere (or in any order), so they are out of reach there.
    const bool outer_team = in_team_;
    if (s.for_kind == ForKind::kTeam) in_team_ = true;
    if (s.for_kind == ForKind::kParallel) in_team_ = false;
    RETURN_IF_ERROR(CheckBody(s, 0));
    in_team_ = outer_team;
    vars_.erase(s.var.get());
    path_.pop_back();
    return Status::Ok();
  }

  Status CheckStore(const StmtNode& s) {
    path_.push_back("store " + (s.buffer ? s.buffer->name : std::string("?")));
    RETURN_IF_ERROR(CheckBuffer(s.buffer));
    if (static_cast<int>(s.exprs.size()) != s.buffer->rank + 1) {
      return Fail(std::to_string(static_cast<int>(s.exprs.size()) - 1) + " indices for rank " +
                  std::to_string(s.buffer->rank));
    }
    for (size_t i = 0; i + 1 < s.exprs.size(); ++i) RETURN_IF_ERROR(CheckI64(s.exprs[i], "index"));
    const Expr& value = s.exprs.back();
    RETURN_IF_ERROR(CheckExpr(value));
    if (value.dtype() != s.buffer->dtype) {
      return Fail(std::string("value dtype ") + DTypeShortName(value.dtype()) +
                  " != buffer dtype " + DTypeShortName(s.buffer->dtype));
    }
    path_.pop_back();
    return Status::Ok();
  }

  Status CheckLet(const StmtNode& s) {
    path_.push_back("let " + s.var.name());
    if (s.exprs.size() != 1) return Fail("let needs one value");
    RETURN_IF_ERROR(CheckExpr(s.exprs[0]));
    if (s.exprs[0].dtype() != s.var.dtype()) {
      return Fail(std::string("value dtype ") + DTypeShortName(s.exprs[0].dtype()) +
                  " != var dtype " + DTypeShortName(s.var.dtype()));
    }
    RETURN_IF_ERROR(Bind(s.var));
    RETURN_IF_ERROR(CheckBody(s, 0));
    vars_.erase(s.var.get());
    path_.pop_back();
    return Status::Ok();
  }

  Status CheckIf(const StmtNode& s) {
    path_.push_back("if");
    if (s.exprs.size() != 1) return Fail("if needs one condition");
    RETURN_IF_ERROR(CheckExpr(s.exprs[0]));
    if (s.exprs[0].dtype() != DType::kBool) return Fail("condition is not bool");
    if (s.body.empty() || s.body.size() > 2) return Fail("if needs a then and optional else");
    for (size_t i = 0; i < s.body.size(); ++i) RETURN_IF_ERROR(CheckBody(s, i));
    path_.pop_back();
    return Status::Ok();
  }

  Status CheckAllocate(const StmtNode& s) {
    if (!s.buffer) return Fail("allocate of a null buffer");
    const BufferNode& b = *s.buffer;
    RETURN_IF_ERROR(CheckName("a local buffer", b.name));
    path_.push_back("allocate " + b.name);
    if (b.scope != BufferScope::kLocal) return Fail("allocate of a param buffer");
    if (!IsValidDType(static_cast<uint8_t>(b.dtype))) return Fail("local buffer has no dtype");
    int64_t bytes = static_cast<int64_t>(DTypeSize(b.dtype));
    for (int64_t d : b.local_shape) {
      if (d <= 0 || d > kMaxLocalBytes) return Fail("dim " + std::to_string(d) + " not positive");
      bytes *= d;
      if (bytes > kMaxLocalBytes) {
        return Fail("needs more than " + std::to_string(kMaxLocalBytes) + " bytes");
      }
    }
    if (!buffers_.insert(s.buffer.get()).second) return Fail("buffer allocated twice");
    RETURN_IF_ERROR(CheckBody(s, 0));
    buffers_.erase(s.buffer.get());
    path_.pop_back();
    return Status::Ok();
  }

  Status CheckSeq(const StmtNode& s) {
    for (size_t i = 0; i < s.body.size(); ++i) {
      path_.push_back("seq[" + std::to_string(i) + "]");
      RETURN_IF_ERROR(CheckBody(s, i));
      path_.pop_back();
    }
    return Status::Ok();
  }

  const Kernel& kernel_;
  std::unordered_set<const ExprNode*> vars_;
  std::unordered_set<const BufferNode*> buffers_;
  std::vector<std::string> path_;
  int depth_ = 0;
  bool in_team_ = false;  // inside a kTeam loop's body, no kParallel loop in between
};

}  // namespace

Status ValidateKernel(const Kernel& kernel) { return Validator(kernel).Run(); }

}  // namespace kiln::jit
