// Symbolic dimension expressions: the vocabulary shapes are written in ("batch", "seq*4 + 1").
#ifndef KILN_COMPILER_IR_DIM_EXPR_H_
#define KILN_COMPILER_IR_DIM_EXPR_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace kiln::compiler {

// Semantics, shared by the simplifier, Evaluate and the run-time shape functions built later:
// - Values are int64. FloorDiv and Mod round toward negative infinity (Python): Mod has the sign
//   of the divisor. CeilDiv is not a node kind of its own: CeilDiv(a, b) is built as
//   -FloorDiv(-a, b), or as FloorDiv(a + k - 1, k) for a positive constant divisor k.
// - Canonical form: every expression built through the operators below is simplified, so two
//   expressions that are equal as polynomials over their atoms compare equal (`seq*4` == `4*seq`,
//   `a + a` == `2*a`, `(a + 1)*(b + 1)` == `a*b + a + b + 1`). Atoms are symbols and the
//   non-polynomial operations (floordiv, mod, min, max) with canonical operands. Equality is
//   structural on the canonical form: it never claims two different expressions equal, but may
//   miss an identity the rules below do not know (that only costs precision). A product of sums
//   that would expand to more than 64 terms is kept unexpanded.
// - Every symbol denotes a non-negative integer (symbols are dims). Min/Max use it:
//   max(seq - 1, 0) stays, but max(seq, 0) is seq and min(seq + 2, seq) is seq.
// - Simplification of a division by a non-constant divisor assumes the divisor is non-zero
//   (`floordiv(batch*seq*768, batch*seq)` becomes 768). Division by a constant never assumes.
// - Constant folding saturates at the int64 limits instead of overflowing; shape inference
//   rejects dims that large. Evaluate() is exact and reports overflow.

/// An immutable symbolic dimension. Cheap to copy (a constant is inline; anything else is a
/// shared_ptr to an immutable node); safe to share between threads.
class DimExpr {
 public:
  enum class Kind : uint8_t {
    kConst,     // an integer
    kSymbol,    // a named dim: "batch", or a fresh unnamed one "?3"
    kSum,       // constant + sum of coeff*term; terms are atoms or products, coeff != 0
    kProduct,   // product of >= 2 atoms (repeats allowed: seq*seq), coefficient 1
    kFloorDiv,  // floordiv(a, b)
    kMod,       // mod(a, b)
    kMin,       // min(a, b)
    kMax,       // max(a, b)
  };

  /// The constant 0.
  DimExpr() = default;
  /// A constant; implicit so that `seq * 4` and `dims = {batch, 3}` read naturally.
  DimExpr(int64_t value) : value_(value) {}  // NOLINT(google-explicit-constructor)
  /// A named symbol. The name must be non-empty.
  static DimExpr Symbol(std::string name);

  Kind kind() const;
  bool is_const() const { return node_ == nullptr; }
  /// The constant's value; only meaningful when is_const().
  int64_t const_value() const { return value_; }
  bool is_symbol() const { return kind() == Kind::kSymbol; }
  /// The symbol's name; empty unless is_symbol().
  const std::string& symbol_name() const;
  /// True for a symbol made by SymbolGenerator::Fresh (its name starts with '?').
  bool is_fresh_symbol() const;
  /// True when any symbol in the expression is fresh (the dim is unknown until run time).
  bool HasFreshSymbol() const;

  /// Operands of a non-constant, non-symbol expression. kSum: the terms (coefficients via
  /// sum_coeffs(), constant via sum_constant()); kProduct: the factors; binary kinds: {a, b}.
  const std::vector<DimExpr>& operands() const;
  const std::vector<int64_t>& sum_coeffs() const;
  int64_t sum_constant() const;

  /// Structural equality of canonical forms (see above). Fast when the hashes differ.
  friend bool operator==(const DimExpr& a, const DimExpr& b);
  friend bool operator!=(const DimExpr& a, const DimExpr& b) { return !(a == b); }
  /// A total order (constants first, by value) so DimExprs can key a std::map.
  friend bool operator<(const DimExpr& a, const DimExpr& b) { return Compare(a, b) < 0; }
  static int Compare(const DimExpr& a, const DimExpr& b);
  size_t Hash() const;

  friend DimExpr operator+(const DimExpr& a, const DimExpr& b);
  friend DimExpr operator-(const DimExpr& a, const DimExpr& b);
  friend DimExpr operator-(const DimExpr& a);
  friend DimExpr operator*(const DimExpr& a, const DimExpr& b);
  DimExpr& operator+=(const DimExpr& b) { return *this = *this + b; }
  DimExpr& operator-=(const DimExpr& b) { return *this = *this - b; }
  DimExpr& operator*=(const DimExpr& b) { return *this = *this * b; }

  /// "seq*4", "batch*seq + 1", "floordiv(h + 1, 2)", "min(8, seq)", "?0".
  std::string ToString() const;

  /// The value under `bindings` (symbol name -> value). InvalidArgument naming the symbol when
  /// one is unbound, or naming the expression on division by zero; OutOfRange on overflow.
  StatusOr<int64_t> Evaluate(const std::map<std::string, int64_t>& bindings) const;
  /// Replaces the named symbols (others stay) and re-simplifies.
  DimExpr Substitute(const std::map<std::string, DimExpr>& replacements) const;
  /// Adds the name of every symbol in the expression to `names`.
  void CollectSymbols(std::set<std::string>* names) const;

  struct Node;  // defined in dim_expr.cc

 private:
  explicit DimExpr(std::shared_ptr<const Node> node) : node_(std::move(node)) {}
  friend struct DimExprBuilder;

  std::shared_ptr<const Node> node_;  // null for a constant
  int64_t value_ = 0;                 // the constant when node_ is null
};

DimExpr FloorDiv(const DimExpr& a, const DimExpr& b);
/// Ceiling division. With a positive constant divisor k it is canonicalised to
/// floordiv(a + k - 1, k), so `ceildiv(x, 2)` == `floordiv(x + 1, 2)`.
DimExpr CeilDiv(const DimExpr& a, const DimExpr& b);
DimExpr Mod(const DimExpr& a, const DimExpr& b);
DimExpr Min(const DimExpr& a, const DimExpr& b);
DimExpr Max(const DimExpr& a, const DimExpr& b);
/// a / b when b divides every term of a exactly (a constant or a monomial divisor), else
/// nullopt. Like FloorDiv, assumes a non-constant divisor is non-zero.
std::optional<DimExpr> ExactDiv(const DimExpr& a, const DimExpr& b);
/// True when `e` is provably >= 0 given that every symbol is (a conservative sign analysis).
bool KnownNonNegative(const DimExpr& e);

std::ostream& operator<<(std::ostream& os, const DimExpr& e);

/// Hands out fresh unnamed symbols "?0", "?1", ... for dims unknown until run time. Names the
/// model already uses are reserved so a fresh symbol never collides with one. Not thread-safe;
/// one generator is shared by a graph and its subgraphs.
class SymbolGenerator {
 public:
  DimExpr Fresh();
  void Reserve(std::string_view name) { reserved_.emplace(name); }
  int64_t num_generated() const { return next_; }

 private:
  int64_t next_ = 0;
  std::set<std::string, std::less<>> reserved_;
};

}  // namespace kiln::compiler

template <>
struct std::hash<kiln::compiler::DimExpr> {
  size_t operator()(const kiln::compiler::DimExpr& e) const { return e.Hash(); }
};

#endif  // KILN_COMPILER_IR_DIM_EXPR_H_
