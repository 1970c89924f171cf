// Kernel IR: immutable loop-nest tensor programs (buffers, loops, loads, stores, scalar math).
#ifndef KILN_JIT_KERNEL_IR_H_
#define KILN_JIT_KERNEL_IR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace kiln::jit {

// Semantics, shared by the code generator and the tests:
// - Integer arithmetic wraps (two's complement). Integer division or remainder by zero gives 0;
//   INT_MIN / -1 gives INT_MIN. Div truncates toward zero, Mod is C's remainder (sign of the
//   dividend); FloorDiv/FloorMod round toward negative infinity (Python/numpy).
// - Float Mod is C's fmod; float FloorMod has the sign of the divisor; float FloorDiv is
//   floor(a / b).
// - f16 and bf16 are storage types: loads, stores, casts and select carry them, every other op
//   computes in f32 (the builders insert the widening casts). Narrowing rounds to nearest even.
// - Float -> integer casts saturate (NaN -> 0); any -> bool is `x != 0` (NaN -> true).
// - Float Min/Max propagate NaN; Round is half to even. Comparisons are ordered except Ne.
// - Select evaluates both arms: a Load in either arm must be in bounds.
// - Reductions: float sum/prod may be reassociated (vectorized), so they match a sequential sum
//   to within n ulps, not bit for bit.

struct ExprNode;
struct StmtNode;
struct BufferNode;

/// A handle to an immutable expression node. Cheap to copy (a shared_ptr); thread-safe to share.
/// A default-constructed Expr is null; builders never return null.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}

  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  const ExprNode& operator*() const { return *node_; }
  explicit operator bool() const { return node_ != nullptr; }
  /// The result type; kInvalid when the operands do not type-check (ValidateKernel says why).
  DType dtype() const;

 private:
  std::shared_ptr<const ExprNode> node_;
};

/// A named scalar variable (loop index, let binding, reduction axis or symbolic dim). Identity is
/// the object: two Vars with the same name are different variables. Converts to an Expr.
class Var {
 public:
  Var() = default;
  explicit Var(std::string name, DType dtype = DType::kI64);

  operator Expr() const { return expr_; }  // NOLINT(google-explicit-constructor)
  const Expr& expr() const { return expr_; }
  const ExprNode* get() const { return expr_.get(); }
  const std::string& name() const;
  DType dtype() const { return expr_.dtype(); }
  explicit operator bool() const { return static_cast<bool>(expr_); }

 private:
  Expr expr_;
};

enum class BufferScope : uint8_t {
  kParam,  // a kernel parameter: pointer, shape and strides come from the caller at run time
  kLocal,  // scratch introduced by an Allocate statement: constant shape, row-major, per call
};

/// Immutable description of a buffer. Identity is the object (like Var).
struct BufferNode {
  std::string name;
  DType dtype = DType::kInvalid;
  int rank = 0;
  BufferScope scope = BufferScope::kParam;
  /// Params only: true means the caller guarantees a dense row-major layout, so the kernel derives
  /// strides from the shape and ignores the strides argument (which may then be null).
  bool contiguous = true;
  std::vector<int64_t> local_shape;  // kLocal only
};

/// A handle to a BufferNode.
class Buffer {
 public:
  Buffer() = default;
  /// A kernel parameter of `rank` runtime dims. `contiguous` as in BufferNode.
  static Buffer Param(std::string name, DType dtype, int rank, bool contiguous = true);
  /// Local scratch of a constant shape, introduced by Allocate.
  static Buffer Local(std::string name, DType dtype, std::vector<int64_t> shape);

  const BufferNode* get() const { return node_.get(); }
  const BufferNode* operator->() const { return node_.get(); }
  const BufferNode& operator*() const { return *node_; }
  explicit operator bool() const { return node_ != nullptr; }

 private:
  std::shared_ptr<const BufferNode> node_;
};

