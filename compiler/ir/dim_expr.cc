// DimExpr: canonicalising constructors, ordering, printing and evaluation.
#include "compiler/ir/dim_expr.h"

#include <algorithm>
#include <cassert>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>
#include <utility>

namespace kiln::compiler {

struct DimExpr::Node {
  Kind kind;
  std::string name;               // kSymbol
  std::vector<DimExpr> operands;  // kSum terms, kProduct factors, binary {a, b}
  std::vector<int64_t> coeffs;    // kSum, one per term
  int64_t constant = 0;           // kSum
  size_t hash = 0;
  bool has_fresh = false;
};

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
// Expanding a product of sums beyond this many terms keeps the product unexpanded instead.
constexpr size_t kMaxExpandedTerms = 64;

int64_t SatAdd(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? kMax : kMin;
}

int64_t SatMul(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_mul_overflow(a, b, &r)) return r;
  return (a < 0) == (b < 0) ? kMax : kMin;
}

int64_t SatNeg(int64_t a) { return a == kMin ? kMax : -a; }

// Floor division and modulo for k != 0 (saturating kMin / -1).
int64_t FloorDivConst(int64_t a, int64_t k) {
  if (a == kMin && k == -1) return kMax;
  int64_t q = a / k;
  if ((a % k != 0) && ((a < 0) != (k < 0))) --q;
  return q;
}

int64_t FloorModConst(int64_t a, int64_t k) {
  if (k == -1) return 0;
  int64_t r = a % k;
  if (r != 0 && ((r < 0) != (k < 0))) r += k;
  return r;
}

// a % b and a / b that never trap (INT64_MIN % -1 and INT64_MIN / -1 raise SIGFPE on x86).
int64_t SafeRem(int64_t a, int64_t b) { return b == -1 ? 0 : a % b; }
int64_t SafeQuot(int64_t a, int64_t b) { return b == -1 ? SatNeg(a) : a / b; }

// gcd that tolerates INT64_MIN (std::gcd's result must be representable).
int64_t SafeGcd(int64_t a, int64_t b) {
  if (a == kMin || b == kMin) return 1;
  return std::gcd(a, b);
}

size_t HashCombine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

// A polynomial view: constant + sum of coeff * monomial, monomials sorted and distinct.
struct Linear {
  int64_t constant = 0;
  std::vector<std::pair<DimExpr, int64_t>> terms;
};

}  // namespace

// Builds canonical nodes; the only code allowed to call the private constructor.
struct DimExprBuilder {
  static DimExpr Make(DimExpr::Node node) {
    size_t h = std::hash<int>()(static_cast<int>(node.kind));
    h = HashCombine(h, std::hash<std::string>()(node.name));
    bool fresh = node.kind == DimExpr::Kind::kSymbol && !node.name.empty() && node.name[0] == '?';
    for (const DimExpr& o : node.operands) {
      h = HashCombine(h, o.Hash());
      fresh = fresh || o.HasFreshSymbol();
    }
    for (int64_t c : node.coeffs) h = HashCombine(h, std::hash<int64_t>()(c));
    h = HashCombine(h, std::hash<int64_t>()(node.constant));
    node.hash = h;
    node.has_fresh = fresh;
    return DimExpr(std::make_shared<const DimExpr::Node>(std::move(node)));
  }

  static DimExpr Binary(DimExpr::Kind kind, DimExpr a, DimExpr b) {
    DimExpr::Node n{kind, {}, {std::move(a), std::move(b)}, {}, 0};
    return Make(std::move(n));
  }

  static Linear ToLinear(const DimExpr& e) {
    Linear l;
    if (e.is_const()) {
      l.constant = e.const_value();
    } else if (e.kind() == DimExpr::Kind::kSum) {
      l.constant = e.node_->constant;
      for (size_t i = 0; i < e.node_->operands.size(); ++i)
        l.terms.emplace_back(e.node_->operands[i], e.node_->coeffs[i]);
    } else {
      l.terms.emplace_back(e, 1);
    }
    return l;
  }

