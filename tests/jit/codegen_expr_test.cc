// Tests for jit/codegen_expr: every scalar op over every dtype it accepts, against plain C++.
#define BOOST_TEST_MODULE codegen_expr_test
#include <algorithm>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>

#include "tests/jit/test_util.h"

namespace kiln::jit {
namespace {

using testing::Call;
using testing::CompileOrFail;
using testing::SameFloat;
using testing::TestBuffer;
using testing::WrapInt;
using testing::UlpDistance;
namespace data = boost::unit_test::data;

const std::vector<DType> kIntTypes = {DType::kI8,  DType::kU8,  DType::kI16, DType::kU16,
                                      DType::kI32, DType::kU32, DType::kI64, DType::kU64};
const std::vector<DType> kFloatTypes = {DType::kF32, DType::kF64};

// out[i] = op(a[i], b[i]) over n elements (n is out's runtime dim).
Kernel BinaryKernel(ExprOp op, DType in, DType out_type) {
  Buffer a = Buffer::Param("a", in, 1), b = Buffer::Param("b", in, 1);
  Buffer out = Buffer::Param("out", out_type, 1);
  Var i("i");
  return {ExprOpName(op),
          {a, b, out},
          {},
          For(i, DimOf(out, 0), ForKind::kVectorized,
              Store(out, {i}, Binary(op, Load(a, {i}), Load(b, {i}))))};
}

Kernel UnaryKernel(ExprOp op, DType in, DType out_type) {
  Buffer a = Buffer::Param("a", in, 1), out = Buffer::Param("out", out_type, 1);
  Var i("i");
  return {ExprOpName(op),
          {a, out},
          {},
          For(i, DimOf(out, 0), ForKind::kVectorized, Store(out, {i}, Unary(op, Load(a, {i}))))};
}

int64_t MinOf(DType t) {
  switch (t) {
    case DType::kI8:
      return INT8_MIN;
    case DType::kI16:
      return INT16_MIN;
    case DType::kI32:
      return INT32_MIN;
    case DType::kI64:
      return INT64_MIN;
    default:
      return 0;
  }
}

int64_t MaxOf(DType t) {
  switch (t) {
    case DType::kI8:
      return INT8_MAX;
    case DType::kU8:
      return UINT8_MAX;
    case DType::kI16:
      return INT16_MAX;
    case DType::kU16:
      return UINT16_MAX;
    case DType::kI32:
      return INT32_MAX;
    case DType::kU32:
      return UINT32_MAX;
    default:
      return INT64_MAX;
  }
}

// Values of `t` (u64 as its bits: 2^63 is INT64_MIN, the maximum -1).
std::vector<int64_t> IntSamples(DType t) {
  if (t == DType::kU64) {
    return {0, 1, 2, 3, 7, 100, INT64_MAX, INT64_MIN, INT64_MIN + 1, -2, -1};
  }
  std::vector<int64_t> out;
  for (int64_t v :
       {int64_t{0}, int64_t{1}, int64_t{-1}, int64_t{2}, int64_t{-2}, int64_t{3}, int64_t{-7},
        int64_t{7}, int64_t{100}, int64_t{-100}, MinOf(t), MaxOf(t), MinOf(t) + 1, MaxOf(t) - 1}) {
    if (v >= MinOf(t) && v <= MaxOf(t)) out.push_back(v);
  }
  return out;
}

// The documented integer semantics (kernel_ir.h), written plainly.
int64_t IntReference(ExprOp op, DType t, int64_t a, int64_t b) {
  auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  bool is_unsigned = IsUnsignedInteger(t);
  switch (op) {
    case ExprOp::kAdd:
      return WrapInt(ua + ub, t);
    case ExprOp::kSub:
      return WrapInt(ua - ub, t);
    case ExprOp::kMul:
      return WrapInt(ua * ub, t);
    case ExprOp::kMin:
      return is_unsigned ? static_cast<int64_t>(std::min(ua, ub)) : std::min(a, b);
    case ExprOp::kMax:
      return is_unsigned ? static_cast<int64_t>(std::max(ua, ub)) : std::max(a, b);
    default:
      break;
  }
  if (b == 0) return 0;
  bool quotient = op == ExprOp::kDiv || op == ExprOp::kFloorDiv;
  if (is_unsigned) return static_cast<int64_t>(quotient ? ua / ub : ua % ub);
  if (b == -1) return quotient ? WrapInt(0 - ua, t) : 0;
  int64_t q = a / b, r = a % b;
  bool adjust = r != 0 && ((r < 0) != (b < 0));
  switch (op) {
    case ExprOp::kDiv:
      return q;
    case ExprOp::kMod:
      return r;
    case ExprOp::kFloorDiv:
      return adjust ? q - 1 : q;
    default:
      return adjust ? r + b : r;
  }
}

const std::vector<ExprOp> kIntBinaryOps = {ExprOp::kAdd,      ExprOp::kSub, ExprOp::kMul,
                                           ExprOp::kDiv,      ExprOp::kMod, ExprOp::kFloorDiv,
                                           ExprOp::kFloorMod, ExprOp::kMin, ExprOp::kMax};

BOOST_DATA_TEST_CASE(integer_binary_ops_exact, data::make(kIntBinaryOps) * data::make(kIntTypes),
                     op, dt) {
  KernelFn fn = CompileOrFail(BinaryKernel(op, dt, dt));
  BOOST_REQUIRE(fn);
  std::vector<int64_t> s = IntSamples(dt);
  int64_t n = static_cast<int64_t>(s.size() * s.size());
  TestBuffer a(dt, {n}), b(dt, {n}), out(dt, {n});
  for (int64_t k = 0; k < n; ++k) {
    a.SetI(k, s[k / s.size()]);
    b.SetI(k, s[k % s.size()]);
  }
  Call(fn, {&a, &b, &out});
  for (int64_t k = 0; k < n; ++k) {
    BOOST_TEST(out.IntAt(k) == IntReference(op, dt, a.IntAt(k), b.IntAt(k)),
               ExprOpName(op) << "(" << a.IntAt(k) << ", " << b.IntAt(k) << ")");
  }
}

const std::vector<double> kFloatSamples = {0.0,
                                           -0.0,
                                           1.0,
                                           -1.0,
                                           2.5,
                                           -3.75,
                                           7.0,
                                           0.1,
                                           1e30,
                                           -1e-30,
                                           3.0,
                                           -2.0,
                                           1e-40,
                                           65504.0,
                                           std::numeric_limits<double>::infinity(),
                                           -std::numeric_limits<double>::infinity(),
                                           std::numeric_limits<double>::quiet_NaN()};

template <typename T>
double FloatReference(ExprOp op, T a, T b) {
  if ((op == ExprOp::kMin || op == ExprOp::kMax) && (std::isnan(a) || std::isnan(b))) {
    return std::numeric_limits<T>::quiet_NaN();
  }
  switch (op) {
    case ExprOp::kAdd:
      return a + b;
    case ExprOp::kSub:
      return a - b;
    case ExprOp::kMul:
      return a * b;
    case ExprOp::kDiv:
      return a / b;
    case ExprOp::kMod:
      return std::fmod(a, b);
    case ExprOp::kFloorDiv:
      return std::floor(a / b);
    case ExprOp::kFloorMod: {
      T m = std::fmod(a, b);
      if (m != 0 && ((m < 0) != (b < 0))) m += b;
      return m == 0 ? std::copysign(T(0), b) : m;
    }
    case ExprOp::kMin:
      return a == b ? (std::signbit(a) ? a : b) : (a < b ? a : b);
    default:
      return a == b ? (std::signbit(a) ? b : a) : (a > b ? a : b);  // kMax
  }
}

const std::vector<ExprOp> kFloatBinaryOps = {ExprOp::kAdd,      ExprOp::kSub, ExprOp::kMul,
                                             ExprOp::kDiv,      ExprOp::kMod, ExprOp::kFloorDiv,
                                             ExprOp::kFloorMod, ExprOp::kMin, ExprOp::kMax};

BOOST_DATA_TEST_CASE(float_binary_ops_exact, data::make(kFloatBinaryOps) * data::make(kFloatTypes),
                     op, dt) {
  KernelFn fn = CompileOrFail(BinaryKernel(op, dt, dt));
  BOOST_REQUIRE(fn);
  const auto& s = kFloatSamples;
  int64_t n = static_cast<int64_t>(s.size() * s.size());
  TestBuffer a(dt, {n}), b(dt, {n}), out(dt, {n});
  for (int64_t k = 0; k < n; ++k) {
    a.Set(k, s[k / s.size()]);
    b.Set(k, s[k % s.size()]);
  }
  Call(fn, {&a, &b, &out});
  for (int64_t k = 0; k < n; ++k) {
    double x = a.At(k), y = b.At(k);
    double expected = dt == DType::kF32
                          ? FloatReference<float>(op, static_cast<float>(x), static_cast<float>(y))
                          : FloatReference<double>(op, x, y);
    BOOST_TEST(SameFloat(out.At(k), expected), ExprOpName(op)
                                                   << "(" << x << ", " << y << ") = " << out.At(k)
                                                   << ", want " << expected);
  }
}

// pow goes through libmvec: within 4 ulp of the long-double result.
BOOST_DATA_TEST_CASE(pow_within_4_ulp, data::make(kFloatTypes), dt) {
  KernelFn fn = CompileOrFail(BinaryKernel(ExprOp::kPow, dt, dt));
  BOOST_REQUIRE(fn);
  std::vector<double> base = testing::RandomDoubles(1021, 0.0, 10.0, 1);
  std::vector<double> exponent = testing::RandomDoubles(1021, -8.0, 8.0, 2);
  for (double special : {0.0, 1.0, -2.0, 2.0, std::numeric_limits<double>::infinity()}) {
    base.push_back(special);
    exponent.push_back(3.0);
  }
  int64_t n = static_cast<int64_t>(base.size());
  TestBuffer a(dt, {n}), b(dt, {n}), out(dt, {n});
  for (int64_t k = 0; k < n; ++k) {
    a.Set(k, base[k]);
    b.Set(k, exponent[k]);
  }
  Call(fn, {&a, &b, &out});
  for (int64_t k = 0; k < n; ++k) {
    long double ref =
        std::pow(static_cast<long double>(a.At(k)), static_cast<long double>(b.At(k)));
    double expected = dt == DType::kF32 ? static_cast<float>(ref) : static_cast<double>(ref);
    BOOST_TEST(UlpDistance(out.At(k), expected, dt) <= 4,
               "pow(" << a.At(k) << ", " << b.At(k) << ") = " << out.At(k) << " want " << expected);
  }
}

struct UnaryCase {
  ExprOp op;
  double lo, hi;   // random inputs in [lo, hi)
  double max_ulp;  // from the op's numerics: 0 = exact (IEEE), 4 = libmvec, sigmoid composes
};

std::ostream& operator<<(std::ostream& os, const UnaryCase& c) { return os << ExprOpName(c.op); }

long double UnaryReference(ExprOp op, long double x) {
  switch (op) {
    case ExprOp::kNeg:
      return -x;
    case ExprOp::kAbs:
      return std::fabs(x);
    case ExprOp::kExp:
      return std::exp(x);
    case ExprOp::kLog:
      return std::log(x);
    case ExprOp::kSqrt:
      return std::sqrt(x);
    case ExprOp::kRsqrt:
      return 1 / std::sqrt(x);
    case ExprOp::kTanh:
      return std::tanh(x);
    case ExprOp::kSigmoid:
      return 1 / (1 + std::exp(-x));
    case ExprOp::kErf:
      return std::erf(x);
    case ExprOp::kSin:
      return std::sin(x);
    case ExprOp::kCos:
      return std::cos(x);
    case ExprOp::kFloor:
      return std::floor(x);
    case ExprOp::kCeil:
      return std::ceil(x);
    default:
      return std::nearbyint(x);  // kRound: the default mode rounds half to even
  }
}

const std::vector<UnaryCase> kUnaryCases = {
    {ExprOp::kNeg, -100, 100, 0},  {ExprOp::kAbs, -100, 100, 0},   {ExprOp::kExp, -80, 80, 4},
    {ExprOp::kLog, 1e-30, 1e6, 4}, {ExprOp::kSqrt, 0, 1e6, 0},     {ExprOp::kRsqrt, 1e-20, 1e6, 2},
    {ExprOp::kTanh, -12, 12, 4},   {ExprOp::kSigmoid, -90, 40, 6}, {ExprOp::kErf, -5, 5, 4},
    {ExprOp::kSin, -100, 100, 4},  {ExprOp::kCos, -100, 100, 4},   {ExprOp::kFloor, -100, 100, 0},
    {ExprOp::kCeil, -100, 100, 0}, {ExprOp::kRound, -100, 100, 0},
};

BOOST_DATA_TEST_CASE(float_unary_ops_within_ulp_bounds,
                     data::make(kUnaryCases) * data::make(kFloatTypes), c, dt) {
  KernelFn fn = CompileOrFail(UnaryKernel(c.op, dt, dt));
  BOOST_REQUIRE(fn);
  std::vector<double> xs = testing::RandomDoubles(1023, c.lo, c.hi, 7);
  for (double half : {-2.5, -0.5, 0.5, 1.5, 2.5}) xs.push_back(half);  // ties for round
  for (double special :
       {0.0, -0.0, 1.0, std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity(), std::numeric_limits<double>::quiet_NaN()}) {
    xs.push_back(special);
  }
  int64_t n = static_cast<int64_t>(xs.size());
  TestBuffer a(dt, {n}), out(dt, {n});
  for (int64_t k = 0; k < n; ++k) a.Set(k, xs[k]);
  Call(fn, {&a, &out});
  for (int64_t k = 0; k < n; ++k) {
    long double ref = UnaryReference(c.op, a.At(k));
    double expected = dt == DType::kF32 ? static_cast<float>(ref) : static_cast<double>(ref);
    BOOST_TEST(UlpDistance(out.At(k), expected, dt) <= c.max_ulp,
               ExprOpName(c.op) << "(" << a.At(k) << ") = " << out.At(k) << " want " << expected);
  }
}

// f32 exp is inlined (F32Math::Exp): every 4099th f32 bit pattern (overflow to inf, denormal
// and zero results, NaN) and a dense sweep over [-104, 89] against double exp rounded to f32.
// The polynomial's error (1.9e-9) and the f32 evaluation keep it within 1 ulp of the rounded
// value (a denormal result rounds twice, still within 1).
BOOST_AUTO_TEST_CASE(f32_exp_within_1_ulp_over_every_float_class) {
  KernelFn fn = CompileOrFail(UnaryKernel(ExprOp::kExp, DType::kF32, DType::kF32));
  BOOST_REQUIRE(fn);
  std::vector<float> xs;
  for (uint64_t bits = 0; bits <= 0xFFFFFFFFu; bits += 4099) {
    uint32_t b = static_cast<uint32_t>(bits);
    float x;
    std::memcpy(&x, &b, sizeof x);
    xs.push_back(x);
  }
  for (int k = -1040000; k <= 890000; ++k) xs.push_back(static_cast<float>(k) * 1e-4f);
  const float inf = std::numeric_limits<float>::infinity();
  for (float special : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                        88.72283f, 88.72284f, -87.33654f, -103.97f, -104.0f, -150.0f, 89.0f}) {
    xs.push_back(special);
  }
  int64_t n = static_cast<int64_t>(xs.size());
  TestBuffer a(DType::kF32, {n}), out(DType::kF32, {n});
  for (int64_t k = 0; k < n; ++k) a.Set(k, xs[k]);
  Call(fn, {&a, &out});
  double worst = 0;
  int64_t failures = 0;
  for (int64_t k = 0; k < n; ++k) {
    double expected = static_cast<float>(std::exp(static_cast<double>(xs[k])));
    double ulp = UlpDistance(out.At(k), expected, DType::kF32);
    worst = std::max(worst, ulp);
    if (ulp > 1 && ++failures <= 20) {
      BOOST_TEST(ulp <= 1, "exp(" << xs[k] << ") = " << out.At(k) << " want " << expected);
    }
  }
  BOOST_TEST(failures == 0);
  BOOST_TEST_MESSAGE("f32 exp: worst " << worst << " ulp over " << n << " inputs");
  int64_t specials = n - 12;
  BOOST_TEST(out.At(specials) == 1.0);
  BOOST_TEST(out.At(specials + 1) == 1.0);
  BOOST_TEST(out.At(specials + 2) == inf);
  BOOST_TEST(SameFloat(out.At(specials + 3), 0.0));
  BOOST_TEST(std::isnan(out.At(specials + 4)));
}

BOOST_DATA_TEST_CASE(isnan_isinf_on_floats_and_integers,
                     data::make({DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI32}),
                     dt) {
  const std::vector<double> xs = {0.0,
                                  -1.5,
                                  std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(),
                                  std::numeric_limits<double>::quiet_NaN(),
                                  1e300};
  for (ExprOp op : {ExprOp::kIsNan, ExprOp::kIsInf}) {
    KernelFn fn = CompileOrFail(UnaryKernel(op, dt, DType::kBool));
    BOOST_REQUIRE(fn);
    int64_t n = static_cast<int64_t>(xs.size());
    TestBuffer a(dt, {n}), out(DType::kBool, {n});
    for (int64_t k = 0; k < n; ++k) {
      if (dt == DType::kI32)
        a.SetI(k, k);
      else
        a.Set(k, xs[k]);
    }
    Call(fn, {&a, &out});
    for (int64_t k = 0; k < n; ++k) {
      double x = a.At(k);
      bool expected = op == ExprOp::kIsNan ? std::isnan(x) : std::isinf(x);
      BOOST_TEST(out.IntAt(k) == expected, ExprOpName(op) << "(" << x << ")");
    }
  }
}

BOOST_DATA_TEST_CASE(integer_neg_and_abs_wrap, data::make(kIntTypes), dt) {
  for (ExprOp op : {ExprOp::kNeg, ExprOp::kAbs}) {
    KernelFn fn = CompileOrFail(UnaryKernel(op, dt, dt));
    BOOST_REQUIRE(fn);
    std::vector<int64_t> s = IntSamples(dt);
    int64_t n = static_cast<int64_t>(s.size());
    TestBuffer a(dt, {n}), out(dt, {n});
    for (int64_t k = 0; k < n; ++k) a.SetI(k, s[k]);
    Call(fn, {&a, &out});
    for (int64_t k = 0; k < n; ++k) {
      int64_t x = s[k];
      bool negate = op == ExprOp::kNeg || (x < 0 && !IsUnsignedInteger(dt));
      int64_t expected = negate ? WrapInt(0 - static_cast<uint64_t>(x), dt) : x;
      BOOST_TEST(out.IntAt(k) == expected, ExprOpName(op) << "(" << x << ")");
    }
  }
}

// MulAdd: exact for integers (wrapping); for floats, fused or not, within one rounding of a*b+c.
BOOST_DATA_TEST_CASE(muladd_on_ints_and_floats,
                     data::make({DType::kI8, DType::kI32, DType::kI64, DType::kF32, DType::kF64}),
                     dt) {
  Buffer a = Buffer::Param("a", dt, 1), b = Buffer::Param("b", dt, 1),
         c = Buffer::Param("c", dt, 1);
  Buffer out = Buffer::Param("out", dt, 1);
  Var i("i");
  KernelFn fn =
      CompileOrFail({"muladd",
                     {a, b, c, out},
                     {},
                     For(i, DimOf(out, 0), ForKind::kVectorized,
                         Store(out, {i}, MulAdd(Load(a, {i}), Load(b, {i}), Load(c, {i}))))});
  BOOST_REQUIRE(fn);
  const int64_t n = 203;
  TestBuffer x(dt, {n}), y(dt, {n}), z(dt, {n}), r(dt, {n});
  for (int64_t k = 0; k < n; ++k) {
    if (IsFloat(dt)) {
      x.Set(k, std::sin(k) * 1e3);
      y.Set(k, std::cos(k) * 1e-2);
      z.Set(k, k - 100.0);
    } else {
      x.SetI(k, k * 37 - 3000);
      y.SetI(k, k % 13 - 6);
      z.SetI(k, 1000 - k);
    }
  }
  Call(fn, {&x, &y, &z, &r});
  for (int64_t k = 0; k < n; ++k) {
    if (!IsFloat(dt)) {
      uint64_t exact = static_cast<uint64_t>(x.IntAt(k)) * static_cast<uint64_t>(y.IntAt(k)) +
                       static_cast<uint64_t>(z.IntAt(k));
      BOOST_TEST(r.IntAt(k) == WrapInt(exact, dt), "k=" << k);
      continue;
    }
    long double exact = static_cast<long double>(x.At(k)) * y.At(k) + z.At(k);
    double rounded = dt == DType::kF32 ? static_cast<float>(exact) : static_cast<double>(exact);
    // Fused: correctly rounded. Unfused: the product's rounding adds at most half an ulp of it.
    double tolerance =
        std::fabs(x.At(k) * y.At(k)) * std::ldexp(1.0, dt == DType::kF32 ? -24 : -53) +
        std::fabs(rounded) * std::ldexp(1.0, dt == DType::kF32 ? -24 : -53);
    BOOST_TEST(std::fabs(r.At(k) - rounded) <= tolerance, "k=" << k);
  }
}

const std::vector<ExprOp> kCompareOps = {ExprOp::kEq, ExprOp::kNe, ExprOp::kLt,
                                         ExprOp::kLe, ExprOp::kGt, ExprOp::kGe};

template <typename T>
bool CompareReference(ExprOp op, T a, T b) {
  switch (op) {
    case ExprOp::kEq:
      return a == b;
    case ExprOp::kNe:
      return a != b;  // true for NaN
    case ExprOp::kLt:
      return a < b;
    case ExprOp::kLe:
      return a <= b;
    case ExprOp::kGt:
      return a > b;
    default:
      return a >= b;
  }
}

BOOST_DATA_TEST_CASE(comparisons_on_every_numeric_dtype,
                     data::make(kCompareOps) *
                         data::make({DType::kI8, DType::kU8, DType::kI16, DType::kU16, DType::kI32,
                                     DType::kU32, DType::kI64, DType::kU64, DType::kF32,
                                     DType::kF64, DType::kF16, DType::kBF16}),
                     op, dt) {
  KernelFn fn = CompileOrFail(BinaryKernel(op, dt, DType::kBool));
  BOOST_REQUIRE(fn);
  bool is_float = IsFloat(dt);
  std::vector<int64_t> ints = is_float ? std::vector<int64_t>{} : IntSamples(dt);
  size_t m = is_float ? kFloatSamples.size() : ints.size();
  int64_t n = static_cast<int64_t>(m * m);
  TestBuffer a(dt, {n}), b(dt, {n}), out(DType::kBool, {n});
  for (int64_t k = 0; k < n; ++k) {
    if (is_float) {
      a.Set(k, kFloatSamples[k / m]);
      b.Set(k, kFloatSamples[k % m]);
    } else {
      a.SetI(k, ints[k / m]);
      b.SetI(k, ints[k % m]);
    }
  }
  Call(fn, {&a, &b, &out});
  for (int64_t k = 0; k < n; ++k) {
    bool expected = is_float ? CompareReference(op, a.At(k), b.At(k))
                    : IsUnsignedInteger(dt)
                        ? CompareReference(op, static_cast<uint64_t>(a.IntAt(k)),
                                           static_cast<uint64_t>(b.IntAt(k)))
                        : CompareReference(op, a.IntAt(k), b.IntAt(k));
    BOOST_TEST(out.IntAt(k) == expected, ExprOpName(op)
                                             << "(" << a.At(k) << ", " << b.At(k) << ")");
  }
}

BOOST_AUTO_TEST_CASE(logic_ops_and_bool_equality) {
  for (ExprOp op : {ExprOp::kAnd, ExprOp::kOr, ExprOp::kEq, ExprOp::kNe}) {
    KernelFn fn = CompileOrFail(BinaryKernel(op, DType::kBool, DType::kBool));
    BOOST_REQUIRE(fn);
    TestBuffer a(DType::kBool, {4}), b(DType::kBool, {4}), out(DType::kBool, {4});
    for (int64_t k = 0; k < 4; ++k) {
      a.SetI(k, k / 2);
      b.SetI(k, k % 2);
    }
    Call(fn, {&a, &b, &out});
    for (int64_t k = 0; k < 4; ++k) {
      bool x = k / 2, y = k % 2;
      bool expected = op == ExprOp::kAnd  ? (x && y)
                      : op == ExprOp::kOr ? (x || y)
                      : op == ExprOp::kEq ? x == y
                                          : x != y;
      BOOST_TEST(out.IntAt(k) == expected, ExprOpName(op) << "(" << x << ", " << y << ")");
    }
  }
  Buffer a = Buffer::Param("a", DType::kBool, 1), out = Buffer::Param("out", DType::kBool, 1);
  Var i("i");
  KernelFn fn =
      CompileOrFail({"not",
                     {a, out},
                     {},
                     For(i, DimOf(out, 0), ForKind::kSerial, Store(out, {i}, Not(Load(a, {i}))))});
  BOOST_REQUIRE(fn);
  TestBuffer x(DType::kBool, {2}), y(DType::kBool, {2});
  x.SetI(1, 1);
  Call(fn, {&x, &y});
  BOOST_TEST(y.IntAt(0) == 1);
  BOOST_TEST(y.IntAt(1) == 0);
}

// On integers And / Or / Not are bitwise (ONNX BitwiseAnd/Or/Not), in every integer width.
BOOST_AUTO_TEST_CASE(and_or_not_are_bitwise_on_integers) {
  const int64_t xs[] = {0x5a, -1, 0x0f, -128}, ys[] = {0x3c, 0x71, -16, 0x7f};
  for (DType dt : {DType::kI8, DType::kU8, DType::kI16, DType::kI32, DType::kI64}) {
    for (ExprOp op : {ExprOp::kAnd, ExprOp::kOr}) {
      KernelFn fn = CompileOrFail(BinaryKernel(op, dt, dt));
      BOOST_REQUIRE(fn);
      TestBuffer a(dt, {4}), b(dt, {4}), out(dt, {4});
      for (int64_t k = 0; k < 4; ++k) {
        a.SetI(k, xs[k]);
        b.SetI(k, ys[k]);
      }
      Call(fn, {&a, &b, &out});
      for (int64_t k = 0; k < 4; ++k) {
        // Both sides read back through the buffer's dtype (u8 wraps -1 to 255).
        int64_t x = a.IntAt(k), y = b.IntAt(k);
        TestBuffer want(dt, {1});
        want.SetI(0, op == ExprOp::kAnd ? (x & y) : (x | y));
        BOOST_TEST(out.IntAt(k) == want.IntAt(0), ExprOpName(op) << "(" << x << ", " << y << ")");
      }
    }
    Buffer a = Buffer::Param("a", dt, 1), out = Buffer::Param("out", dt, 1);
    Var i("i");
    KernelFn fn = CompileOrFail(
        {"not", {a, out}, {}, For(i, DimOf(out, 0), ForKind::kSerial, Store(out, {i}, Not(Load(a, {i}))))});
    BOOST_REQUIRE(fn);
    TestBuffer x(dt, {4}), y(dt, {4});
    for (int64_t k = 0; k < 4; ++k) x.SetI(k, xs[k]);
    Call(fn, {&x, &y});
    for (int64_t k = 0; k < 4; ++k) {
      TestBuffer want(dt, {1});
      want.SetI(0, ~x.IntAt(k));
      BOOST_TEST(y.IntAt(k) == want.IntAt(0), DTypeName(dt) << " not " << x.IntAt(k));
    }
  }
}

// select copies values bit for bit, including the f16/bf16 storage types.
BOOST_DATA_TEST_CASE(select_every_dtype,
                     data::make({DType::kBool, DType::kI8, DType::kU8, DType::kI16, DType::kI32,
                                 DType::kI64, DType::kF16, DType::kBF16, DType::kF32, DType::kF64}),
                     dt) {
  Buffer c = Buffer::Param("c", DType::kBool, 1), a = Buffer::Param("a", dt, 1);
  Buffer b = Buffer::Param("b", dt, 1), out = Buffer::Param("out", dt, 1);
  Var i("i");
  KernelFn fn =
      CompileOrFail({"select",
                     {c, a, b, out},
                     {},
                     For(i, DimOf(out, 0), ForKind::kVectorized,
                         Store(out, {i}, Select(Load(c, {i}), Load(a, {i}), Load(b, {i}))))});
  BOOST_REQUIRE(fn);
  const int64_t n = 37;
  TestBuffer cond(DType::kBool, {n}), x(dt, {n}), y(dt, {n}), out_buf(dt, {n});
  for (int64_t k = 0; k < n; ++k) {
    cond.SetI(k, (k * 7) % 3 == 0);
    x.SetI(k, k % 2);
    y.SetI(k, 1 - k % 2);
    if (IsFloat(dt)) {
      x.Set(k, 0.25 * k);
      y.Set(k, -1.5 * k);
    }
  }
  Call(fn, {&cond, &x, &y, &out_buf});
  for (int64_t k = 0; k < n; ++k) {
    double expected = cond.IntAt(k) ? x.At(k) : y.At(k);
    BOOST_TEST(out_buf.At(k) == expected, "k=" << k);
  }
}

// ---- Reductions: a 3-D input reduced over an axis subset; the kept axes index the output. ----

struct ReduceCase {
  std::vector<int64_t> shape;
  std::vector<int> axes;
};

std::ostream& operator<<(std::ostream& os, const ReduceCase& c) {
  os << "shape";
  for (int64_t d : c.shape) os << "_" << d;
  os << " axes";
  for (int a : c.axes) os << "_" << a;
  return os;
}

Kernel ReduceKernel(ReduceOp op, DType t, const std::vector<int>& axes) {
  Buffer in = Buffer::Param("in", t, 3);
  DType out_type = (op == ReduceOp::kArgMax || op == ReduceOp::kArgMin) ? DType::kI64
                   : (t == DType::kF16 || t == DType::kBF16)            ? DType::kF32
                                                                        : t;
  int out_rank = 3 - static_cast<int>(axes.size());
  Buffer out = Buffer::Param("out", out_type, out_rank);
  std::vector<Var> loop_vars;
  std::vector<IterVar> reduce_axes;
  std::vector<Expr> index(3);
  for (int d = 0; d < 3; ++d) {
    Var v("x" + std::to_string(d));
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (reduced)
      reduce_axes.push_back({v, DimOf(in, d)});
    else
      loop_vars.push_back(v);
    index[d] = v;
  }
  std::vector<Expr> out_index(loop_vars.begin(), loop_vars.end());
  Stmt body = Store(out, out_index, Reduce(op, reduce_axes, Load(in, index)));
  for (int k = out_rank - 1; k >= 0; --k) {
    body = For(loop_vars[k], DimOf(out, k), k == 0 ? ForKind::kParallel : ForKind::kSerial, body);
  }
  return {std::string("reduce_") + ReduceOpName(op), {in, out}, {}, body};
}

struct ReduceResult {
  double value = 0;
  double abs_sum = 0;  // sum of |x| (bounds the summation error)
  int64_t count = 0;
};

ReduceResult ReduceReference(ReduceOp op, const std::vector<double>& xs) {
  ReduceResult r;
  r.count = static_cast<int64_t>(xs.size());
  bool is_max = op == ReduceOp::kMax || op == ReduceOp::kArgMax;
  double best = is_max ? -INFINITY : INFINITY;
  int64_t best_at = 0;
  double acc = op == ReduceOp::kProd ? 1 : 0;
  for (size_t k = 0; k < xs.size(); ++k) {
    double x = xs[k];
    r.abs_sum += std::fabs(x);
    acc = op == ReduceOp::kProd ? acc * x : acc + x;
    bool better = is_max ? x > best : x < best;
    if (better || (std::isnan(x) && !std::isnan(best))) {
      best = x;
      best_at = static_cast<int64_t>(k);
    }
  }
  if (op == ReduceOp::kSum || op == ReduceOp::kProd) r.value = acc;
  if (op == ReduceOp::kMax || op == ReduceOp::kMin) r.value = best;
  if (op == ReduceOp::kArgMax || op == ReduceOp::kArgMin) r.value = static_cast<double>(best_at);
  return r;
}

const std::vector<ReduceCase> kReduceCases = {
    {{3, 7, 17}, {2}},      {{3, 7, 17}, {1}},       {{3, 7, 17}, {0}},
    {{3, 7, 17}, {0, 2}},   {{3, 7, 17}, {0, 1, 2}}, {{2, 1023, 3}, {1}},
    {{1, 1, 1}, {0, 1, 2}}, {{4, 0, 5}, {1}},        {{5, 33, 2}, {1, 2}},
};
const std::vector<ReduceOp> kReduceOps = {ReduceOp::kSum, ReduceOp::kProd,   ReduceOp::kMax,
                                          ReduceOp::kMin, ReduceOp::kArgMax, ReduceOp::kArgMin};

BOOST_DATA_TEST_CASE(reductions_over_axis_sets,
                     data::make(kReduceOps) * data::make({DType::kF32, DType::kI32, DType::kBF16}) *
                         data::make(kReduceCases),
                     op, dt, c) {
  KernelFn fn = CompileOrFail(ReduceKernel(op, dt, c.axes));
  BOOST_REQUIRE(fn);
  TestBuffer in(dt, c.shape);
  // Few distinct values (first-occurrence ties matter), near 1 so products stay finite.
  for (int64_t k = 0; k < in.size(); ++k) {
    in.Set(k, IsFloat(dt) ? 0.75 + 0.125 * ((k * 37) % 5) : (k * 37) % 5 - 2);
  }
  std::vector<int64_t> out_shape;
  for (int d = 0; d < 3; ++d) {
    if (std::find(c.axes.begin(), c.axes.end(), d) == c.axes.end()) out_shape.push_back(c.shape[d]);
  }
  DType out_type = ReduceKernel(op, dt, c.axes).buffers[1]->dtype;
  TestBuffer out(out_type, out_shape);
  Call(fn, {&in, &out});
  for (int64_t o = 0; o < out.size(); ++o) {
    // Gather the reduced elements of output position o in row-major order over the axes.
    std::vector<double> xs;
    for (int64_t k = 0; k < in.size(); ++k) {
      int64_t idx[3] = {k / (c.shape[1] * c.shape[2]), (k / c.shape[2]) % c.shape[1],
                        k % c.shape[2]};
      int64_t flat = 0;
      for (int d = 0; d < 3; ++d) {
        bool reduced = std::find(c.axes.begin(), c.axes.end(), d) != c.axes.end();
        if (!reduced) flat = flat * c.shape[d] + idx[d];
      }
      if (flat == o) xs.push_back(in.At(k));
    }
    ReduceResult ref = ReduceReference(op, xs);
    if (xs.empty() && dt == DType::kI32 && op == ReduceOp::kMax) ref.value = INT32_MIN;
    if (xs.empty() && dt == DType::kI32 && op == ReduceOp::kMin) ref.value = INT32_MAX;
    double got = out.At(o);
    if (IsFloat(out_type) && (op == ReduceOp::kSum || op == ReduceOp::kProd)) {
      // Reassociated (vectorized) f32 accumulation: |error| <= n * eps * sum|x| (prod: relative).
      double scale = op == ReduceOp::kSum ? ref.abs_sum : std::fabs(ref.value);
      double bound = (ref.count + 1) * std::ldexp(1.0, -23) * scale;
      BOOST_TEST(std::fabs(got - ref.value) <= bound,
                 "o=" << o << " got " << got << " want " << ref.value);
    } else {
      BOOST_TEST(got == ref.value, "o=" << o);
    }
  }
}

BOOST_AUTO_TEST_CASE(reductions_propagate_nan_and_argmax_takes_first_nan) {
  const std::vector<double> xs = {1.0, 5.0, NAN, 7.0, NAN, 5.0};
  for (ReduceOp op : kReduceOps) {
    KernelFn fn = CompileOrFail(ReduceKernel(op, DType::kF32, {2}));
    BOOST_REQUIRE(fn);
    TestBuffer in(DType::kF32, {1, 1, 6});
    for (int64_t k = 0; k < 6; ++k) in.Set(k, xs[k]);
    bool arg = op == ReduceOp::kArgMax || op == ReduceOp::kArgMin;
    TestBuffer out(arg ? DType::kI64 : DType::kF32, {1, 1});
    Call(fn, {&in, &out});
    if (arg) {
      BOOST_TEST(out.IntAt(0) == 2, ReduceOpName(op));
    } else {
      BOOST_TEST(std::isnan(out.At(0)), ReduceOpName(op));
    }
  }
}

BOOST_AUTO_TEST_CASE(empty_reductions_give_identities) {
  const std::vector<std::pair<ReduceOp, double>> expected = {
      {ReduceOp::kSum, 0.0},      {ReduceOp::kProd, 1.0},   {ReduceOp::kMax, -INFINITY},
      {ReduceOp::kMin, INFINITY}, {ReduceOp::kArgMax, 0.0}, {ReduceOp::kArgMin, 0.0}};
  for (const auto& [op, value] : expected) {
    KernelFn fn = CompileOrFail(ReduceKernel(op, DType::kF32, {1}));
    BOOST_REQUIRE(fn);
    TestBuffer in(DType::kF32, {2, 0, 3});
    bool arg = op == ReduceOp::kArgMax || op == ReduceOp::kArgMin;
    TestBuffer out(arg ? DType::kI64 : DType::kF32, {2, 3});
    Call(fn, {&in, &out});
    for (int64_t o = 0; o < 6; ++o) BOOST_TEST(out.At(o) == value, ReduceOpName(op));
  }
  KernelFn fn = CompileOrFail(ReduceKernel(ReduceOp::kMax, DType::kI32, {1}));
  BOOST_REQUIRE(fn);
  TestBuffer in(DType::kI32, {1, 0, 1}), out(DType::kI32, {1, 1});
  Call(fn, {&in, &out});
  BOOST_TEST(out.IntAt(0) == INT32_MIN);
}

// The unsigned edge cases a signed instruction would get wrong, as known answers.
BOOST_AUTO_TEST_CASE(unsigned_edge_cases_known_answers) {
  struct Case {
    ExprOp op;
    DType t;
    int64_t a, b;  // bits
    int64_t want;  // bits (bool: 0 / 1)
  };
  const int64_t two63 = INT64_MIN;  // u64 2^63
  const Case cases[] = {
      {ExprOp::kDiv, DType::kU32, 0xFFFFFFFF, 2, 0x7FFFFFFF},  // sdiv would give 0 (-1 / 2)
      {ExprOp::kMod, DType::kU32, 0xFFFFFFFF, 10, 5},
      {ExprOp::kDiv, DType::kU64, -1, 2, INT64_MAX},
      {ExprOp::kFloorMod, DType::kU64, two63 + 5, 10, 3},  // 9223372036854775813 % 10
      {ExprOp::kGt, DType::kU64, two63 + 1, 0, 1},         // signed: negative, not > 0
      {ExprOp::kLt, DType::kU64, two63, 1, 0},
      {ExprOp::kGe, DType::kU32, 0x80000000, 0x7FFFFFFF, 1},
      {ExprOp::kMax, DType::kU64, two63, 1, two63},
      {ExprOp::kMin, DType::kU16, 0xFFFF, 1, 1},
      {ExprOp::kMax, DType::kU16, 0x8000, 0x7FFF, 0x8000},
  };
  for (const Case& c : cases) {
    bool compare = c.op >= ExprOp::kEq && c.op <= ExprOp::kGe;
    DType out_type = compare ? DType::kBool : c.t;
    KernelFn fn = CompileOrFail(BinaryKernel(c.op, c.t, out_type));
    BOOST_REQUIRE(fn);
    TestBuffer a(c.t, {1}), b(c.t, {1}), out(out_type, {1});
    a.SetI(0, c.a);
    b.SetI(0, c.b);
    Call(fn, {&a, &b, &out});
    BOOST_TEST(out.IntAt(0) == c.want,
               ExprOpName(c.op) << "." << DTypeShortName(c.t) << "(" << c.a << ", " << c.b << ")");
  }
}

}  // namespace
}  // namespace kiln::jit
