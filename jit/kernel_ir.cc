// Kernel IR builders and type inference.
#include "jit/kernel_ir.h"

#include <limits>
#include <utility>

namespace kiln::jit {
namespace {

bool IsStorageFloat(DType t) { return t == DType::kF16 || t == DType::kBF16; }
bool IsComputeFloat(DType t) { return t == DType::kF32 || t == DType::kF64; }
bool IsNumeric(DType t) { return IsInteger(t) || IsComputeFloat(t); }

bool IsBinaryArith(ExprOp op) { return op >= ExprOp::kAdd && op <= ExprOp::kPow; }
bool IsCompare(ExprOp op) { return op >= ExprOp::kEq && op <= ExprOp::kGe; }
bool IsFloatOnlyUnary(ExprOp op) { return op >= ExprOp::kExp && op <= ExprOp::kRound; }

std::string Describe(DType a) { return DTypeShortName(a); }

Expr Make(ExprNode node) {
  std::string why;
  node.dtype = InferType(node, &why);
  return Expr(std::make_shared<const ExprNode>(std::move(node)));
}

Expr MakeOp(ExprOp op, std::vector<Expr> args) {
  ExprNode node;
  node.op = op;
  node.args = std::move(args);
  return Make(std::move(node));
}

DType InferBinary(const ExprNode& n, std::string* why) {
  DType a = n.args[0].dtype(), b = n.args[1].dtype();
  if (a != b) {
    *why = "operand dtypes differ: " + Describe(a) + " vs " + Describe(b);
    return DType::kInvalid;
  }
  if (n.op == ExprOp::kAnd || n.op == ExprOp::kOr) {
    if (a == DType::kBool || IsInteger(a)) return a;  // logical on bool, bitwise on integers
    *why = "needs bool or integer operands, got " + Describe(a);
    return DType::kInvalid;
  }
  if (IsCompare(n.op)) {
    bool ok = IsNumeric(a) || (a == DType::kBool && (n.op == ExprOp::kEq || n.op == ExprOp::kNe));
    if (ok) return DType::kBool;
  } else if (n.op == ExprOp::kPow) {
    if (IsComputeFloat(a)) return a;
  } else if (IsNumeric(a)) {
    return a;
  }
  *why = std::string(ExprOpName(n.op)) + " does not accept " + Describe(a);
  return DType::kInvalid;
}

DType InferUnary(const ExprNode& n, std::string* why) {
  DType a = n.args[0].dtype();
  if (n.op == ExprOp::kNot) {
    if (a == DType::kBool || IsInteger(a)) return a;
  } else if (n.op == ExprOp::kIsNan || n.op == ExprOp::kIsInf) {
    if (IsNumeric(a)) return DType::kBool;
  } else if (IsFloatOnlyUnary(n.op)) {
    if (IsComputeFloat(a)) return a;
  } else if (IsNumeric(a)) {  // neg, abs
    return a;
  }
  *why = std::string(ExprOpName(n.op)) + " does not accept " + Describe(a);
  return DType::kInvalid;
}

DType InferLoad(const ExprNode& n, std::string* why) {
  if (!n.buffer) {
    *why = "load without a buffer";
    return DType::kInvalid;
  }
  if (static_cast<int>(n.args.size()) != n.buffer->rank) {
    *why = "load of " + n.buffer->name + " has " + std::to_string(n.args.size()) +
           " indices for rank " + std::to_string(n.buffer->rank);
    return DType::kInvalid;
  }
  for (const Expr& index : n.args) {
    if (index.dtype() != DType::kI64) {
      *why = "index of " + n.buffer->name + " is " + Describe(index.dtype()) + ", not i64";
      return DType::kInvalid;
    }
  }
  return n.buffer->dtype;
}

DType InferReduce(const ExprNode& n, std::string* why) {
  if (n.axes.size() + 1 != n.args.size()) {
    *why = "reduce has " + std::to_string(n.axes.size()) + " axes but " +
           std::to_string(n.args.size() - 1) + " extents";
    return DType::kInvalid;
  }
  for (size_t i = 0; i < n.axes.size(); ++i) {
    if (!n.axes[i] || n.axes[i].dtype() != DType::kI64 || n.args[i + 1].dtype() != DType::kI64) {
      *why = "reduce axis " + std::to_string(i) + " needs an i64 var and extent";
      return DType::kInvalid;
    }
  }
  DType body = n.args[0].dtype();
  if (!IsNumeric(body)) {
    *why =
        std::string("reduce ") + ReduceOpName(n.reduce_op) + " does not accept " + Describe(body);
    return DType::kInvalid;
  }
  bool arg = n.reduce_op == ReduceOp::kArgMax || n.reduce_op == ReduceOp::kArgMin;
  return arg ? DType::kI64 : body;
}

DType InferLeaf(const ExprNode& n, std::string* why) {
  switch (n.op) {
    case ExprOp::kIntImm:
      if (IsInteger(n.dtype) || n.dtype == DType::kBool) return n.dtype;
      *why = "integer constant of dtype " + Describe(n.dtype);
      return DType::kInvalid;
    case ExprOp::kFloatImm:
      if (IsFloat(n.dtype)) return n.dtype;
      *why = "float constant of dtype " + Describe(n.dtype);
      return DType::kInvalid;
    case ExprOp::kVar:
      if (IsValidDType(static_cast<uint8_t>(n.dtype))) return n.dtype;
      *why = "var " + n.name + " has no dtype";
      return DType::kInvalid;
    case ExprOp::kDim:
      if (n.buffer && n.int_value >= 0 && n.int_value < n.buffer->rank) return DType::kI64;
      *why = "dim " + std::to_string(n.int_value) + " out of range for " +
             (n.buffer ? n.buffer->name + " of rank " + std::to_string(n.buffer->rank)
                       : std::string("no buffer"));
      return DType::kInvalid;
    default:
      return InferLoad(n, why);
  }
}

size_t ExpectedArgs(ExprOp op) {
  if (op <= ExprOp::kDim || op >= ExprOp::kTeamSize) return 0;
  if (op == ExprOp::kNot || (op >= ExprOp::kNeg && op <= ExprOp::kIsInf) || op == ExprOp::kCast) {
    return 1;
  }
  if (op == ExprOp::kSelect || op == ExprOp::kMulAdd) return 3;
  return 2;  // binary ops, comparisons and kCheckIndex
}

}  // namespace

DType Expr::dtype() const { return node_ ? node_->dtype : DType::kInvalid; }

Var::Var(std::string name, DType dtype) {
  ExprNode node;
  node.op = ExprOp::kVar;
  node.dtype = dtype;
  node.name = std::move(name);
  expr_ = Expr(std::make_shared<const ExprNode>(std::move(node)));
}

const std::string& Var::name() const {
  static const std::string* empty = new std::string();
  return expr_ ? expr_->name : *empty;
}

Buffer Buffer::Param(std::string name, DType dtype, int rank, bool contiguous) {
  Buffer b;
  b.node_ = std::make_shared<const BufferNode>(
      BufferNode{std::move(name), dtype, rank, BufferScope::kParam, contiguous, {}});
  return b;
}

Buffer Buffer::Local(std::string name, DType dtype, std::vector<int64_t> shape) {
  Buffer b;
  int rank = static_cast<int>(shape.size());
  b.node_ = std::make_shared<const BufferNode>(
      BufferNode{std::move(name), dtype, rank, BufferScope::kLocal, true, std::move(shape)});
  return b;
}

DType InferType(const ExprNode& n, std::string* why) {
  if (n.op > ExprOp::kTeamBarrier || n.reduce_op > ReduceOp::kArgMin) {
    *why = "unknown operation " + std::to_string(static_cast<int>(n.op));
    return DType::kInvalid;
  }
  bool in_range_check = n.op == ExprOp::kCheckIndex && n.args.size() == 3;  // CheckInRange
  if (n.op != ExprOp::kLoad && n.op != ExprOp::kReduce && !in_range_check &&
      n.args.size() != ExpectedArgs(n.op)) {
    *why = std::string(ExprOpName(n.op)) + " has " + std::to_string(n.args.size()) + " operands";
    return DType::kInvalid;
  }
  for (const Expr& arg : n.args) {
    if (!arg || arg.dtype() == DType::kInvalid) {
      *why = std::string(ExprOpName(n.op)) + " has an invalid operand";
      return DType::kInvalid;
    }
  }
  if (n.op <= ExprOp::kDim) return InferLeaf(n, why);
  if (IsBinaryArith(n.op) || IsCompare(n.op) || n.op == ExprOp::kAnd || n.op == ExprOp::kOr) {
    return InferBinary(n, why);
  }
  if (n.op == ExprOp::kSelect) {
    if (n.args[0].dtype() != DType::kBool) {
      *why = "select condition is " + Describe(n.args[0].dtype()) + ", not bool";
    } else if (n.args[1].dtype() != n.args[2].dtype()) {
      *why = "select arms differ: " + Describe(n.args[1].dtype()) + " vs " +
             Describe(n.args[2].dtype());
    } else {
      return n.args[1].dtype();
    }
    return DType::kInvalid;
  }
  if (n.op == ExprOp::kMulAdd) {
    DType t = n.args[0].dtype();
    if (IsNumeric(t) && n.args[1].dtype() == t && n.args[2].dtype() == t) return t;
    *why = "muladd needs three operands of one numeric dtype";
    return DType::kInvalid;
  }
  if (n.op == ExprOp::kCast) {
    if (IsValidDType(static_cast<uint8_t>(n.dtype))) return n.dtype;
    *why = "cast to an invalid dtype";
    return DType::kInvalid;
  }
  if (n.op == ExprOp::kReduce) return InferReduce(n, why);
  if (n.op == ExprOp::kTeamSize) return DType::kI64;
  if (n.op == ExprOp::kTeamBarrier) return DType::kBool;
  if (n.op == ExprOp::kCheckIndex) {
    bool i64 = true;
    for (const Expr& arg : n.args) i64 = i64 && arg.dtype() == DType::kI64;
    if (i64) return DType::kI64;
    *why = "check_index needs an i64 index, bound (and position)";
    return DType::kInvalid;
  }
  return InferUnary(n, why);
}

Expr IntImm(int64_t value, DType dtype) {
  ExprNode node;
  node.op = ExprOp::kIntImm;
  node.dtype = dtype;
  node.int_value = dtype == DType::kBool ? (value != 0) : value;
  return Make(std::move(node));
}

Expr FloatImm(double value, DType dtype) {
  ExprNode node;
  node.op = ExprOp::kFloatImm;
  node.dtype = dtype;
  node.float_value = value;
  return Make(std::move(node));
}

Expr Const(DType dtype, double value) {
  if (IsFloat(dtype)) return FloatImm(value, dtype);
  if (IsUnsignedInteger(dtype) && value >= 0x1p63) {
    return IntImm(static_cast<int64_t>(static_cast<uint64_t>(value)), dtype);
  }
  return IntImm(static_cast<int64_t>(value), dtype);
}

Expr Lowest(DType dtype) {
  if (IsFloat(dtype)) return FloatImm(-std::numeric_limits<double>::infinity(), dtype);
  if (IsUnsignedInteger(dtype) || dtype == DType::kBool) return IntImm(0, dtype);
  return IntImm(std::numeric_limits<int64_t>::min() >> (64 - 8 * DTypeSize(dtype)), dtype);
}

Expr Highest(DType dtype) {
  if (IsFloat(dtype)) return FloatImm(std::numeric_limits<double>::infinity(), dtype);
  if (dtype == DType::kBool) return IntImm(1, dtype);
  int64_t signed_max = std::numeric_limits<int64_t>::max() >> (64 - 8 * DTypeSize(dtype));
  // An unsigned type's all-ones bits: 2 * signed max + 1 (-1 for u64, whose IntImm wraps).
  return IntImm(IsUnsignedInteger(dtype)
                    ? static_cast<int64_t>(2 * static_cast<uint64_t>(signed_max) + 1)
                    : signed_max,
                dtype);
}

Expr Load(const Buffer& buffer, std::vector<Expr> indices) {
  ExprNode node;
  node.op = ExprOp::kLoad;
  node.buffer = buffer;
  node.args = std::move(indices);
  return Make(std::move(node));
}

Expr DimOf(const Buffer& buffer, int axis) {
  ExprNode node;
  node.op = ExprOp::kDim;
  node.buffer = buffer;
  node.int_value = axis;
  return Make(std::move(node));
}

Expr Widen(Expr x) {
  if (x && IsStorageFloat(x.dtype())) return Cast(DType::kF32, std::move(x));
  return x;
}

Expr Binary(ExprOp op, Expr a, Expr b) {
  return MakeOp(op, {Widen(std::move(a)), Widen(std::move(b))});
}

Expr Unary(ExprOp op, Expr x) { return MakeOp(op, {Widen(std::move(x))}); }

Expr Add(Expr a, Expr b) { return Binary(ExprOp::kAdd, std::move(a), std::move(b)); }
Expr Sub(Expr a, Expr b) { return Binary(ExprOp::kSub, std::move(a), std::move(b)); }
Expr Mul(Expr a, Expr b) { return Binary(ExprOp::kMul, std::move(a), std::move(b)); }
Expr Div(Expr a, Expr b) { return Binary(ExprOp::kDiv, std::move(a), std::move(b)); }
Expr Mod(Expr a, Expr b) { return Binary(ExprOp::kMod, std::move(a), std::move(b)); }
Expr FloorDiv(Expr a, Expr b) { return Binary(ExprOp::kFloorDiv, std::move(a), std::move(b)); }
Expr FloorMod(Expr a, Expr b) { return Binary(ExprOp::kFloorMod, std::move(a), std::move(b)); }
Expr Min(Expr a, Expr b) { return Binary(ExprOp::kMin, std::move(a), std::move(b)); }
Expr Max(Expr a, Expr b) { return Binary(ExprOp::kMax, std::move(a), std::move(b)); }
Expr Pow(Expr a, Expr b) { return Binary(ExprOp::kPow, std::move(a), std::move(b)); }
Expr Eq(Expr a, Expr b) { return Binary(ExprOp::kEq, std::move(a), std::move(b)); }
Expr Ne(Expr a, Expr b) { return Binary(ExprOp::kNe, std::move(a), std::move(b)); }
Expr Lt(Expr a, Expr b) { return Binary(ExprOp::kLt, std::move(a), std::move(b)); }
Expr Le(Expr a, Expr b) { return Binary(ExprOp::kLe, std::move(a), std::move(b)); }
Expr Gt(Expr a, Expr b) { return Binary(ExprOp::kGt, std::move(a), std::move(b)); }
Expr Ge(Expr a, Expr b) { return Binary(ExprOp::kGe, std::move(a), std::move(b)); }
Expr And(Expr a, Expr b) { return MakeOp(ExprOp::kAnd, {std::move(a), std::move(b)}); }
Expr Or(Expr a, Expr b) { return MakeOp(ExprOp::kOr, {std::move(a), std::move(b)}); }
Expr Not(Expr a) { return MakeOp(ExprOp::kNot, {std::move(a)}); }

Expr Select(Expr cond, Expr a, Expr b) {
  // Storage floats pass through unwidened when both arms agree (select is a bit copy).
  if (a.dtype() != b.dtype()) {
    a = Widen(std::move(a));
    b = Widen(std::move(b));
  }
  return MakeOp(ExprOp::kSelect, {std::move(cond), std::move(a), std::move(b)});
}

Expr MulAdd(Expr a, Expr b, Expr c) {
  return MakeOp(ExprOp::kMulAdd, {Widen(std::move(a)), Widen(std::move(b)), Widen(std::move(c))});
}

Expr Cast(DType dtype, Expr x) {
  if (x && x.dtype() == dtype) return x;
  ExprNode node;
  node.op = ExprOp::kCast;
  node.dtype = dtype;
  node.args = {std::move(x)};
  return Make(std::move(node));
}

Expr CheckIndex(Expr index, Expr bound, std::string site) {
  ExprNode node;
  node.op = ExprOp::kCheckIndex;
  node.args = {std::move(index), std::move(bound)};
  node.name = std::move(site);
  return Make(std::move(node));
}

Expr CheckInRange(Expr value, Expr bound, Expr position, std::string site) {
  ExprNode node;
  node.op = ExprOp::kCheckIndex;
  node.args = {std::move(value), std::move(bound), std::move(position)};
  node.name = std::move(site);
  return Make(std::move(node));
}

Expr TeamSize() {
  ExprNode node;
  node.op = ExprOp::kTeamSize;
  return Make(std::move(node));
}

Expr TeamBarrier() {
  ExprNode node;
  node.op = ExprOp::kTeamBarrier;
  return Make(std::move(node));
}

Expr Reduce(ReduceOp op, std::vector<IterVar> axes, Expr body) {
  ExprNode node;
  node.op = ExprOp::kReduce;
  node.reduce_op = op;
  node.args.push_back(Widen(std::move(body)));
  for (IterVar& axis : axes) {
    node.axes.push_back(std::move(axis.var));
    node.args.push_back(std::move(axis.extent));
  }
  return Make(std::move(node));
}

Expr ConstLike(const Expr& like, double value) {
  DType t = like.dtype();
  if (IsStorageFloat(t)) t = DType::kF32;
  return Const(t, value);
}

Expr IntConstLike(const Expr& like, int64_t value) {
  DType t = like.dtype();
  if (IsStorageFloat(t)) t = DType::kF32;
  if (IsFloat(t)) return FloatImm(static_cast<double>(value), t);
  return IntImm(value, t);
}

Expr operator+(Expr a, Expr b) { return Add(std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return Sub(std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return Mul(std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return Div(std::move(a), std::move(b)); }
Expr operator-(Expr a) { return Neg(std::move(a)); }

namespace {

Stmt MakeStmt(StmtNode node) { return Stmt(std::make_shared<const StmtNode>(std::move(node))); }

}  // namespace

Stmt For(Var var, Expr extent, ForKind kind, Stmt body) {
  return For(std::move(var), IntImm(0), std::move(extent), kind, std::move(body));
}

Stmt For(Var var, Expr min, Expr extent, ForKind kind, Stmt body) {
  StmtNode node;
  node.op = StmtOp::kFor;
  node.for_kind = kind;
  node.var = std::move(var);
  node.exprs = {std::move(min), std::move(extent)};
  node.body = {body.node()};
  return MakeStmt(std::move(node));
}

Stmt Store(const Buffer& buffer, std::vector<Expr> indices, Expr value) {
  StmtNode node;
  node.op = StmtOp::kStore;
  node.buffer = buffer;
  node.exprs = std::move(indices);
  node.exprs.push_back(std::move(value));
  return MakeStmt(std::move(node));
}

Stmt Let(Var var, Expr value, Stmt body) {
  StmtNode node;
  node.op = StmtOp::kLet;
  node.var = std::move(var);
  node.exprs = {std::move(value)};
  node.body = {body.node()};
  return MakeStmt(std::move(node));
}

Stmt If(Expr cond, Stmt then_body, Stmt else_body) {
  StmtNode node;
  node.op = StmtOp::kIf;
  node.exprs = {std::move(cond)};
  node.body = {then_body.node()};
  if (else_body) node.body.push_back(else_body.node());
  return MakeStmt(std::move(node));
}

Stmt Allocate(const Buffer& buffer, Stmt body) {
  StmtNode node;
  node.op = StmtOp::kAllocate;
  node.buffer = buffer;
  node.body = {body.node()};
  return MakeStmt(std::move(node));
}

Stmt Seq(std::vector<Stmt> stmts) {
  StmtNode node;
  node.op = StmtOp::kSeq;
  for (Stmt& s : stmts) node.body.push_back(s.node());
  return MakeStmt(std::move(node));
}

const char* ExprOpName(ExprOp op) {
  static constexpr const char* kNames[] = {
      "int",  "float",    "var",      "load",  "dim",     "add",    "sub",  "mul",   "div",
      "mod",  "floordiv", "floormod", "min",   "max",     "pow",    "eq",   "ne",    "lt",
      "le",   "gt",       "ge",       "and",   "or",      "not",    "neg",  "abs",   "exp",
      "log",  "sqrt",     "rsqrt",    "tanh",  "sigmoid", "erf",    "sin",  "cos",   "floor",
      "ceil", "round",    "isnan",    "isinf", "select",  "muladd", "cast", "reduce",
      "check_index", "team_size", "team_barrier"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == static_cast<size_t>(ExprOp::kTeamBarrier) + 1);
  auto i = static_cast<size_t>(op);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "?";
}

const char* ReduceOpName(ReduceOp op) {
  static constexpr const char* kNames[] = {"sum", "prod", "max", "min", "argmax", "argmin"};
  auto i = static_cast<size_t>(op);
  return i < 6 ? kNames[i] : "?";
}

const char* ForKindName(ForKind kind) {
  static constexpr const char* kNames[] = {"serial", "parallel", "vectorized", "unrolled", "team"};
  auto i = static_cast<size_t>(kind);
  return i < 5 ? kNames[i] : "?";
}

}  // namespace kiln::jit