  // Terms need not be sorted or distinct; zero coefficients are dropped.
  static DimExpr FromTerms(int64_t constant, std::vector<std::pair<DimExpr, int64_t>> terms) {
    std::sort(terms.begin(), terms.end(),
              [](const auto& x, const auto& y) { return DimExpr::Compare(x.first, y.first) < 0; });
    std::vector<std::pair<DimExpr, int64_t>> merged;
    for (auto& t : terms) {
      if (!merged.empty() && merged.back().first == t.first) {
        merged.back().second = SatAdd(merged.back().second, t.second);
      } else {
        merged.push_back(std::move(t));
      }
    }
    merged.erase(
        std::remove_if(merged.begin(), merged.end(), [](const auto& t) { return t.second == 0; }),
        merged.end());
    if (merged.empty()) return DimExpr(constant);
    if (merged.size() == 1 && merged[0].second == 1 && constant == 0) return merged[0].first;
    DimExpr::Node n{DimExpr::Kind::kSum, {}, {}, {}, constant};
    for (auto& t : merged) {
      n.operands.push_back(std::move(t.first));
      n.coeffs.push_back(t.second);
    }
    return Make(std::move(n));
  }

  static std::vector<DimExpr> Factors(const DimExpr& e) {
    if (e.kind() == DimExpr::Kind::kProduct) return e.node_->operands;
    return {e};
  }

  static DimExpr FromFactors(std::vector<DimExpr> factors) {
    if (factors.empty()) return DimExpr(1);
    if (factors.size() == 1) return factors[0];
    std::sort(factors.begin(), factors.end());
    return Make(DimExpr::Node{DimExpr::Kind::kProduct, {}, std::move(factors), {}, 0});
  }

  static DimExpr Scale(const DimExpr& e, int64_t k) {
    if (k == 0) return DimExpr(0);
    if (k == 1) return e;
    Linear l = ToLinear(e);
    for (auto& t : l.terms) t.second = SatMul(t.second, k);
    return FromTerms(SatMul(l.constant, k), std::move(l.terms));
  }

  static DimExpr Add(const DimExpr& a, const DimExpr& b) {
    if (a.is_const() && b.is_const()) return DimExpr(SatAdd(a.const_value(), b.const_value()));
    Linear la = ToLinear(a), lb = ToLinear(b);
    for (auto& t : lb.terms) la.terms.push_back(std::move(t));
    return FromTerms(SatAdd(la.constant, lb.constant), std::move(la.terms));
  }

  static DimExpr Mul(const DimExpr& a, const DimExpr& b) {
    if (a.is_const()) return Scale(b, a.const_value());
    if (b.is_const()) return Scale(a, b.const_value());
    Linear la = ToLinear(a), lb = ToLinear(b);
    if ((la.terms.size() + 1) * (lb.terms.size() + 1) > kMaxExpandedTerms) {
      std::vector<DimExpr> f = Factors(a);
      for (DimExpr& x : Factors(b)) f.push_back(std::move(x));
      return FromFactors(std::move(f));
    }
    // (ca + sum ai*ta) * (cb + sum bj*tb): expand into monomials.
    std::vector<std::pair<DimExpr, int64_t>> terms;
    for (auto& [ta, ca] : la.terms) {
      terms.emplace_back(ta, SatMul(ca, lb.constant));
      for (auto& [tb, cb] : lb.terms) {
        std::vector<DimExpr> f = Factors(ta);
        for (DimExpr& x : Factors(tb)) f.push_back(std::move(x));
        terms.emplace_back(FromFactors(std::move(f)), SatMul(ca, cb));
      }
    }
    for (auto& [tb, cb] : lb.terms) terms.emplace_back(tb, SatMul(cb, la.constant));
    return FromTerms(SatMul(la.constant, lb.constant), std::move(terms));
  }

  // Splits a = k*q + rest where every term of q had a coefficient divisible by k (k > 0) and
  // rest's constant is in [0, k).
  static void SplitByDivisor(const DimExpr& a, int64_t k, DimExpr* q, Linear* rest) {
    Linear l = ToLinear(a);
    std::vector<std::pair<DimExpr, int64_t>> qterms;
    for (auto& t : l.terms) {
      if (t.second % k == 0) {
        qterms.emplace_back(t.first, t.second / k);
      } else {
        rest->terms.push_back(t);
      }
    }
    int64_t qc = FloorDivConst(l.constant, k);
    rest->constant = FloorModConst(l.constant, k);
    *q = FromTerms(qc, std::move(qterms));
  }

  // gcd of k and every coefficient and the constant of l.
  static int64_t CommonGcd(const Linear& l, int64_t k) {
    int64_t g = k;
    for (auto& t : l.terms) g = SafeGcd(g, t.second);
    return SafeGcd(g, l.constant);
  }

