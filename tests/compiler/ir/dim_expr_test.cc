// DimExpr (compiler/ir/dim_expr.cc): canonical forms, equality, printing, evaluation and its
// errors, substitution, the sign analysis and fresh symbols.
#define BOOST_TEST_MODULE dim_expr_test
#include "compiler/ir/dim_expr.h"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <unordered_set>
#include <vector>

namespace kiln::compiler {
namespace {

namespace data = boost::unit_test::data;

const DimExpr kBatch = DimExpr::Symbol("batch");
const DimExpr kSeq = DimExpr::Symbol("seq");
const DimExpr kH = DimExpr::Symbol("h");

// ---- Canonical printing: built expression -> its canonical string ---------------------------

struct PrintCase {
  const char* name;
  std::function<DimExpr()> build;
  const char* expect;
};
std::ostream& operator<<(std::ostream& os, const PrintCase& c) { return os << c.name; }

const PrintCase kPrintCases[] = {
    {"constant", [] { return DimExpr(7); }, "7"},
    {"negative_constant", [] { return DimExpr(-3); }, "-3"},
    {"symbol", [] { return kSeq; }, "seq"},
    {"constant_folding", [] { return DimExpr(3) * DimExpr(4) + DimExpr(2) - DimExpr(5); }, "9"},
    {"scaled_symbol_prints_coefficient_last", [] { return DimExpr(4) * kSeq; }, "seq*4"},
    {"a_plus_a", [] { return kSeq + kSeq; }, "seq*2"},
    {"cancellation", [] { return kSeq + kBatch - kSeq; }, "batch"},
    {"sum_sorted_constant_last", [] { return DimExpr(1) + kSeq + kBatch; }, "batch + seq + 1"},
    {"subtraction", [] { return kSeq - DimExpr(1); }, "seq - 1"},
    {"negative_lead", [] { return DimExpr(4) - kSeq; }, "-seq + 4"},
    {"product_sorted", [] { return kSeq * kBatch; }, "batch*seq"},
    {"square", [] { return kSeq * kSeq; }, "seq*seq"},
    {"product_with_coefficient", [] { return kSeq * DimExpr(3) * kBatch; }, "batch*seq*3"},
    {"expanded_product", [] { return (kSeq + DimExpr(1)) * (kBatch + DimExpr(1)); },
     "batch + seq + batch*seq + 1"},
    {"times_zero", [] { return kSeq * DimExpr(0); }, "0"},
    {"floordiv_constant", [] { return FloorDiv(DimExpr(7), DimExpr(2)); }, "3"},
    {"floordiv_negative_rounds_down", [] { return FloorDiv(DimExpr(-7), DimExpr(2)); }, "-4"},
    {"floordiv_by_one", [] { return FloorDiv(kSeq, DimExpr(1)); }, "seq"},
    {"floordiv_exact", [] { return FloorDiv(kSeq * DimExpr(6) + DimExpr(4), DimExpr(2)); },
     "seq*3 + 2"},
    {"floordiv_splits_multiple", [] { return FloorDiv(kSeq * DimExpr(4) + kH, DimExpr(2)); },
     "seq*2 + floordiv(h, 2)"},
    {"floordiv_gcd", [] { return FloorDiv(kSeq * DimExpr(2) + DimExpr(2), DimExpr(4)); },
     "floordiv(seq + 1, 2)"},
    {"floordiv_nested", [] { return FloorDiv(FloorDiv(kSeq, DimExpr(2)), DimExpr(3)); },
     "floordiv(seq, 6)"},
    // floor((h - 1) / 2) + 1 == floor((h + 1) / 2): the constant is folded out of the division.
    {"floordiv_conv_output",
     [] { return FloorDiv(kH + DimExpr(2) - DimExpr(3), DimExpr(2)) + DimExpr(1); },
     "floordiv(h + 1, 2)"},
    {"floordiv_monomial",
     [] { return FloorDiv(kBatch * kSeq * DimExpr(768), kBatch * kSeq * DimExpr(12)); }, "64"},
    {"floordiv_symbolic_kept", [] { return FloorDiv(kSeq, kBatch); }, "floordiv(seq, batch)"},
    {"ceildiv_is_floordiv", [] { return CeilDiv(kSeq, DimExpr(2)); }, "floordiv(seq + 1, 2)"},
    {"ceildiv_constant", [] { return CeilDiv(DimExpr(7), DimExpr(2)); }, "4"},
    {"ceildiv_exact", [] { return CeilDiv(kSeq * DimExpr(4), DimExpr(2)); }, "seq*2"},
    {"mod_constant", [] { return Mod(DimExpr(-7), DimExpr(3)); }, "2"},
    {"mod_drops_multiples", [] { return Mod(kSeq * DimExpr(6) + kH + DimExpr(7), DimExpr(3)); },
     "mod(h + 1, 3)"},
    {"mod_exact", [] { return Mod(kSeq * DimExpr(4), DimExpr(2)); }, "0"},
    {"mod_monomial", [] { return Mod(kSeq * kBatch, kSeq); }, "0"},
    {"min_constants", [] { return Min(DimExpr(3), DimExpr(5)); }, "3"},
    {"max_same", [] { return Max(kSeq, kSeq); }, "seq"},
    {"min_offset", [] { return Min(kSeq + DimExpr(2), kSeq); }, "seq"},
    {"max_nonnegative_with_zero", [] { return Max(kSeq, DimExpr(0)); }, "seq"},
    {"max_kept", [] { return Max(kSeq - DimExpr(1), DimExpr(0)); }, "max(0, seq - 1)"},
    {"min_commutes", [] { return Min(kSeq, DimExpr(8)); }, "min(8, seq)"},
    {"parenthesised_sum_in_product", [] { return Min(kSeq, kH) * DimExpr(2); }, "min(h, seq)*2"},
};

BOOST_DATA_TEST_CASE(prints_canonical_form, data::make(kPrintCases), c) {
  BOOST_TEST(c.build().ToString() == c.expect);
}

// ---- Equality of different spellings --------------------------------------------------------

struct EqualCase {
  const char* name;
  std::function<DimExpr()> a, b;
  bool equal;
};
std::ostream& operator<<(std::ostream& os, const EqualCase& c) { return os << c.name; }

const EqualCase kEqualCases[] = {
    {"commutative_product", [] { return kSeq * DimExpr(4); }, [] { return DimExpr(4) * kSeq; },
     true},
    {"a_plus_a_is_2a", [] { return kSeq + kSeq; }, [] { return DimExpr(2) * kSeq; }, true},
    {"associative_sum", [] { return (kSeq + kBatch) + kH; }, [] { return kSeq + (kH + kBatch); },
     true},
    {"distributive", [] { return (kSeq + DimExpr(1)) * DimExpr(3); },
     [] { return kSeq * DimExpr(3) + DimExpr(3); }, true},
    {"ceil_vs_floor", [] { return CeilDiv(kSeq, DimExpr(2)); },
     [] { return FloorDiv(kSeq + DimExpr(1), DimExpr(2)); }, true},
    {"min_commutes", [] { return Min(kSeq, kBatch); }, [] { return Min(kBatch, kSeq); }, true},
    {"floordiv_split", [] { return FloorDiv(kSeq + DimExpr(5), DimExpr(2)); },
     [] { return FloorDiv(kSeq + DimExpr(1), DimExpr(2)) + DimExpr(2); }, true},
    {"different_symbols", [] { return kSeq; }, [] { return kBatch; }, false},
    {"different_coefficients", [] { return kSeq * DimExpr(2); }, [] { return kSeq * DimExpr(3); },
     false},
    {"constant_vs_symbol", [] { return DimExpr(1); }, [] { return kSeq; }, false},
    {"floordiv_not_mul", [] { return FloorDiv(kSeq, DimExpr(2)) * DimExpr(2); },
     [] { return kSeq; }, false},
};

BOOST_DATA_TEST_CASE(equality_is_structural_on_canonical_forms, data::make(kEqualCases), c) {
  DimExpr a = c.a(), b = c.b();
  BOOST_TEST((a == b) == c.equal, a << " vs " << b);
  BOOST_TEST((DimExpr::Compare(a, b) == 0) == c.equal);
  if (c.equal) BOOST_TEST(a.Hash() == b.Hash());
}

BOOST_AUTO_TEST_CASE(order_is_total_and_usable_as_a_key) {
  std::vector<DimExpr> v = {kSeq,        DimExpr(3), kBatch * kSeq,
                            DimExpr(-1), kBatch,     FloorDiv(kSeq, DimExpr(2))};
  for (const DimExpr& a : v)
    for (const DimExpr& b : v) {
      BOOST_TEST((a < b) + (b < a) + (a == b) == 1, a << " / " << b);
    }
  std::unordered_set<DimExpr> set = {kSeq * DimExpr(4), DimExpr(4) * kSeq, kSeq};
  BOOST_TEST(set.size() == 2u);
}

// ---- Evaluation ------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(evaluates_with_bindings) {
  std::map<std::string, int64_t> b = {{"batch", 2}, {"seq", 7}, {"h", 224}};
  BOOST_TEST(*(kBatch * kSeq * DimExpr(4) + DimExpr(1)).Evaluate(b) == 57);
  BOOST_TEST(*(FloorDiv(kH - DimExpr(1), DimExpr(2)) + DimExpr(1)).Evaluate(b) == 112);
  BOOST_TEST(*CeilDiv(kSeq, DimExpr(2)).Evaluate(b) == 4);
  BOOST_TEST(*Mod(kSeq, DimExpr(3)).Evaluate(b) == 1);
  BOOST_TEST(*Min(kSeq, kBatch).Evaluate(b) == 2);
  BOOST_TEST(*Max(kSeq - DimExpr(9), DimExpr(0)).Evaluate(b) == 0);
  BOOST_TEST(*FloorDiv(kSeq, kBatch).Evaluate(b) == 3);
  BOOST_TEST(*DimExpr(5).Evaluate({}) == 5);
}

BOOST_AUTO_TEST_CASE(evaluate_names_an_unbound_symbol) {
  StatusOr<int64_t> r = (kBatch * kSeq).Evaluate({{"batch", 2}});
  BOOST_TEST(r.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(r.status().message() == "symbol 'seq' is not bound");
}

BOOST_AUTO_TEST_CASE(evaluate_reports_division_by_zero) {
  StatusOr<int64_t> r = FloorDiv(kSeq, kBatch).Evaluate({{"batch", 0}, {"seq", 3}});
  BOOST_TEST(r.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(r.status().message() == "division by zero in 'floordiv(seq, batch)'");
  r = Mod(kSeq, DimExpr(0)).Evaluate({{"seq", 3}});
  BOOST_TEST(r.status().message() == "division by zero in 'mod(seq, 0)'");
}

BOOST_AUTO_TEST_CASE(evaluate_reports_overflow) {
  int64_t big = int64_t{1} << 40;
  StatusOr<int64_t> r = (kSeq * kBatch).Evaluate({{"batch", big}, {"seq", big}});
  BOOST_TEST(r.status().code() == StatusCode::kOutOfRange);
  BOOST_TEST(r.status().message().find("overflow") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(constant_folding_saturates_instead_of_overflowing) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  BOOST_TEST((DimExpr(max) + DimExpr(1)).const_value() == max);
  BOOST_TEST((DimExpr(int64_t{1} << 62) * DimExpr(4)).const_value() == max);
  BOOST_TEST((-DimExpr(std::numeric_limits<int64_t>::min())).const_value() == max);
}

// ---- Substitution, symbols, sign analysis ------------------------------------------------------

BOOST_AUTO_TEST_CASE(substitute_replaces_and_resimplifies) {
  DimExpr e = kSeq * DimExpr(4) + kBatch;
  BOOST_TEST(e.Substitute({{"seq", DimExpr(3)}}).ToString() == "batch + 12");
  BOOST_TEST(e.Substitute({{"seq", DimExpr(3)}, {"batch", DimExpr(1)}}) == DimExpr(13));
  BOOST_TEST(FloorDiv(kSeq, kBatch).Substitute({{"batch", kSeq}}) == DimExpr(1));
  BOOST_TEST(e.Substitute({{"other", DimExpr(1)}}) == e);
}

BOOST_AUTO_TEST_CASE(collects_symbols) {
  std::set<std::string> names;
  (FloorDiv(kSeq * kBatch, DimExpr(2)) + Min(kH, DimExpr(3))).CollectSymbols(&names);
  BOOST_TEST((names == std::set<std::string>{"batch", "h", "seq"}));
}

BOOST_AUTO_TEST_CASE(fresh_symbols_are_unique_and_skip_reserved_names) {
  SymbolGenerator gen;
  gen.Reserve("?1");
  DimExpr a = gen.Fresh(), b = gen.Fresh();
  BOOST_TEST(a.ToString() == "?0");
  BOOST_TEST(b.ToString() == "?2");
  BOOST_TEST(a.is_fresh_symbol());
  BOOST_TEST(!kSeq.is_fresh_symbol());
  BOOST_TEST((a * DimExpr(2) + kSeq).HasFreshSymbol());
  BOOST_TEST(!(kSeq * DimExpr(2)).HasFreshSymbol());
  BOOST_TEST(a != b);
}

BOOST_AUTO_TEST_CASE(sign_analysis_is_conservative) {
  BOOST_TEST(KnownNonNegative(kSeq * kBatch + DimExpr(1)));
  BOOST_TEST(KnownNonNegative(FloorDiv(kSeq, DimExpr(2))));
  BOOST_TEST(KnownNonNegative(Max(kSeq - DimExpr(1), DimExpr(0))));
  BOOST_TEST(!KnownNonNegative(kSeq - DimExpr(1)));
  BOOST_TEST(!KnownNonNegative(DimExpr(-1)));
  BOOST_TEST(!KnownNonNegative(kSeq - kBatch));
}

BOOST_AUTO_TEST_CASE(accessors_expose_the_canonical_structure) {
  DimExpr e = kSeq * DimExpr(4) + DimExpr(1);
  BOOST_TEST((e.kind() == DimExpr::Kind::kSum));
  BOOST_TEST(e.sum_constant() == 1);
  BOOST_TEST(e.operands().size() == 1u);
  BOOST_TEST(e.sum_coeffs()[0] == 4);
  BOOST_TEST((DimExpr(3).kind() == DimExpr::Kind::kConst));
  BOOST_TEST(kSeq.symbol_name() == "seq");
  BOOST_TEST(((kSeq * kBatch).kind() == DimExpr::Kind::kProduct));
  BOOST_TEST((ExactDiv(kSeq * DimExpr(6), DimExpr(4)) == std::nullopt));
  BOOST_TEST(ExactDiv(kSeq * kBatch * DimExpr(6), kSeq * DimExpr(2))->ToString() == "batch*3");
}

}  // namespace
}  // namespace kiln::compiler
