// Tests for jit/codegen_cast: every dtype pair, rounding to nearest even, saturation, double
// rounding.
#define BOOST_TEST_MODULE codegen_cast_test
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>

#include "tests/jit/test_util.h"

namespace kiln::jit {
namespace {

using testing::Call;
using testing::CompileOrFail;
using testing::SameFloat;
using testing::TestBuffer;
using testing::WrapInt;
namespace data = boost::unit_test::data;

const std::vector<DType> kAllTypes = {
    DType::kBool, DType::kI8,  DType::kU8,  DType::kI16,  DType::kU16, DType::kI32, DType::kU32,
    DType::kI64,  DType::kU64, DType::kF16, DType::kBF16, DType::kF32, DType::kF64};

constexpr double kInf = std::numeric_limits<double>::infinity();

// Floats chosen for the narrowing rules: ties (to even) in f16 and bf16, the f16 overflow edge,
// f16 subnormals, saturation edges of every integer type, and values whose correct f16/bf16
// rounding is lost if f64 is first rounded to f32 (double rounding).
std::vector<double> FloatSamples(DType t) {
  std::vector<double> xs = {0.0,
                            -0.0,
                            0.5,
                            1.5,
                            2.5,
                            -2.5,
                            127.9,
                            128.0,
                            -128.9,
                            -129.0,
                            255.5,
                            256.0,
                            32767.5,
                            -32769.0,
                            65504.0,
                            65519.0,
                            65520.0,
                            1e10,
                            -1e10,
                            3e38,
                            1e-8,
                            5.960464477539063e-08,
                            2.9802322387695312e-08,
                            1 + std::ldexp(1, -11),
                            1 + 3 * std::ldexp(1, -11),
                            1 + std::ldexp(1, -8),
                            1 + 3 * std::ldexp(1, -8),
                            2147483647.0,
                            -2147483648.0,
                            9.3e18,
                            -9.3e18,
                            kInf,
                            -kInf,
                            std::numeric_limits<double>::quiet_NaN()};
  if (t == DType::kF64) {
    xs.push_back(1 + std::ldexp(1, -11) + std::ldexp(1, -40));  // f16: rounds up, not to even
    xs.push_back(1 + std::ldexp(1, -8) + std::ldexp(1, -30));   // bf16: likewise
    xs.push_back(1e300);
    xs.push_back(std::ldexp(1, -1070));  // f64 subnormal
  }
  return xs;
}

std::vector<int64_t> IntSamples(DType t) {
  std::vector<int64_t> xs = {0,
                             1,
                             -1,
                             2,
                             7,
                             -7,
                             100,
                             -100,
                             127,
                             -128,
                             255,
                             256,
                             -129,
                             32767,
                             -32768,
                             65504,
                             65520,
                             1077936129,  // 2^30+2^22+1: bf16 trap
                             INT32_MAX,
                             INT32_MIN,
                             INT64_MAX,
                             INT64_MIN,
                             16777217,
                             65535,
                             UINT32_MAX,     // unsigned maxima; u64's are the bits below
                             INT64_MIN + 1,  // u64 2^63 + 1
                             -4096};         // u64 2^64 - 4096: exact in f64, f32 rounds up
  std::vector<int64_t> out;
  for (int64_t x : xs) {
    TestBuffer probe(t, {1});
    probe.SetI(0, x);
    if (probe.IntAt(0) == x) out.push_back(x);  // only values the source dtype holds
  }
  return out;
}

int64_t Saturate(double v, DType to) {
  if (std::isnan(v)) return 0;
  long double lo = 0, hi = 0;
  switch (to) {
    case DType::kI8:
      lo = INT8_MIN, hi = INT8_MAX;
      break;
    case DType::kU8:
      lo = 0, hi = UINT8_MAX;
      break;
    case DType::kI16:
      lo = INT16_MIN, hi = INT16_MAX;
      break;
    case DType::kI32:
      lo = INT32_MIN, hi = INT32_MAX;
      break;
    case DType::kU16:
      lo = 0, hi = UINT16_MAX;
      break;
    case DType::kU32:
      lo = 0, hi = UINT32_MAX;
      break;
    case DType::kU64: {  // the result's bits
      long double t = std::trunc(static_cast<long double>(v));
      if (t <= 0) return 0;
      if (t >= 0x1p64L) return -1;
      return static_cast<int64_t>(static_cast<uint64_t>(t));
    }
    default:
      lo = INT64_MIN, hi = INT64_MAX;
      break;
  }
  long double t = std::trunc(static_cast<long double>(v));
  if (t <= lo) return static_cast<int64_t>(lo);
  if (t >= hi) return static_cast<int64_t>(hi);
  return static_cast<int64_t>(t);
}

// Expected result of casting a source element to `to`, from the definitions in kernel_ir.h.
struct Expected {
  bool is_float;
  double f;
  int64_t i;
};

// `iv` of a u64 source holds its bits. The samples are exact in f64 or far from a tie of the
// narrower types, so `exact` may round through f64 (64-bit ties are tested on their own below).
Expected Reference(bool src_float, double fv, int64_t iv, DType from, DType to) {
  if (to == DType::kBool) return {false, 0, src_float ? (fv != 0 || std::isnan(fv)) : iv != 0};
  if (IsFloat(to)) {
    bool u64 = from == DType::kU64;
    double exact = src_float ? fv
                   : u64     ? static_cast<double>(static_cast<uint64_t>(iv))
                             : static_cast<double>(iv);
    switch (to) {
      case DType::kF16:
        return {true, testing::RoundToHalf(exact), 0};
      case DType::kBF16:
        return {true, testing::RoundToBFloat16(exact), 0};
      case DType::kF32:
        return {true,
                src_float ? static_cast<float>(fv)
                : u64     ? static_cast<float>(static_cast<uint64_t>(iv))
                          : static_cast<float>(iv),
                0};
      default:
        return {true, exact, 0};
    }
  }
  return {false, 0, src_float ? Saturate(fv, to) : WrapInt(iv, to)};
}

BOOST_DATA_TEST_CASE(cast_every_dtype_pair, data::make(kAllTypes) * data::make(kAllTypes), from,
                     to) {
  Buffer in = Buffer::Param("in", from, 1), out = Buffer::Param("out", to, 1);
  Var i("i");
  KernelFn fn = CompileOrFail(
      {"cast",
       {in, out},
       {},
       For(i, DimOf(out, 0), ForKind::kVectorized, Store(out, {i}, Cast(to, Load(in, {i}))))});
  BOOST_REQUIRE(fn);
  bool src_float = IsFloat(from);
  std::vector<double> fs = src_float ? FloatSamples(from) : std::vector<double>{};
  std::vector<int64_t> is = src_float ? std::vector<int64_t>{} : IntSamples(from);
  if (from == DType::kBool) is = {0, 1};
  int64_t n = static_cast<int64_t>(src_float ? fs.size() : is.size());
  TestBuffer a(from, {n}), b(to, {n});
  for (int64_t k = 0; k < n; ++k) {
    if (src_float)
      a.Set(k, fs[k]);
    else
      a.SetI(k, is[k]);
  }
  Call(fn, {&a, &b});
  for (int64_t k = 0; k < n; ++k) {
    Expected e = Reference(src_float, a.At(k), a.IntAt(k), from, to);
    if (e.is_float) {
      BOOST_TEST(SameFloat(b.At(k), e.f), "cast(" << (src_float ? a.At(k) : a.IntAt(k))
                                                  << ") = " << b.At(k) << " want " << e.f);
    } else {
      BOOST_TEST(b.IntAt(k) == e.i, "cast(" << (src_float ? a.At(k) : a.IntAt(k))
                                            << ") = " << b.IntAt(k) << " want " << e.i);
    }
  }
}

// Narrowing f32 -> f16/bf16 over many random values, bit-exact against the definition.
BOOST_DATA_TEST_CASE(f32_to_storage_floats_round_to_nearest_even,
                     data::make({DType::kF16, DType::kBF16}), to) {
  Buffer in = Buffer::Param("in", DType::kF32, 1), out = Buffer::Param("out", to, 1);
  Var i("i");
  KernelFn fn = CompileOrFail(
      {"narrow",
       {in, out},
       {},
       For(i, DimOf(out, 0), ForKind::kVectorized, Store(out, {i}, Cast(to, Load(in, {i}))))});
  BOOST_REQUIRE(fn);
  std::vector<double> xs = testing::RandomDoubles(4001, -70000, 70000, 11);
  std::vector<double> small = testing::RandomDoubles(2000, -1e-4, 1e-4, 12);
  xs.insert(xs.end(), small.begin(), small.end());
  int64_t n = static_cast<int64_t>(xs.size());
  TestBuffer a(DType::kF32, {n}), b(to, {n});
  for (int64_t k = 0; k < n; ++k) a.Set(k, xs[k]);
  Call(fn, {&a, &b});
  for (int64_t k = 0; k < n; ++k) {
    double want =
        to == DType::kF16 ? testing::RoundToHalf(a.At(k)) : testing::RoundToBFloat16(a.At(k));
    BOOST_TEST(b.At(k) == want, "x=" << a.At(k));
  }
}

// f16/bf16 arithmetic computes in f32: (a + b) is exact in f32 here, then rounds once on store.
BOOST_AUTO_TEST_CASE(storage_float_arithmetic_computes_in_f32) {
  for (DType t : {DType::kF16, DType::kBF16}) {
    Buffer a = Buffer::Param("a", t, 1), b = Buffer::Param("b", t, 1);
    Buffer out = Buffer::Param("out", t, 1);
    Var i("i");
    Expr sum = Load(a, {i}) + Load(b, {i});
    BOOST_TEST((sum.dtype() == DType::kF32));
    KernelFn fn =
        CompileOrFail({"add16",
                       {a, b, out},
                       {},
                       For(i, DimOf(out, 0), ForKind::kVectorized, Store(out, {i}, Cast(t, sum)))});
    BOOST_REQUIRE(fn);
    std::vector<double> xs = testing::RandomDoubles(301, -300, 300, 5);
    std::vector<double> ys = testing::RandomDoubles(301, -3, 3, 6);
    int64_t n = static_cast<int64_t>(xs.size());
    TestBuffer x(t, {n}), y(t, {n}), z(t, {n});
    for (int64_t k = 0; k < n; ++k) {
      x.Set(k, xs[k]);
      y.Set(k, ys[k]);
    }
    Call(fn, {&x, &y, &z});
    for (int64_t k = 0; k < n; ++k) {
      double exact = x.At(k) + y.At(k);
      double want =
          t == DType::kF16 ? testing::RoundToHalf(exact) : testing::RoundToBFloat16(exact);
      BOOST_TEST(z.At(k) == want, "k=" << k);
    }
  }
}

// 64-bit integers just above a tie of bf16 / f16: rounding through f64 would land on the tie and
// round to even (down); a correct cast rounds up. Known answers, worked out by hand.
BOOST_AUTO_TEST_CASE(wide_integers_to_storage_floats_round_once) {
  struct Case {
    DType from, to;
    int64_t bits;
    double want;
  };
  const Case cases[] = {
      // u64 2^63 + 2^55 + 1: bf16 keeps 8 bits, its ulp there is 2^56.
      {DType::kU64, DType::kBF16,
       static_cast<int64_t>((uint64_t{1} << 63) + (uint64_t{1} << 55) + 1),
       std::ldexp(1, 63) + std::ldexp(1, 56)},
      {DType::kI64, DType::kBF16, (int64_t{1} << 62) + (int64_t{1} << 54) + 1,
       std::ldexp(1, 62) + std::ldexp(1, 55)},
      {DType::kI64, DType::kBF16, -((int64_t{1} << 62) + (int64_t{1} << 54) + 1),
       -(std::ldexp(1, 62) + std::ldexp(1, 55))},
      {DType::kI64, DType::kBF16, INT64_MIN, -std::ldexp(1, 63)},
      // f16's largest finite is 65504; anything from 65520 up is +inf.
      {DType::kU64, DType::kF16, -1, std::numeric_limits<double>::infinity()},
      {DType::kU32, DType::kBF16, static_cast<int64_t>(0xFFFFFFFFu), std::ldexp(1, 32)},
      // u32 2^31 + 2^23 + 1 (a bf16 tie plus one; exact in f64, not in f32).
      {DType::kU32, DType::kBF16, (int64_t{1} << 31) + (int64_t{1} << 23) + 1,
       std::ldexp(1, 31) + std::ldexp(1, 24)},
  };
  for (const Case& c : cases) {
    Buffer in = Buffer::Param("in", c.from, 1), out = Buffer::Param("out", c.to, 1);
    Var i("i");
    KernelFn fn = CompileOrFail(
        {"cast",
         {in, out},
         {},
         For(i, DimOf(out, 0), ForKind::kSerial, Store(out, {i}, Cast(c.to, Load(in, {i}))))});
    BOOST_REQUIRE(fn);
    TestBuffer a(c.from, {1}), b(c.to, {1});
    a.SetI(0, c.bits);
    Call(fn, {&a, &b});
    BOOST_TEST(b.At(0) == c.want, DTypeShortName(c.from)
                                      << " bits " << c.bits << " -> " << DTypeShortName(c.to));
  }
}

}  // namespace
}  // namespace kiln::jit