  static DimExpr DivideLinear(Linear l, int64_t g) {
    for (auto& t : l.terms) t.second = SafeQuot(t.second, g);
    return FromTerms(SafeQuot(l.constant, g), std::move(l.terms));
  }

  static DimExpr FloorDiv(const DimExpr& a, const DimExpr& b) {
    if (!b.is_const()) {
      if (std::optional<DimExpr> q = ExactDiv(a, b)) return *q;
      return Binary(DimExpr::Kind::kFloorDiv, a, b);
    }
    int64_t k = b.const_value();
    if (k == 0) return Binary(DimExpr::Kind::kFloorDiv, a, b);  // Evaluate reports it
    if (a.is_const()) return DimExpr(FloorDivConst(a.const_value(), k));
    if (k < 0) {
      if (k == kMin) return Binary(DimExpr::Kind::kFloorDiv, a, b);
      return FloorDiv(-a, DimExpr(-k));  // floor(a/k) == floor(-a/-k)
    }
    if (k == 1) return a;
    DimExpr q;
    Linear rest;
    SplitByDivisor(a, k, &q, &rest);
    if (rest.terms.empty()) return q;  // the remaining constant is in [0, k)
    int64_t g = CommonGcd(rest, k);
    DimExpr r = DivideLinear(std::move(rest), g);
    k /= g;
    if (k == 1) return q + r;
    // floordiv(floordiv(x, k1), k2) == floordiv(x, k1*k2) for positive divisors.
    if (r.kind() == DimExpr::Kind::kFloorDiv && r.operands()[1].is_const() &&
        r.operands()[1].const_value() > 0) {
      int64_t k12 = SatMul(r.operands()[1].const_value(), k);
      if (k12 != kMax) return q + FloorDiv(r.operands()[0], DimExpr(k12));
    }
    return q + Binary(DimExpr::Kind::kFloorDiv, r, DimExpr(k));
  }

  static DimExpr Mod(const DimExpr& a, const DimExpr& b) {
    if (!b.is_const()) {
      if (ExactDiv(a, b)) return DimExpr(0);
      return Binary(DimExpr::Kind::kMod, a, b);
    }
    int64_t k = b.const_value();
    if (k == 0) return Binary(DimExpr::Kind::kMod, a, b);
    if (a.is_const()) return DimExpr(FloorModConst(a.const_value(), k));
    if (k == 1 || k == -1) return DimExpr(0);
    if (k < 0) return Binary(DimExpr::Kind::kMod, a, b);
    DimExpr q;
    Linear rest;
    SplitByDivisor(a, k, &q, &rest);
    if (rest.terms.empty()) return DimExpr(rest.constant);
    // mod(g*r, g*k) == g*mod(r, k)
    int64_t g = CommonGcd(rest, k);
    DimExpr r = DivideLinear(std::move(rest), g);
    return Scale(Binary(DimExpr::Kind::kMod, r, DimExpr(k / g)), g);
  }

  static DimExpr MinMax(DimExpr::Kind kind, const DimExpr& a, const DimExpr& b) {
    bool is_min = kind == DimExpr::Kind::kMin;
    if (a == b) return a;
    DimExpr diff = a - b;
    if (KnownNonNegative(diff)) return is_min ? b : a;
    if (KnownNonNegative(-diff)) return is_min ? a : b;
    if (DimExpr::Compare(a, b) < 0) return Binary(kind, a, b);
    return Binary(kind, b, a);
  }

  static std::optional<DimExpr> ExactDiv(const DimExpr& a, const DimExpr& b) {
    if (b.is_const()) {
      int64_t k = b.const_value();
      if (k == 0) return std::nullopt;
      Linear l = ToLinear(a);
      if (SafeRem(l.constant, k) != 0) return std::nullopt;
      for (auto& t : l.terms) {
        if (SafeRem(t.second, k) != 0) return std::nullopt;
      }
      return DivideLinear(std::move(l), k);
    }
    // b must be a single monomial c*m.
    Linear lb = ToLinear(b);
    if (lb.constant != 0 || lb.terms.size() != 1) return std::nullopt;
    int64_t cb = lb.terms[0].second;
    std::vector<DimExpr> fb = Factors(lb.terms[0].first);
    Linear la = ToLinear(a);
    if (la.constant != 0) return std::nullopt;
    std::vector<std::pair<DimExpr, int64_t>> out;
    for (auto& [t, c] : la.terms) {
      if (SafeRem(c, cb) != 0) return std::nullopt;
      std::vector<DimExpr> fa = Factors(t);  // sorted
      std::vector<DimExpr> left;
      std::set_difference(fa.begin(), fa.end(), fb.begin(), fb.end(), std::back_inserter(left));
      if (left.size() + fb.size() != fa.size()) return std::nullopt;  // fb not a sub-multiset
      out.emplace_back(FromFactors(std::move(left)), SafeQuot(c, cb));
    }
    // A monomial quotient of 1 is the constant 1: fold it into the constant.
    int64_t constant = 0;
    std::vector<std::pair<DimExpr, int64_t>> terms;
    for (auto& t : out) {
      if (t.first.is_const()) {
        constant = SatAdd(constant, SatMul(t.first.const_value(), t.second));
      } else {
        terms.push_back(std::move(t));
      }
    }
    return FromTerms(constant, std::move(terms));
  }