// clang-format off
enum class ExprOp : uint8_t {
  kIntImm,    // int_value, as dtype (an integer type or bool)
  kFloatImm,  // float_value, rounded to dtype
  kVar,       // a Var
  kLoad,      // buffer[args...]; indices are i64, one per dim, through the buffer's strides
  kDim,       // buffer's runtime dim number int_value, i64
  // Binary: args {a, b} of one numeric dtype (bool only where noted); result the same dtype.
  kAdd, kSub, kMul, kDiv, kMod, kFloorDiv, kFloorMod, kMin, kMax,
  kPow,       // float only
  // Comparisons: args {a, b} of one dtype; result bool. Eq/Ne also accept bool.
  kEq, kNe, kLt, kLe, kGt, kGe,
  // Logic on bool; bitwise on integers (args of one dtype, result that dtype).
  kAnd, kOr, kNot,
  // Unary: args {x}. Neg/Abs: numeric; IsNan/IsInf: numeric -> bool; the rest float only.
  kNeg, kAbs, kExp, kLog, kSqrt, kRsqrt, kTanh, kSigmoid, kErf, kSin, kCos, kFloor, kCeil,
  kRound, kIsNan, kIsInf,
  kSelect,    // args {cond (bool), a, b}
  kMulAdd,    // args {a, b, c} of one numeric dtype: a * b + c, fused (one rounding) where the
              // target has FMA, so results may differ from Mul-then-Add in the last bit
  kCast,      // args {x}; converts to dtype
  kReduce,    // args {body, extent_0, ...}; axes bound over [0, extent_i); see ReduceOp
  kCheckIndex,  // args {index, bound} or {value, bound, position}, all i64; `name` is the site
                // (see CheckIndex, CheckInRange); result i64
  kTeamSize,     // no args; i64: the number of threads of the enclosing kTeam loop (TeamSize)
  kTeamBarrier,  // no args; bool: waits for the enclosing kTeam loop's threads (TeamBarrier)
};
// clang-format on

enum class ReduceOp : uint8_t {
  kSum,     // empty -> 0
  kProd,    // empty -> 1
  kMax,     // empty -> -inf (lowest for integers); NaN propagates
  kMin,     // empty -> +inf (highest for integers); NaN propagates
  kArgMax,  // i64 row-major position over the axes of the first maximum (first NaN); empty -> 0
  kArgMin,  // as kArgMax for the first minimum
};

/// An expression node. Fields not used by `op` keep their defaults.
struct ExprNode {
  ExprOp op = ExprOp::kIntImm;
  DType dtype = DType::kInvalid;
  std::vector<Expr> args;
  int64_t int_value = 0;   // kIntImm value; kDim axis
  double float_value = 0;  // kFloatImm
  std::string name;        // kVar name hint (printing only); kCheckIndex site (see CheckIndex)
  Buffer buffer;           // kLoad, kDim
  ReduceOp reduce_op = ReduceOp::kSum;
  std::vector<Var> axes;  // kReduce: one i64 var per reduced axis, extents in args[1..]
};

enum class StmtOp : uint8_t { kFor, kStore, kLet, kIf, kAllocate, kSeq };

enum class ForKind : uint8_t {
  kSerial,      // plain loop (LLVM may still vectorize it)
  kParallel,    // iterations split across threads by kiln_parallel_for; must be independent
  kVectorized,  // asserts iterations are independent (as kParallel does) and forces LLVM's
                // loop vectorizer on; effective on innermost loops
  kUnrolled,    // fully unrolled when the extent is constant, else by a small factor
  kTeam,        // runs the body once on each thread of a team of n threads, 1 <= n <= extent,
                // concurrently, var = min + the thread's index in [0, n); n is what the runtime
                // offers (fewer when OpenMP gives fewer, 1 inside a parallel region or a team)
                // and the body reads it with TeamSize(); TeamBarrier() synchronizes the team.
                // An extent below 1 runs nothing. See jit/runtime.h, kiln_parallel_team.
};

/// A statement node. Fields not used by `op` keep their defaults.
struct StmtNode {
  StmtOp op = StmtOp::kSeq;
  ForKind for_kind = ForKind::kSerial;
  Var var;                  // kFor loop var, kLet binding
  std::vector<Expr> exprs;  // kFor {min, extent}; kStore {indices..., value}; kLet {value};
                            // kIf {cond}
  Buffer buffer;            // kStore target, kAllocate buffer
  std::vector<std::shared_ptr<const StmtNode>> body;  // kFor/kLet/kAllocate {body};
                                                      // kIf {then[, else]}; kSeq the list
};

