// Tests for jit/compute: each operator builder against a plain C++ reference on awkward shapes.
#define BOOST_TEST_MODULE compute_test
#include "jit/compute.h"

#include <algorithm>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>

#include "tests/jit/test_util.h"

namespace kiln::jit {

// For Boost.Test data-case logs (ADL looks in kiln::jit).
std::ostream& operator<<(std::ostream& os, Reduction r) {
  static const char* const kNames[] = {"sum", "mean", "prod", "max", "min", "argmax", "argmin"};
  return os << kNames[static_cast<int>(r)];
}

namespace {

using testing::Call;
using testing::CompileOrFail;
using testing::TestBuffer;
namespace data = boost::unit_test::data;
using Shape = std::vector<int64_t>;

std::string ShapeText(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// Row-major multi-index of flat position `flat` in `shape`.
Shape Unflatten(int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// Value of `b` at output index `out` under numpy broadcasting.
double BroadcastAt(const TestBuffer& b, const Shape& out) {
  Shape index;
  size_t offset = out.size() - b.shape().size();
  for (size_t d = 0; d < b.shape().size(); ++d)
    index.push_back(b.shape()[d] == 1 ? 0 : out[offset + d]);
  return b.GetDouble(b.Offset(index));
}

Shape BroadcastShape(const Shape& a, const Shape& b) {
  Shape out(std::max(a.size(), b.size()), 1);
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1,
            db = i < b.size() ? b[b.size() - 1 - i] : 1;
    out[out.size() - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

struct BroadcastCase {
  Shape a, b;
};

std::ostream& operator<<(std::ostream& os, const BroadcastCase& c) {
  return os << ShapeText(c.a) << "x" << ShapeText(c.b);
}

const std::vector<BroadcastCase> kBroadcastCases = {
    {{5, 7}, {5, 7}},       {{5, 7}, {7}},       {{5, 7}, {1, 7}},      {{5, 7}, {5, 1}},
    {{5, 1}, {1, 7}},       {{2, 3, 4}, {3, 1}}, {{1}, {1023}},         {{0, 3}, {3}},
    {{4, 1, 6}, {1, 5, 1}}, {{3, 17}, {}},       {{2, 2, 3, 33}, {33}}, {{1, 1}, {1, 1}},
};

// out = a * 2 - b in f32 with a in i32 (mixed dtypes are the IndexFn's business).
BOOST_DATA_TEST_CASE(binary_broadcasting_with_runtime_dims, data::make(kBroadcastCases), c) {
  Kernel k = ElementwiseBinary("axpy", {DType::kI32, static_cast<int>(c.a.size()), {}},
                               {DType::kF32, static_cast<int>(c.b.size()), {}}, DType::kF32,
                               [](Expr a, Expr b) { return Cast(DType::kF32, a) * 2.0 - b; });
  KernelFn fn = CompileOrFail(k);
  BOOST_REQUIRE(fn);
  Shape out_shape = BroadcastShape(c.a, c.b);
  TestBuffer a(DType::kI32, c.a), b(DType::kF32, c.b), out(DType::kF32, out_shape);
  for (int64_t e = 0; e < a.size(); ++e) a.SetI(e, e % 11 - 5);
  for (int64_t e = 0; e < b.size(); ++e) b.Set(e, 0.25 * (e % 13));
  Call(fn, {&a, &b, &out});
  for (int64_t e = 0; e < out.size(); ++e) {
    Shape index = Unflatten(e, out_shape);
    double want = static_cast<float>(BroadcastAt(a, index) * 2 - BroadcastAt(b, index));
    BOOST_TEST(out.At(e) == want, "at " << ShapeText(index));
  }
}

// Compile-time broadcast hints give the same answers as run-time decisions.
BOOST_AUTO_TEST_CASE(binary_broadcasting_with_static_hints) {
  using B = BroadcastDim;
  Kernel k = ElementwiseBinary("hinted", {DType::kF32, 2, {B::kSame, B::kOne}},
                               {DType::kF32, 1, {B::kSame}}, DType::kF32,
                               [](Expr a, Expr b) { return a - b; });
  KernelFn fn = CompileOrFail(k);
  BOOST_REQUIRE(fn);
  TestBuffer a(DType::kF32, {4, 1}), b(DType::kF32, {9}), out(DType::kF32, {4, 9});
  for (int64_t e = 0; e < 4; ++e) a.Set(e, 10.0 * e);
  for (int64_t e = 0; e < 9; ++e) b.Set(e, e);
  Call(fn, {&a, &b, &out});
  for (int64_t e = 0; e < 36; ++e) BOOST_TEST(out.At(e) == 10.0 * (e / 9) - e % 9);
}

// Three inputs with bool condition (Where), f16 storage and a fused expression.
BOOST_AUTO_TEST_CASE(ternary_where_on_f16_fuses) {
  Kernel k =
      Elementwise("where", {{DType::kBool, 1, {}}, {DType::kF16, 2, {}}, {DType::kF16, 0, {}}},
                  DType::kF16, [](const std::vector<Expr>& v) {
                    return Select(v[0], v[1] * v[1], v[2]);  // v[1], v[2] widened to f32
                  });
  KernelFn fn = CompileOrFail(k);
  BOOST_REQUIRE(fn);
  TestBuffer cond(DType::kBool, {5}), x(DType::kF16, {3, 5}), y(DType::kF16, {}),
      out(DType::kF16, {3, 5});
  for (int64_t e = 0; e < 5; ++e) cond.SetI(e, e % 2);
  for (int64_t e = 0; e < 15; ++e) x.Set(e, 1.5 + e);
  y.Set(0, -7.25);
  Call(fn, {&cond, &x, &y, &out});
  for (int64_t e = 0; e < 15; ++e) {
    double want = (e % 5) % 2 ? testing::RoundToHalf((1.5 + e) * (1.5 + e)) : -7.25;
    BOOST_TEST(out.At(e) == want, "e=" << e);
  }
}

BOOST_AUTO_TEST_CASE(unary_exp_within_libmvec_bound_on_odd_sizes) {
  Kernel k = ElementwiseUnary("exp", DType::kF32, DType::kF32, 3, [](Expr x) { return Exp(x); });
  KernelFn fn = CompileOrFail(k);
  BOOST_REQUIRE(fn);
  for (const Shape& shape : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{2, 1, 1023}, Shape{0, 4, 4}}) {
    TestBuffer in(DType::kF32, shape), out(DType::kF32, shape);
    for (int64_t e = 0; e < in.size(); ++e) in.Set(e, std::sin(e) * 20);
    Call(fn, {&in, &out});
    for (int64_t e = 0; e < in.size(); ++e) {
      double want = static_cast<float>(std::exp(static_cast<long double>(in.At(e))));
      BOOST_TEST(testing::UlpDistance(out.At(e), want, DType::kF32) <= 4, "e=" << e);
    }
  }
}

// ---- Reductions. ----

struct ReduceCase {
  Shape shape;
  std::vector<int> axes;
  bool keepdims;
};

std::ostream& operator<<(std::ostream& os, const ReduceCase& c) {
  os << ShapeText(c.shape) << " axes";
  for (int a : c.axes) os << "_" << a;
  return os << (c.keepdims ? " keep" : "");
}

const std::vector<ReduceCase> kReduceCases = {
    {{4, 300}, {1}, false},          {{4, 300}, {0}, false},
    {{4, 300}, {0}, true},           {{3, 5, 7}, {0, 2}, true},
    {{3, 5, 7}, {1}, false},         {{3, 5, 7}, {0, 1}, false},
    {{2, 3, 5, 600}, {1, 2}, false}, {{6}, {0}, false},
    {{5, 0, 3}, {1}, true},          {{4, 6}, {}, false},
};

const std::vector<Reduction> kReductions = {Reduction::kSum,   Reduction::kMean, Reduction::kProd,
                                            Reduction::kMax,   Reduction::kMin,  Reduction::kArgMax,
                                            Reduction::kArgMin};

double ReduceReference(Reduction r, const std::vector<double>& xs, DType t) {
  switch (r) {
    case Reduction::kSum: {
      double s = 0;
      for (double x : xs) s += x;
      return s;
    }
    case Reduction::kMean: {
      double s = 0;
      for (double x : xs) s += x;
      if (IsFloat(t)) return s / static_cast<double>(xs.size());
      return xs.empty() ? 0 : std::trunc(s / static_cast<double>(xs.size()));
    }
    case Reduction::kProd: {
      double p = 1;
      for (double x : xs) p *= x;
      return p;
    }
    default:
      break;
  }
  bool is_max = r == Reduction::kMax || r == Reduction::kArgMax;
  double best = is_max ? -INFINITY : INFINITY;
  if (!IsFloat(t)) best = is_max ? INT32_MIN : INT32_MAX;
  size_t at = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (is_max ? xs[i] > best : xs[i] < best) {
      best = xs[i];
      at = i;
    }
  }
  return r == Reduction::kArgMax || r == Reduction::kArgMin ? static_cast<double>(at) : best;
}

// Every case in f32; a representative subset (both code paths, keepdims, empty) in i32 and f16.
const std::vector<ReduceCase> kReduceSubset = {kReduceCases[0], kReduceCases[2], kReduceCases[4],
                                               kReduceCases[8]};

bool IsReduced(const ReduceCase& c, int d) {
  return std::count(c.axes.begin(), c.axes.end(), d) > 0;
}

Shape ReducedShape(const ReduceCase& c) {
  Shape out;
  for (int d = 0; d < static_cast<int>(c.shape.size()); ++d) {
    if (!IsReduced(c, d)) out.push_back(c.shape[d]);
    if (IsReduced(c, d) && c.keepdims) out.push_back(1);
  }
  return out;
}

// The input elements that reduce into output position `oi`, in row-major order.
std::vector<double> ReducedValues(const TestBuffer& in, const ReduceCase& c, const Shape& oi) {
  std::vector<double> xs;
  for (int64_t e = 0; e < in.size(); ++e) {
    Shape ii = Unflatten(e, c.shape);
    bool match = true;
    for (int d = 0, k = 0; d < static_cast<int>(c.shape.size()); ++d) {
      if (!IsReduced(c, d)) match = match && ii[d] == oi[k];
      if (!IsReduced(c, d) || c.keepdims) ++k;
    }
    if (match) xs.push_back(in.At(e));
  }
  return xs;
}

BOOST_DATA_TEST_CASE(reduce_kernels,
                     data::make(kReductions) *
                         (data::make({DType::kF32}) * data::make(kReduceCases) +
                          data::make({DType::kI32, DType::kF16}) * data::make(kReduceSubset)),
                     r, dt, c) {
  StatusOr<Kernel> k =
      ReduceKernel("reduce", r, dt, static_cast<int>(c.shape.size()), c.axes, c.keepdims);
  BOOST_REQUIRE(k.ok());
  KernelFn fn = CompileOrFail(*k);
  BOOST_REQUIRE(fn);
  Shape out_shape = ReducedShape(c);
  bool arg = r == Reduction::kArgMax || r == Reduction::kArgMin;
  TestBuffer in(dt, c.shape), out(arg ? DType::kI64 : dt, out_shape);
  for (int64_t e = 0; e < in.size(); ++e) {
    in.Set(e, IsFloat(dt) ? 0.875 + 0.0625 * ((e * 7) % 5) : (e * 7) % 9 - 4);
  }
  Call(fn, {&in, &out});
  for (int64_t o = 0; o < out.size(); ++o) {
    Shape oi = Unflatten(o, out_shape);
    std::vector<double> xs = ReducedValues(in, c, oi);
    double want = ReduceReference(r, xs, dt);
    if (dt == DType::kF16 && !arg) want = testing::RoundToHalf(want);
    double got = out.At(o);
    // f32 sums and products are reassociated: error within n ulps of the magnitude; f16 results
    // round once more, so one f16 ulp on top.
    double tolerance = 0;
    if (IsFloat(dt) && (r == Reduction::kSum || r == Reduction::kMean || r == Reduction::kProd)) {
      tolerance = (xs.size() + 1) * std::ldexp(std::fabs(want), -23);
      if (dt == DType::kF16) tolerance += std::ldexp(std::fabs(want), -10);
    }
    bool same = got == want || (std::isnan(got) && std::isnan(want));  // +-inf, empty mean
    BOOST_TEST((same || std::fabs(got - want) <= tolerance),
               "o=" << ShapeText(oi) << " got " << got << " want " << want);
  }
}

BOOST_AUTO_TEST_CASE(builders_reject_bad_parameters) {
  auto check = [](const Status& status, const char* fragment) {
    BOOST_TEST((status.code() == StatusCode::kInvalidArgument), status.ToString());
    BOOST_TEST(status.message().find(fragment) != std::string::npos, status.message());
  };
  check(ReduceKernel("r", Reduction::kSum, DType::kF32, 2, {2}, false).status(), "axis 2");
  check(TransposeKernel("t", DType::kF32, {0, 0}).status(), "repeats");
  check(TransposeKernel("t", DType::kF32, {0, 3}).status(), "axis 3");
  check(GatherKernel("g", DType::kF32, 2, DType::kI64, 1, -1).status(), "axis -1");
  check(ConcatKernel("c", DType::kF32, 2, 0, 0).status(), "at least one input");
  PoolSpec spec;
  spec.kernel = {0, 2};
  check(PoolKernel("p", DType::kF32, spec).status(), "must be >= 1");
}

}  // namespace
}  // namespace kiln::jit