  static const DimExpr::Node* node(const DimExpr& e) { return e.node_.get(); }
};

bool KnownNonNegative(const DimExpr& e) {
  switch (e.kind()) {
    case DimExpr::Kind::kConst:
      return e.const_value() >= 0;
    case DimExpr::Kind::kSymbol:
      return true;
    case DimExpr::Kind::kSum:
      if (e.sum_constant() < 0) return false;
      for (size_t i = 0; i < e.operands().size(); ++i) {
        if (e.sum_coeffs()[i] < 0 || !KnownNonNegative(e.operands()[i])) return false;
      }
      return true;
    case DimExpr::Kind::kProduct:
      for (const DimExpr& f : e.operands()) {
        if (!KnownNonNegative(f)) return false;
      }
      return true;
    case DimExpr::Kind::kFloorDiv:
      return KnownNonNegative(e.operands()[0]) && KnownNonNegative(e.operands()[1]);
    case DimExpr::Kind::kMod:  // sign of the divisor
      return KnownNonNegative(e.operands()[1]);
    case DimExpr::Kind::kMin:
      return KnownNonNegative(e.operands()[0]) && KnownNonNegative(e.operands()[1]);
    case DimExpr::Kind::kMax:
      return KnownNonNegative(e.operands()[0]) || KnownNonNegative(e.operands()[1]);
  }
  return false;
}

// ---- Construction and accessors -----------------------------------------------------------

DimExpr DimExpr::Symbol(std::string name) {
  assert(!name.empty());
  return DimExprBuilder::Make(Node{Kind::kSymbol, std::move(name), {}, {}, 0});
}

DimExpr::Kind DimExpr::kind() const { return node_ ? node_->kind : Kind::kConst; }

const std::string& DimExpr::symbol_name() const {
  static const std::string kEmpty;
  return node_ && node_->kind == Kind::kSymbol ? node_->name : kEmpty;
}

bool DimExpr::is_fresh_symbol() const { return is_symbol() && node_->has_fresh; }

bool DimExpr::HasFreshSymbol() const { return node_ && node_->has_fresh; }

const std::vector<DimExpr>& DimExpr::operands() const {
  static const std::vector<DimExpr> kNone;
  return node_ ? node_->operands : kNone;
}

const std::vector<int64_t>& DimExpr::sum_coeffs() const {
  static const std::vector<int64_t> kNone;
  return node_ ? node_->coeffs : kNone;
}

int64_t DimExpr::sum_constant() const { return node_ ? node_->constant : value_; }

size_t DimExpr::Hash() const { return node_ ? node_->hash : std::hash<int64_t>()(value_); }

int DimExpr::Compare(const DimExpr& a, const DimExpr& b) {
  if (a.node_ == b.node_) return a.node_ ? 0 : (a.value_ < b.value_ ? -1 : a.value_ > b.value_);
  if (!a.node_) return -1;
  if (!b.node_) return 1;
  const Node& x = *a.node_;
  const Node& y = *b.node_;
  if (x.kind != y.kind) return x.kind < y.kind ? -1 : 1;
  if (int c = x.name.compare(y.name)) return c < 0 ? -1 : 1;
  if (x.constant != y.constant) return x.constant < y.constant ? -1 : 1;
  if (x.operands.size() != y.operands.size()) return x.operands.size() < y.operands.size() ? -1 : 1;
  for (size_t i = 0; i < x.operands.size(); ++i) {
    if (int c = Compare(x.operands[i], y.operands[i])) return c;
  }
  for (size_t i = 0; i < x.coeffs.size(); ++i) {
    if (x.coeffs[i] != y.coeffs[i]) return x.coeffs[i] < y.coeffs[i] ? -1 : 1;
  }
  return 0;
}