/// A handle to an immutable statement node.
class Stmt {
 public:
  Stmt() = default;
  explicit Stmt(std::shared_ptr<const StmtNode> node) : node_(std::move(node)) {}
  const StmtNode* get() const { return node_.get(); }
  const StmtNode* operator->() const { return node_.get(); }
  const std::shared_ptr<const StmtNode>& node() const { return node_; }
  explicit operator bool() const { return node_ != nullptr; }

 private:
  std::shared_ptr<const StmtNode> node_;
};

/// A compilable kernel. Parameters appear in the compiled ABI in the order listed here
/// (see jit/codegen.h). Names do not affect HashKernel or StructurallyEqual.
struct Kernel {
  std::string name;
  std::vector<Buffer> buffers;  // kParam buffers
  std::vector<Var> dims;        // i64 symbolic dims passed at run time
  Stmt body;
};

// ---- Expression builders. Binary builders widen f16/bf16 operands to f32 first; ill-typed
// operands give a node of dtype kInvalid, which ValidateKernel reports with the reason. ----

/// An integer (or bool) constant.
Expr IntImm(int64_t value, DType dtype = DType::kI64);
/// A float constant; rounded to dtype when generated.
Expr FloatImm(double value, DType dtype = DType::kF32);
/// A constant of `dtype` holding `value` (IntImm or FloatImm as the dtype asks). Unsigned
/// values up to 2^64 are kept (an IntImm holds an unsigned type's bits).
Expr Const(DType dtype, double value);
/// The lowest value of `dtype` (-inf for floats) and the highest (+inf): identities of Max and
/// Min, bit patterns for the unsigned types (u64's highest is the IntImm -1).
Expr Lowest(DType dtype);
Expr Highest(DType dtype);
/// buffer[indices...]: one i64 index per dim, through the buffer's strides.
Expr Load(const Buffer& buffer, std::vector<Expr> indices);
/// The runtime size of `buffer`'s dim `axis` (constant for local buffers).
Expr DimOf(const Buffer& buffer, int axis);
/// Arithmetic, comparison and logic (semantics at the top of this file and on ExprOp).
Expr Add(Expr a, Expr b);
Expr Sub(Expr a, Expr b);
Expr Mul(Expr a, Expr b);
Expr Div(Expr a, Expr b);
Expr Mod(Expr a, Expr b);
Expr FloorDiv(Expr a, Expr b);
Expr FloorMod(Expr a, Expr b);
Expr Min(Expr a, Expr b);
Expr Max(Expr a, Expr b);
Expr Pow(Expr a, Expr b);
Expr Eq(Expr a, Expr b);
Expr Ne(Expr a, Expr b);
Expr Lt(Expr a, Expr b);
Expr Le(Expr a, Expr b);
Expr Gt(Expr a, Expr b);
Expr Ge(Expr a, Expr b);
Expr And(Expr a, Expr b);
Expr Or(Expr a, Expr b);
Expr Not(Expr a);
/// Any unary op (kNeg ... kIsInf); widens f16/bf16 to f32.
Expr Unary(ExprOp op, Expr x);
/// Any binary or comparison op (kAdd ... kGe, kAnd, kOr).
Expr Binary(ExprOp op, Expr a, Expr b);
inline Expr Neg(Expr x) { return Unary(ExprOp::kNeg, std::move(x)); }
inline Expr Abs(Expr x) { return Unary(ExprOp::kAbs, std::move(x)); }
inline Expr Exp(Expr x) { return Unary(ExprOp::kExp, std::move(x)); }
inline Expr Log(Expr x) { return Unary(ExprOp::kLog, std::move(x)); }
inline Expr Sqrt(Expr x) { return Unary(ExprOp::kSqrt, std::move(x)); }
inline Expr Rsqrt(Expr x) { return Unary(ExprOp::kRsqrt, std::move(x)); }
inline Expr Tanh(Expr x) { return Unary(ExprOp::kTanh, std::move(x)); }
inline Expr Sigmoid(Expr x) { return Unary(ExprOp::kSigmoid, std::move(x)); }
inline Expr Erf(Expr x) { return Unary(ExprOp::kErf, std::move(x)); }
inline Expr Sin(Expr x) { return Unary(ExprOp::kSin, std::move(x)); }
inline Expr Cos(Expr x) { return Unary(ExprOp::kCos, std::move(x)); }
inline Expr Floor(Expr x) { return Unary(ExprOp::kFloor, std::move(x)); }
inline Expr Ceil(Expr x) { return Unary(ExprOp::kCeil, std::move(x)); }
inline Expr Round(Expr x) { return Unary(ExprOp::kRound, std::move(x)); }
inline Expr IsNan(Expr x) { return Unary(ExprOp::kIsNan, std::move(x)); }
inline Expr IsInf(Expr x) { return Unary(ExprOp::kIsInf, std::move(x)); }
/// cond ? a : b, evaluating both arms; f16/bf16 arms stay unwidened when their dtypes agree.
Expr Select(Expr cond, Expr a, Expr b);
/// a * b + c, possibly fused (see ExprOp::kMulAdd); widens f16/bf16.
Expr MulAdd(Expr a, Expr b, Expr c);
/// Converts `x` to `dtype` (a no-op node is not created when the dtypes already match).
Expr Cast(DType dtype, Expr x);
/// Widens f16/bf16 to f32; returns other expressions unchanged.
Expr Widen(Expr x);

/// An index read from a tensor, checked: `index` (i64) counted from the end when negative
/// (index + bound), which must then lie in [0, bound). When it does not, the kernel reports
/// (index, bound, site) to the calling thread's KernelErrorScope (jit/runtime.h) and the result
/// is clamped into [0, bound - 1] (0 when bound <= 0), so loads through it stay in bounds; the
/// caller must then discard the outputs. `site` names the ONNX node for the error message
/// ("Gather node '/tok/Gather'"); sites differing only in name share compiled code.
Expr CheckIndex(Expr index, Expr bound, std::string site);
/// A value read from a tensor that must lie in [0, bound) as it is (no counting from the end),
/// e.g. a sequence length against the time dim + 1. When it does not, the kernel reports
/// (value, bound, site, position) as CheckIndex does, `position` (i64, >= 0) saying which
/// element of the tensor it was (ReverseSequence: the batch index), and the result is clamped
/// into [0, bound - 1]. Since kernel IR 1.3 (a check_index with three operands).
Expr CheckInRange(Expr value, Expr bound, Expr position, std::string site);

/// Inside a kTeam loop's body (not inside a kParallel loop nested in it): the team's size n
/// (i64, >= 1), the same value on every thread of the team. Since kernel IR 1.4.
Expr TeamSize();
/// Inside a kTeam loop's body (as TeamSize): waits until every thread of the team has reached
/// its barrier, so what one thread stored before it is visible to all after it, and returns
/// true; every thread must execute the same number of TeamBarriers (keep them out of
/// thread-dependent conditions). Returns false, on every thread of the team and for every later
/// TeamBarrier of that team at once, when the run's deadline (base/deadline.h) had passed at the
/// barrier: the body should then skip the rest of its work (the VM discards the outputs). With
/// n == 1 it waits for nothing. Since kernel IR 1.4.
Expr TeamBarrier();

/// A reduction axis: `var` ranges over [0, extent).
struct IterVar {
  Var var;
  Expr extent;
};
/// Reduces `body` over all `axes` (row-major order: the last axis varies fastest).
Expr Reduce(ReduceOp op, std::vector<IterVar> axes, Expr body);
inline Expr Sum(std::vector<IterVar> axes, Expr body) {
  return Reduce(ReduceOp::kSum, std::move(axes), std::move(body));
}
inline Expr ReduceMax(std::vector<IterVar> axes, Expr body) {
  return Reduce(ReduceOp::kMax, std::move(axes), std::move(body));
}

// Arithmetic operators; a plain number on one side becomes a constant of the other side's dtype.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator-(Expr a);
/// A constant of `like`'s dtype (f32 for f16/bf16, which compute in f32).
Expr ConstLike(const Expr& like, double value);
/// As ConstLike for an integer literal (exact for i64).
Expr IntConstLike(const Expr& like, int64_t value);