bool operator==(const DimExpr& a, const DimExpr& b) {
  if (a.node_ == b.node_) return a.node_ || a.value_ == b.value_;
  if (!a.node_ || !b.node_ || a.node_->hash != b.node_->hash) return false;
  return DimExpr::Compare(a, b) == 0;
}

DimExpr operator+(const DimExpr& a, const DimExpr& b) { return DimExprBuilder::Add(a, b); }
DimExpr operator-(const DimExpr& a) {
  return a.is_const() ? DimExpr(SatNeg(a.const_value())) : DimExprBuilder::Scale(a, -1);
}
DimExpr operator-(const DimExpr& a, const DimExpr& b) { return a + (-b); }
DimExpr operator*(const DimExpr& a, const DimExpr& b) { return DimExprBuilder::Mul(a, b); }

DimExpr FloorDiv(const DimExpr& a, const DimExpr& b) { return DimExprBuilder::FloorDiv(a, b); }
DimExpr CeilDiv(const DimExpr& a, const DimExpr& b) {
  if (b.is_const() && b.const_value() > 0) return FloorDiv(a + (b - 1), b);
  return -FloorDiv(-a, b);
}
DimExpr Mod(const DimExpr& a, const DimExpr& b) { return DimExprBuilder::Mod(a, b); }
DimExpr Min(const DimExpr& a, const DimExpr& b) {
  return DimExprBuilder::MinMax(DimExpr::Kind::kMin, a, b);
}
DimExpr Max(const DimExpr& a, const DimExpr& b) {
  return DimExprBuilder::MinMax(DimExpr::Kind::kMax, a, b);
}
std::optional<DimExpr> ExactDiv(const DimExpr& a, const DimExpr& b) {
  return DimExprBuilder::ExactDiv(a, b);
}

// ---- Printing ------------------------------------------------------------------------------

namespace {

enum Precedence { kSumPrec = 0, kProductPrec = 1, kAtomPrec = 2 };

void Print(const DimExpr& e, Precedence ctx, std::ostream& os);

void PrintTerm(const DimExpr& term, int64_t abs_coeff, std::ostream& os) {
  Print(term, kProductPrec, os);
  if (abs_coeff != 1) os << '*' << abs_coeff;
}

void Print(const DimExpr& e, Precedence ctx, std::ostream& os) {
  switch (e.kind()) {
    case DimExpr::Kind::kConst:
      if (e.const_value() < 0 && ctx > kSumPrec) {
        os << '(' << e.const_value() << ')';
      } else {
        os << e.const_value();
      }
      return;
    case DimExpr::Kind::kSymbol:
      os << e.symbol_name();
      return;
    case DimExpr::Kind::kSum: {
      // A lone scaled term ("seq*4") is a product, not a sum, for parenthesisation.
      bool product_like =
          e.operands().size() == 1 && e.sum_constant() == 0 && e.sum_coeffs()[0] > 0;
      bool paren = ctx > (product_like ? kProductPrec : kSumPrec);
      if (paren) os << '(';
      for (size_t i = 0; i < e.operands().size(); ++i) {
        int64_t c = e.sum_coeffs()[i];
        if (i == 0) {
          if (c < 0) os << '-';
        } else {
          os << (c < 0 ? " - " : " + ");
        }
        PrintTerm(e.operands()[i], c < 0 ? -static_cast<uint64_t>(c) : c, os);
      }
      int64_t k = e.sum_constant();
      if (k > 0) os << " + " << k;
      if (k < 0) os << " - " << -static_cast<uint64_t>(k);
      if (paren) os << ')';
      return;
    }
    case DimExpr::Kind::kProduct: {
      if (ctx > kProductPrec) os << '(';
      for (size_t i = 0; i < e.operands().size(); ++i) {
        if (i) os << '*';
        Print(e.operands()[i], kAtomPrec, os);
      }
      if (ctx > kProductPrec) os << ')';
      return;
    }
    case DimExpr::Kind::kFloorDiv:
    case DimExpr::Kind::kMod:
    case DimExpr::Kind::kMin:
    case DimExpr::Kind::kMax: {
      static const char* kNames[] = {"floordiv", "mod", "min", "max"};
      os << kNames[static_cast<int>(e.kind()) - static_cast<int>(DimExpr::Kind::kFloorDiv)] << '(';
      Print(e.operands()[0], kSumPrec, os);
      os << ", ";
      Print(e.operands()[1], kSumPrec, os);
      os << ')';
      return;
    }
  }
}

}  // namespace