template <typename T>
using EnableIfNumber = std::enable_if_t<std::is_arithmetic_v<T>, int>;
template <typename T>
Expr LiteralLike(const Expr& like, T v) {
  if constexpr (std::is_integral_v<T>) {
    return IntConstLike(like, static_cast<int64_t>(v));
  } else {
    return ConstLike(like, static_cast<double>(v));
  }
}
template <typename T, EnableIfNumber<T> = 0>
Expr operator+(Expr a, T b) {
  return a + LiteralLike(a, b);
}
template <typename T, EnableIfNumber<T> = 0>
Expr operator+(T a, Expr b) {
  return LiteralLike(b, a) + b;
}
template <typename T, EnableIfNumber<T> = 0>
Expr operator-(Expr a, T b) {
  return a - LiteralLike(a, b);
}
template <typename T, EnableIfNumber<T> = 0>
Expr operator-(T a, Expr b) {
  return LiteralLike(b, a) - b;
}
template <typename T, EnableIfNumber<T> = 0>
Expr operator*(Expr a, T b) {
  return a * LiteralLike(a, b);
}
template <typename T, EnableIfNumber<T> = 0>
Expr operator*(T a, Expr b) {
  return LiteralLike(b, a) * b;
}
template <typename T, EnableIfNumber<T> = 0>
Expr operator/(Expr a, T b) {
  return a / LiteralLike(a, b);
}
template <typename T, EnableIfNumber<T> = 0>
Expr operator/(T a, Expr b) {
  return LiteralLike(b, a) / b;
}

// ---- Statement builders. ----

/// `for var in [0, extent)`; var must be i64.
Stmt For(Var var, Expr extent, ForKind kind, Stmt body);
/// `for var in [min, min + extent)`.
Stmt For(Var var, Expr min, Expr extent, ForKind kind, Stmt body);
/// buffer[indices] = value; value must have the buffer's dtype (see Cast).
Stmt Store(const Buffer& buffer, std::vector<Expr> indices, Expr value);
/// Binds var to value (of var's dtype) inside body.
Stmt Let(Var var, Expr value, Stmt body);
/// `else_body` may be null.
Stmt If(Expr cond, Stmt then_body, Stmt else_body = Stmt());
/// Makes the local `buffer` usable inside body; its contents are undefined on entry. It lives
/// on the stack of the enclosing function: inside a parallel loop each thread's chunk has its
/// own, outside one the threads of a parallel loop in `body` share it.
Stmt Allocate(const Buffer& buffer, Stmt body);
Stmt Seq(std::vector<Stmt> stmts);

// ---- Whole-kernel utilities. ----

/// Largest local scratch a kernel may allocate in one Allocate (bytes; it lives on the stack).
inline constexpr int64_t kMaxLocalBytes = 256 * 1024;
/// Largest buffer rank.
inline constexpr int kMaxRank = 16;
/// Deepest nesting of expressions plus statements ValidateKernel accepts: every walk over the IR
/// is recursive, so this bounds stack use for IR read from files.
inline constexpr int kMaxDepth = 1000;

/// Checks types, scoping (every var and buffer bound where used, no var bound twice on one path),
/// index counts, dim axes and local sizes. Returns kInvalidArgument naming the kernel and the path
/// to the offending node. Code generation calls it; nothing else is checked at run time.
Status ValidateKernel(const Kernel& kernel);

/// Structural hash: equal for kernels that differ only in names or in Var/Buffer object identity.
uint64_t HashKernel(const Kernel& kernel);
/// True when HashKernel's canonical forms are identical (the cache uses it to rule out collisions).
bool StructurallyEqual(const Kernel& a, const Kernel& b);
/// The canonical token stream behind both: vars and buffers numbered in binding order.
std::vector<uint64_t> CanonicalForm(const Kernel& kernel);
/// HashKernel(k) == HashCanonicalForm(CanonicalForm(k)).
uint64_t HashCanonicalForm(const std::vector<uint64_t>& form);

/// The distinct CheckIndex sites of `kernel`, numbered as CanonicalForm numbers them (first
/// appearance in its walk): the compiled code reports a site by its position here, so kernels
/// equal up to names share code and each reads its own names.
std::vector<std::string> IndexCheckSites(const Kernel& kernel);

/// Human-readable text (for debugging and `kiln inspect`); deterministic.
std::string ToText(const Kernel& kernel);
std::string ToText(const Stmt& stmt);
std::string ToText(const Expr& expr);
/// "add", "exp", "floordiv", ...
const char* ExprOpName(ExprOp op);
const char* ReduceOpName(ReduceOp op);
const char* ForKindName(ForKind kind);

/// Result dtype of `node`'s op applied to its args, or kInvalid with `*why` set. Shared by the
/// builders and ValidateKernel.
DType InferType(const ExprNode& node, std::string* why);

}  // namespace kiln::jit

#endif  // KILN_JIT_KERNEL_IR_H_