std::string DimExpr::ToString() const {
  std::ostringstream os;
  Print(*this, kSumPrec, os);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const DimExpr& e) { return os << e.ToString(); }

// ---- Evaluation and substitution -------------------------------------------------------------

StatusOr<int64_t> DimExpr::Evaluate(const std::map<std::string, int64_t>& bindings) const {
  auto overflow = [this] { return OutOfRange("integer overflow evaluating '" + ToString() + "'"); };
  switch (kind()) {
    case Kind::kConst:
      return value_;
    case Kind::kSymbol: {
      auto it = bindings.find(node_->name);
      if (it == bindings.end()) return InvalidArgument("symbol '" + node_->name + "' is not bound");
      return it->second;
    }
    case Kind::kSum: {
      int64_t acc = node_->constant;
      for (size_t i = 0; i < node_->operands.size(); ++i) {
        ASSIGN_OR_RETURN(int64_t v, node_->operands[i].Evaluate(bindings));
        if (__builtin_mul_overflow(v, node_->coeffs[i], &v) || __builtin_add_overflow(acc, v, &acc))
          return overflow();
      }
      return acc;
    }
    case Kind::kProduct: {
      int64_t acc = 1;
      for (const DimExpr& f : node_->operands) {
        ASSIGN_OR_RETURN(int64_t v, f.Evaluate(bindings));
        if (__builtin_mul_overflow(acc, v, &acc)) return overflow();
      }
      return acc;
    }
    case Kind::kFloorDiv:
    case Kind::kMod:
    case Kind::kMin:
    case Kind::kMax: {
      ASSIGN_OR_RETURN(int64_t a, node_->operands[0].Evaluate(bindings));
      ASSIGN_OR_RETURN(int64_t b, node_->operands[1].Evaluate(bindings));
      if (kind() == Kind::kMin) return std::min(a, b);
      if (kind() == Kind::kMax) return std::max(a, b);
      if (b == 0) return InvalidArgument("division by zero in '" + ToString() + "'");
      if (kind() == Kind::kMod) return FloorModConst(a, b);
      if (a == kMin && b == -1) return overflow();
      return FloorDivConst(a, b);
    }
  }
  return Internal("bad DimExpr kind");
}

DimExpr DimExpr::Substitute(const std::map<std::string, DimExpr>& replacements) const {
  switch (kind()) {
    case Kind::kConst:
      return *this;
    case Kind::kSymbol: {
      auto it = replacements.find(node_->name);
      return it == replacements.end() ? *this : it->second;
    }
    case Kind::kSum: {
      DimExpr acc(node_->constant);
      for (size_t i = 0; i < node_->operands.size(); ++i)
        acc += node_->operands[i].Substitute(replacements) * DimExpr(node_->coeffs[i]);
      return acc;
    }
    case Kind::kProduct: {
      DimExpr acc(1);
      for (const DimExpr& f : node_->operands) acc *= f.Substitute(replacements);
      return acc;
    }
    case Kind::kFloorDiv:
    case Kind::kMod:
    case Kind::kMin:
    case Kind::kMax: {
      DimExpr a = node_->operands[0].Substitute(replacements);
      DimExpr b = node_->operands[1].Substitute(replacements);
      if (kind() == Kind::kFloorDiv) return FloorDiv(a, b);
      if (kind() == Kind::kMod) return Mod(a, b);
      if (kind() == Kind::kMin) return Min(a, b);
      return Max(a, b);
    }
  }
  return *this;
}

void DimExpr::CollectSymbols(std::set<std::string>* names) const {
  if (!node_) return;
  if (node_->kind == Kind::kSymbol) names->insert(node_->name);
  for (const DimExpr& o : node_->operands) o.CollectSymbols(names);
}

// ---- SymbolGenerator -------------------------------------------------------------------------

DimExpr SymbolGenerator::Fresh() {
  std::string name;
  do {
    name = "?" + std::to_string(next_++);
  } while (reserved_.count(name) != 0);
  return DimExpr::Symbol(std::move(name));
}

}  // namespace kiln::compiler
