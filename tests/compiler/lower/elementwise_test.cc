// Lowerings of the elementwise family (compiler/lower/elementwise.cc): each op run through the
// JIT on ONNX-text models and checked against plain C++ references, over awkward sizes,
// broadcasting, symbolic dims, dtypes and attributes.
#define BOOST_TEST_MODULE elementwise_test
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

#include "compiler/lower/lower.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::Compare;
using testing::F32;
using testing::I64;
using testing::MakeTensor;
using testing::Model;
using testing::RandomTensor;

namespace data = boost::unit_test::data;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

const LoweringTable& Table() {
  static const LoweringTable* table = [] {
    auto* t = new LoweringTable;
    AddElementwiseLowerings(*t);
    return t;
  }();
  return *table;
}

std::vector<TensorDataRef> Run(const std::string& model, const std::vector<TensorDataRef>& in) {
  StatusOr<std::vector<TensorDataRef>> out = testing::RunModel(model, in, Table());
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message() + "\nmodel:\n" + model);
  return *out;
}

void Expect(const TensorData& actual, const TensorDataRef& expected, double rtol = 1e-6,
            double atol = 1e-6) {
  std::string diff = Compare(actual, *expected, rtol, atol);
  BOOST_TEST(diff.empty(), diff);
}

// expected[i] = f(a[i]) with a's dims, as `dtype`.
TensorDataRef Map(const TensorData& a, DType dtype, const std::function<double(double)>& f) {
  std::vector<double> v = a.ToDoubles();
  for (double& x : v) x = f(x);
  return MakeTensor(dtype, a.dims(), v);
}

// Numpy broadcast of a and b into `dims`, combined with f.
TensorDataRef Broadcast2(const TensorData& a, const TensorData& b, DType dtype,
                         const std::vector<int64_t>& dims,
                         const std::function<double(double, double)>& f) {
  auto at = [&](const TensorData& t, const std::vector<int64_t>& idx) {
    size_t off = idx.size() - t.dims().size();
    int64_t flat = 0;
    for (size_t d = 0; d < t.dims().size(); ++d) {
      int64_t i = t.dims()[d] == 1 ? 0 : idx[off + d];
      flat = flat * t.dims()[d] + i;
    }
    return t.ToDoubles()[flat];
  };
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::vector<double> out;
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t rest = k;
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      idx[d] = rest % dims[d];
      rest /= dims[d];
    }
    out.push_back(f(at(a, idx), at(b, idx)));
  }
  return MakeTensor(dtype, dims, out);
}

double RoundHalfEven(double x) { return std::nearbyint(x); }

// ---- Unary ops -------------------------------------------------------------------------------

struct UnaryCase {
  const char* op;
  const char* attrs;  // "<alpha = 0.5>" or ""
  double lo, hi;      // input range
  std::function<double(double)> ref;
  double rtol;
};

std::ostream& operator<<(std::ostream& os, const UnaryCase& c) { return os << c.op << c.attrs; }

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

const UnaryCase kUnaryCases[] = {
    {"Abs", "", -5, 5, [](double x) { return std::fabs(x); }, 0},
    {"Neg", "", -5, 5, [](double x) { return -x; }, 0},
    {"Relu", "", -5, 5, [](double x) { return std::max(x, 0.0); }, 0},
    {"Sign", "", -2, 2, [](double x) { return x > 0   ? 1.0
                                              : x < 0 ? -1.0
                                                      : 0.0; }, 0},
    {"Sigmoid", "", -10, 10, Sigmoid, 2e-6},
    {"Tanh", "", -5, 5, [](double x) { return std::tanh(x); }, 2e-6},
    {"Softplus", "", -20, 20, [](double x) { return std::log1p(std::exp(x)); }, 2e-6},
    {"Softsign", "", -5, 5, [](double x) { return x / (1 + std::fabs(x)); }, 1e-6},
    {"Erf", "", -3, 3, [](double x) { return std::erf(x); }, 2e-6},
    {"Sqrt", "", 0, 100, [](double x) { return std::sqrt(x); }, 1e-6},
    {"Reciprocal", "", 0.5, 10, [](double x) { return 1 / x; }, 1e-6},
    {"Exp", "", -10, 10, [](double x) { return std::exp(x); }, 2e-6},
    {"Log", "", 0.01, 100, [](double x) { return std::log(x); }, 2e-6},
    {"Floor", "", -5, 5, [](double x) { return std::floor(x); }, 0},
    {"Ceil", "", -5, 5, [](double x) { return std::ceil(x); }, 0},
    {"Round", "", -5, 5, RoundHalfEven, 0},
    {"Sin", "", -6, 6, [](double x) { return std::sin(x); }, 2e-6},
    {"Cos", "", -6, 6, [](double x) { return std::cos(x); }, 2e-6},
    {"Tan", "", -1.5, 1.5, [](double x) { return std::tan(x); }, 1e-6},
    {"Asin", "", -1, 1, [](double x) { return std::asin(x); }, 1e-6},
    {"Acos", "", -1, 1, [](double x) { return std::acos(x); }, 1e-6},
    {"Atan", "", -20, 20, [](double x) { return std::atan(x); }, 1e-6},
    {"Sinh", "", -5, 5, [](double x) { return std::sinh(x); }, 1e-6},
    {"Cosh", "", -5, 5, [](double x) { return std::cosh(x); }, 1e-6},
    {"Asinh", "", -50, 50, [](double x) { return std::asinh(x); }, 1e-6},
    {"Acosh", "", 1, 50, [](double x) { return std::acosh(x); }, 1e-6},
    {"Atanh", "", -0.999, 0.999, [](double x) { return std::atanh(x); }, 1e-6},
    {"LeakyRelu", "", -5, 5, [](double x) { return x < 0 ? double(0.01f) * x : x; }, 1e-6},
    {"LeakyRelu", "<alpha = 0.3>", -5, 5, [](double x) { return x < 0 ? double(0.3f) * x : x; },
     1e-6},
    {"Elu", "<alpha = 0.5>", -5, 5, [](double x) { return x < 0 ? 0.5 * (std::exp(x) - 1) : x; },
     2e-6},
    {"Selu", "", -5, 5,
     [](double x) {
       const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
       return x <= 0 ? g * (a * std::exp(x) - a) : g * x;
     },
     2e-6},
    {"Selu", "<alpha = 2.0, gamma = 3.0>", -5, 5,
     [](double x) { return x <= 0 ? 3 * (2 * std::exp(x) - 2) : 3 * x; }, 2e-6},
    {"Celu", "<alpha = 2.0>", -5, 5,
     [](double x) { return std::max(0.0, x) + std::min(0.0, 2 * (std::exp(x / 2) - 1)); }, 2e-6},
    {"HardSigmoid", "", -5, 5,
     [](double x) { return std::max(0.0, std::min(1.0, double(0.2f) * x + 0.5)); }, 1e-6},
    {"HardSigmoid", "<alpha = 0.5, beta = 0.25>", -5, 5,
     [](double x) { return std::max(0.0, std::min(1.0, 0.5 * x + 0.25)); }, 1e-6},
    {"HardSwish", "", -5, 5, [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); },
     1e-6},
    {"ThresholdedRelu", "", -3, 3, [](double x) { return x > 1 ? x : 0; }, 0},
    {"ThresholdedRelu", "<alpha = 0.5>", -3, 3, [](double x) { return x > 0.5 ? x : 0; }, 0},
    {"Shrink", "", -3, 3, [](double x) { return x < -0.5  ? x
                                                : x > 0.5 ? x
                                                          : 0; }, 1e-6},
    {"Shrink", "<bias = 1.5, lambd = 1.0>", -3, 3,
     [](double x) { return x < -1  ? x + 1.5
                           : x > 1 ? x - 1.5
                                   : 0; }, 1e-6},
};

// f32 at two values of a symbolic batch dim (including 0), plus a 1-D odd length.
BOOST_DATA_TEST_CASE(unary_f32_matches_reference, data::make(kUnaryCases), c) {
  std::string body = std::string("y = ") + c.op + " " + c.attrs + " (x)";
  std::string model = Model(17, "(float[N, 7] x) => (float[N, 7] y)", body);
  for (int64_t n : {3, 0, 1}) {
    TensorDataRef x = RandomTensor(DType::kF32, {n, 7}, c.lo, c.hi, 11 + n);
    Expect(*Run(model, {x})[0], Map(*x, DType::kF32, c.ref), c.rtol, 1e-6);
  }
  TensorDataRef x = RandomTensor(DType::kF32, {37}, c.lo, c.hi, 5);
  Expect(*Run(Model(17, "(float[37] x) => (float[37] y)", body), {x})[0],
         Map(*x, DType::kF32, c.ref), c.rtol, 1e-6);
}

// f64 computes at double precision (the trigonometric formulas are accurate to a few ulps).
BOOST_DATA_TEST_CASE(unary_f64_matches_reference, data::make(kUnaryCases), c) {
  std::string model = Model(17, "(double[5, 3] x) => (double[5, 3] y)",
                            std::string("y = ") + c.op + c.attrs + "(x)");
  TensorDataRef x = RandomTensor(DType::kF64, {5, 3}, c.lo, c.hi, 3);
  Expect(*Run(model, {x})[0], Map(*x, DType::kF64, c.ref), c.rtol == 0 ? 0 : 1e-12, 1e-13);
}

// f16 and bf16 compute in f32 and round once at the store.
BOOST_DATA_TEST_CASE(unary_half_types_match_reference, data::make(kUnaryCases), c) {
  for (auto [dtype, name, tol] :
       {std::tuple{DType::kF16, "float16", 2e-3}, std::tuple{DType::kBF16, "bfloat16", 1.6e-2}}) {
    std::string sig = std::string("(") + name + "[4, 9] x) => (" + name + "[4, 9] y)";
    TensorDataRef x = RandomTensor(dtype, {4, 9}, c.lo, c.hi, 7);
    Expect(*Run(Model(17, sig, std::string("y = ") + c.op + c.attrs + "(x)"), {x})[0],
           Map(*x, dtype, c.ref), tol, tol);
  }
}

BOOST_AUTO_TEST_CASE(unary_special_values) {
  TensorDataRef x = F32({8}, {kNaN, kInf, -kInf, 0, -0.0, 2.5, -2.5, 0.5});
  auto run = [&](const std::string& op) {
    return Run(Model(17, "(float[8] x) => (y)", "y = " + op + "(x)"), {x})[0];
  };
  Expect(*run("Round"), F32({8}, {kNaN, kInf, -kInf, 0, 0, 2, -2, 0}));
  Expect(*run("Sign"), F32({8}, {kNaN, 1, -1, 0, 0, 1, -1, 1}));
  Expect(*run("Relu"), F32({8}, {kNaN, kInf, 0, 0, 0, 2.5, 0, 0.5}));
  Expect(*run("Sigmoid"), Map(*x, DType::kF32, Sigmoid));
  Expect(*run("Softplus"),
         F32({8}, {kNaN, kInf, 0, std::log(2.0), std::log(2.0), std::log1p(std::exp(2.5)),
                   std::log1p(std::exp(-2.5)), std::log1p(std::exp(0.5))}));
  Expect(*run("Atan"), Map(*x, DType::kF32, [](double v) { return std::atan(v); }));
  Expect(*run("IsNaN"), MakeTensor(DType::kBool, {8}, {1, 0, 0, 0, 0, 0, 0, 0}));
  Expect(*run("IsInf"), MakeTensor(DType::kBool, {8}, {0, 1, 1, 0, 0, 0, 0, 0}));
  Expect(*Run(Model(17, "(float[8] x) => (y)", "y = IsInf <detect_negative = 0> (x)"), {x})[0],
         MakeTensor(DType::kBool, {8}, {0, 1, 0, 0, 0, 0, 0, 0}));
  Expect(*Run(Model(17, "(float[8] x) => (y)", "y = IsInf <detect_positive = 0> (x)"), {x})[0],
         MakeTensor(DType::kBool, {8}, {0, 0, 1, 0, 0, 0, 0, 0}));
  // Inverse trigonometric functions at and beyond their domains' ends.
  TensorDataRef e = F32({5}, {1, -1, 1.5, -1.5, 0});
  auto run_e = [&](const std::string& op) {
    return Run(Model(17, "(float[5] x) => (y)", "y = " + op + "(x)"), {e})[0];
  };
  Expect(*run_e("Asin"), F32({5}, {M_PI / 2, -M_PI / 2, kNaN, kNaN, 0}));
  Expect(*run_e("Acos"), F32({5}, {0, M_PI, kNaN, kNaN, M_PI / 2}));
  Expect(*run_e("Atanh"), F32({5}, {kInf, -kInf, kNaN, kNaN, 0}));
  Expect(*run_e("Acosh"), F32({5}, {0, kNaN, std::acosh(1.5), kNaN, kNaN}));
  // Small arguments keep their relative precision.
  TensorDataRef tiny = MakeTensor(DType::kF64, {3}, {1e-9, -3e-5, 1e-300});
  for (auto [op, f] : {std::pair<const char*, double (*)(double)>{"Sinh", std::sinh},
                       {"Asinh", std::asinh},
                       {"Atanh", std::atanh},
                       {"Atan", std::atan}}) {
    Expect(*Run(Model(17, "(double[3] x) => (y)", std::string("y = ") + op + "(x)"), {tiny})[0],
           Map(*tiny, DType::kF64, f), 1e-14, 0);
  }
}

BOOST_AUTO_TEST_CASE(unary_integer_types) {
  TensorDataRef x = MakeTensor(DType::kI32, {6}, {-7, -1, 0, 1, 5, 2147483647});
  auto run = [&](const std::string& op) {
    return Run(Model(17, "(int32[6] x) => (y)", "y = " + op + "(x)"), {x})[0];
  };
  Expect(*run("Abs"), MakeTensor(DType::kI32, {6}, {7, 1, 0, 1, 5, 2147483647}));
  Expect(*run("Neg"), MakeTensor(DType::kI32, {6}, {7, 1, 0, -1, -5, -2147483647}));
  Expect(*run("Relu"), MakeTensor(DType::kI32, {6}, {0, 0, 0, 1, 5, 2147483647}));
  Expect(*run("Sign"), MakeTensor(DType::kI32, {6}, {-1, -1, 0, 1, 1, 1}));
  Expect(*run("Erf"), MakeTensor(DType::kI32, {6}, {-1, 0, 0, 0, 0, 1}));  // erf truncated
  Expect(*Run(Model(17, "(int32[6] x) => (y)", "y = Shrink <bias = 2.0, lambd = 1.5> (x)"), {x})[0],
         MakeTensor(DType::kI32, {6}, {-5, 0, 0, 0, 3, 2147483645}));
  TensorDataRef i8 = MakeTensor(DType::kI8, {3}, {-128, -3, 127});
  Expect(*Run(Model(17, "(int8[3] x) => (y)", "y = Abs(x)"), {i8})[0],
         MakeTensor(DType::kI8, {3}, {-128, 3, 127}));  // wraps, like numpy
  TensorDataRef b = MakeTensor(DType::kBool, {3}, {1, 0, 1});
  Expect(*Run(Model(17, "(bool[3] x) => (y)", "y = Not(x)"), {b})[0],
         MakeTensor(DType::kBool, {3}, {0, 1, 0}));
}

// ---- Binary, variadic and broadcasting -------------------------------------------------------

struct BinaryCase {
  const char* op;
  const char* attrs;
  const char* type;  // ONNX type name of both inputs
  DType dtype, out;
  double lo, hi;
  std::function<double(double, double)> ref;
};

std::ostream& operator<<(std::ostream& os, const BinaryCase& c) {
  return os << c.op << c.attrs << " " << c.type;
}

double TruncDiv(double a, double b) { return std::trunc(a / b); }
double FloorModRef(double a, double b) {
  double m = std::fmod(a, b);
  return m != 0 && ((m < 0) != (b < 0)) ? m + b : m;
}

const BinaryCase kBinaryCases[] = {
    {"Add", "", "float", DType::kF32, DType::kF32, -5, 5, [](double a, double b) { return a + b; }},
    {"Sub", "", "float", DType::kF32, DType::kF32, -5, 5, [](double a, double b) { return a - b; }},
    {"Mul", "", "float", DType::kF32, DType::kF32, -5, 5, [](double a, double b) { return a * b; }},
    {"Div", "", "float", DType::kF32, DType::kF32, 0.5, 5,
     [](double a, double b) { return a / b; }},
    {"Add", "", "int64", DType::kI64, DType::kI64, -50, 50,
     [](double a, double b) { return a + b; }},
    {"Sub", "", "int32", DType::kI32, DType::kI32, -50, 50,
     [](double a, double b) { return a - b; }},
    {"Mul", "", "int8", DType::kI8, DType::kI8, -10, 10, [](double a, double b) { return a * b; }},
    {"Add", "", "uint8", DType::kU8, DType::kU8, 0, 100, [](double a, double b) { return a + b; }},
    {"Add", "", "double", DType::kF64, DType::kF64, -5, 5,
     [](double a, double b) { return a + b; }},
    {"Mul", "", "float16", DType::kF16, DType::kF16, -5, 5,
     [](double a, double b) { return a * b; }},
    {"Min", "", "float", DType::kF32, DType::kF32, -5, 5,
     [](double a, double b) { return std::min(a, b); }},
    {"Max", "", "int64", DType::kI64, DType::kI64, -5, 5,
     [](double a, double b) { return std::max(a, b); }},
    {"Sum", "", "float", DType::kF32, DType::kF32, -5, 5, [](double a, double b) { return a + b; }},
    {"Mean", "", "float", DType::kF32, DType::kF32, -5, 5,
     [](double a, double b) { return (a + b) / 2; }},
    {"Pow", "", "float", DType::kF32, DType::kF32, 0.5, 3,
     [](double a, double b) { return std::pow(a, b); }},
    {"Equal", "", "int64", DType::kI64, DType::kBool, -2, 2,
     [](double a, double b) { return double(a == b); }},
    {"Equal", "", "float", DType::kF32, DType::kBool, -2, 2,
     [](double a, double b) { return double(a == b); }},
    {"Less", "", "float", DType::kF32, DType::kBool, -2, 2,
     [](double a, double b) { return double(a < b); }},
    {"LessOrEqual", "", "int32", DType::kI32, DType::kBool, -2, 2,
     [](double a, double b) { return double(a <= b); }},
    {"Greater", "", "int64", DType::kI64, DType::kBool, -2, 2,
     [](double a, double b) { return double(a > b); }},
    {"GreaterOrEqual", "", "float", DType::kF32, DType::kBool, -2, 2,
     [](double a, double b) { return double(a >= b); }},
    {"And", "", "bool", DType::kBool, DType::kBool, 0, 2,
     [](double a, double b) { return double(a && b); }},
    {"Or", "", "bool", DType::kBool, DType::kBool, 0, 2,
     [](double a, double b) { return double(a || b); }},
    {"Xor", "", "bool", DType::kBool, DType::kBool, 0, 2,
     [](double a, double b) { return double((a != 0) != (b != 0)); }},
};

// Each op at several broadcasting patterns: equal shapes, a trailing vector, size-1 dims on
// both sides, a scalar, and one operand with a run-time innermost dim.
BOOST_DATA_TEST_CASE(binary_broadcasting_matches_reference, data::make(kBinaryCases), c) {
  struct Shapes {
    std::vector<int64_t> a, b, out;
  };
  const Shapes kShapes[] = {{{3, 7}, {3, 7}, {3, 7}},       {{2, 3, 9}, {9}, {2, 3, 9}},
                            {{2, 1, 5}, {3, 1}, {2, 3, 5}}, {{}, {4}, {4}},
                            {{1, 17}, {1}, {1, 17}},        {{0, 3}, {3}, {0, 3}}};
  auto type = [&](const std::vector<int64_t>& dims) {
    if (dims.empty()) return std::string(c.type);
    std::string s = std::string(c.type) + "[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
    return s + "]";
  };
  uint64_t seed = 1;
  for (const Shapes& s : kShapes) {
    std::string model = Model(17, "(" + type(s.a) + " a, " + type(s.b) + " b) => (c)",
                              std::string("c = ") + c.op + c.attrs + "(a, b)");
    TensorDataRef a = RandomTensor(c.dtype, s.a, c.lo, c.hi, seed++);
    TensorDataRef b = RandomTensor(c.dtype, s.b, c.lo, c.hi, seed++);
    double tol = c.dtype == DType::kF16 ? 2e-3 : 1e-6;
    Expect(*Run(model, {a, b})[0], Broadcast2(*a, *b, c.out, s.out, c.ref), tol, tol);
  }
}

// Broadcasting two unrelated symbols needs the shape function (the output dim is fresh).
BOOST_AUTO_TEST_CASE(broadcast_of_unrelated_symbols_uses_the_shape_function) {
  std::string model = Model(13, "(float[A] x, float[B] y) => (z)", "z = Add(x, y)");
  for (auto [na, nb] : {std::pair<int64_t, int64_t>{4, 4}, {1, 5}, {5, 1}, {1, 1}}) {
    TensorDataRef x = RandomTensor(DType::kF32, {na}, -1, 1, na);
    TensorDataRef y = RandomTensor(DType::kF32, {nb}, -1, 1, nb + 10);
    std::vector<int64_t> out = {std::max(na, nb)};
    Expect(*Run(model, {x, y})[0],
           Broadcast2(*x, *y, DType::kF32, out, [](double a, double b) { return a + b; }));
  }
  // Contradictory dims are an error naming the node, not a crash.
  StatusOr<std::vector<TensorDataRef>> bad = testing::RunModel(
      model, {RandomTensor(DType::kF32, {3}, 0, 1, 1), RandomTensor(DType::kF32, {4}, 0, 1, 2)},
      Table());
  BOOST_TEST(!bad.ok());
  // Three inputs, rank 2, with the run-time innermost dims in every combination.
  std::string where =
      Model(13, "(bool[A, B] c, float[B] x, float[C, D] y) => (z)", "z = Where(c, x, y)");
  for (auto [a, b, cc, d] :
       {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 3, 2, 3}, {2, 1, 2, 5}, {1, 4, 3, 1}}) {
    TensorDataRef cond = RandomTensor(DType::kBool, {a, b}, 0, 2, 3);
    TensorDataRef x = RandomTensor(DType::kF32, {b}, -1, 1, 4);
    TensorDataRef y = RandomTensor(DType::kF32, {cc, d}, -1, 1, 5);
    std::vector<int64_t> out = {std::max(a, cc), std::max(std::max(b, d), int64_t{1})};
    TensorDataRef cx =
        Broadcast2(*cond, *x, DType::kF32, out, [](double c, double v) { return c ? v : kNaN; });
    TensorDataRef expected = Broadcast2(*cx, *y, DType::kF32, out,
                                        [](double v, double w) { return std::isnan(v) ? w : v; });
    Expect(*Run(where, {cond, x, y})[0], expected);
  }
}

BOOST_AUTO_TEST_CASE(integer_division_and_modulo) {
  TensorDataRef a = I64({8}, {7, -7, 7, -7, 0, 9, -9, 5});
  TensorDataRef b = I64({8}, {2, 2, -2, -2, 3, 3, 4, -3});
  auto run = [&](const std::string& body) {
    return Run(Model(13, "(int64[8] a, int64[8] b) => (c)", body), {a, b})[0];
  };
  Expect(*run("c = Div(a, b)"), I64({8}, {3, -3, -3, 3, 0, 3, -2, -1}));  // toward zero
  Expect(*run("c = Mod(a, b)"), I64({8}, {1, 1, -1, -1, 0, 0, 3, -1}));   // sign of divisor
  Expect(*run("c = Mod <fmod = 1> (a, b)"), I64({8}, {1, -1, 1, -1, 0, 0, -1, 2}));
  TensorDataRef x = F32({4}, {5.5, -5.5, 5.5, -5.5}), y = F32({4}, {2, 2, -2, -2});
  auto runf = [&](const std::string& body) {
    return Run(Model(13, "(float[4] a, float[4] b) => (c)", body), {x, y})[0];
  };
  Expect(*runf("c = Mod <fmod = 1> (a, b)"), F32({4}, {1.5, -1.5, 1.5, -1.5}));
  Expect(*runf("c = Mod(a, b)"), Broadcast2(*x, *y, DType::kF32, {4}, FloorModRef));
  TensorDataRef i32a = MakeTensor(DType::kI32, {3}, {-7, 7, 100}),
                i32b = MakeTensor(DType::kI32, {3}, {2, -2, 7});
  Expect(*Run(Model(13, "(int32[3] a, int32[3] b) => (c)", "c = Div(a, b)"), {i32a, i32b})[0],
         MakeTensor(DType::kI32, {3}, {-3, -3, 14}));
  Expect(*Run(Model(13, "(int32[3] a, int32[3] b) => (c)", "c = Mod(a, b)"), {i32a, i32b})[0],
         MakeTensor(DType::kI32, {3}, {1, -1, 2}));
  (void)TruncDiv;
}

BOOST_AUTO_TEST_CASE(pow_with_mixed_dtypes) {
  TensorDataRef x = F32({2, 3}, {1.5, -2, 3, 0.5, -1, 2});
  TensorDataRef e = I64({3}, {2, 3, -1});
  Expect(
      *Run(Model(15, "(float[2, 3] x, int64[3] e) => (y)", "y = Pow(x, e)"), {x, e})[0],
      Broadcast2(*x, *e, DType::kF32, {2, 3}, [](double a, double b) { return std::pow(a, b); }));
  TensorDataRef ei = MakeTensor(DType::kI32, {1}, {3});
  Expect(*Run(Model(15, "(float[2, 3] x, int32[1] e) => (y)", "y = Pow(x, e)"), {x, ei})[0],
         Map(*x, DType::kF32, [](double a) { return a * a * a; }));
  TensorDataRef b = I64({4}, {2, -3, 5, 0}), p = I64({4}, {10, 3, 0, 0});
  Expect(*Run(Model(15, "(int64[4] b, int64[4] p) => (y)", "y = Pow(b, p)"), {b, p})[0],
         I64({4}, {1024, -27, 1, 1}));
  TensorDataRef fp = F32({4}, {0.5, 2, 1, 3});
  Expect(*Run(Model(15, "(int64[4] b, float[4] p) => (y)", "y = Pow(b, p)"), {b, fp})[0],
         I64({4}, {1, 9, 5, 0}));  // sqrt(2) truncates to 1
  // A constant exponent of 2 (layer norm) is a multiply: exact squares, NaN and inf included.
  TensorDataRef sq = F32({5}, {1.5, -3, kNaN, -kInf, 1e20});
  Expect(*Run(Model(15, "(float[5] x) => (y) <float two = {2.0}>", "y = Pow(x, two)"), {sq})[0],
         F32({5}, {2.25, 9, kNaN, kInf, kInf}), 0, 0);
  TensorDataRef d = MakeTensor(DType::kF64, {2}, {2, 3});
  TensorDataRef pd = F32({2}, {0.5, 1.5});
  Expect(*Run(Model(15, "(double[2] b, float[2] p) => (y)", "y = Pow(b, p)"), {d, pd})[0],
         MakeTensor(DType::kF64, {2}, {std::sqrt(2.0), std::pow(3.0, 1.5)}), 1e-15, 0);
}

BOOST_AUTO_TEST_CASE(variadic_ops_broadcast_every_input) {
  TensorDataRef a = RandomTensor(DType::kF32, {2, 1, 5}, -3, 3, 1);
  TensorDataRef b = RandomTensor(DType::kF32, {3, 1}, -3, 3, 2);
  TensorDataRef c = RandomTensor(DType::kF32, {5}, -3, 3, 3);
  std::string sig = "(float[2, 1, 5] a, float[3, 1] b, float[5] c) => (y)";
  auto ref = [&](const std::function<double(double, double)>& f,
                 const std::function<double(double)>& fin) {
    TensorDataRef ab = Broadcast2(*a, *b, DType::kF64, {2, 3, 5}, f);
    TensorDataRef abc = Broadcast2(*ab, *c, DType::kF64, {2, 3, 5}, f);
    return Map(*abc, DType::kF32, fin);
  };
  auto id = [](double v) { return v; };
  Expect(*Run(Model(13, sig, "y = Sum(a, b, c)"), {a, b, c})[0],
         ref([](double x, double y) { return x + y; }, id));
  Expect(*Run(Model(13, sig, "y = Mean(a, b, c)"), {a, b, c})[0],
         ref([](double x, double y) { return x + y; }, [](double v) { return v / 3; }));
  Expect(*Run(Model(13, sig, "y = Max(a, b, c)"), {a, b, c})[0],
         ref([](double x, double y) { return std::max(x, y); }, id));
  Expect(*Run(Model(13, sig, "y = Min(a, b, c)"), {a, b, c})[0],
         ref([](double x, double y) { return std::min(x, y); }, id));
  // One input: a copy. NaN propagates through Max and Min.
  Expect(*Run(Model(13, "(float[2, 1, 5] a) => (y)", "y = Sum(a)"), {a})[0],
         Map(*a, DType::kF32, id));
  TensorDataRef n1 = F32({3}, {kNaN, 1, 2}), n2 = F32({3}, {0, kNaN, 1});
  Expect(*Run(Model(13, "(float[3] a, float[3] b) => (y)", "y = Max(a, b)"), {n1, n2})[0],
         F32({3}, {kNaN, kNaN, 2}));
  Expect(*Run(Model(13, "(float[3] a, float[3] b) => (y)", "y = Min(a, b)"), {n1, n2})[0],
         F32({3}, {kNaN, kNaN, 1}));
  TensorDataRef i = I64({3}, {1, 2, -7}), j = I64({3}, {2, 2, 2});
  Expect(*Run(Model(13, "(int64[3] a, int64[3] b) => (y)", "y = Mean(a, b)"), {i, j})[0],
         I64({3}, {1, 2, -2}));
}

BOOST_AUTO_TEST_CASE(prelu_slope_broadcasts_to_x) {
  TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 4, 5}, -3, 3, 9);
  TensorDataRef slope = F32({3, 1, 1}, {0.1, 0.2, 0.3});
  std::vector<double> xv = x->ToDoubles(), out;
  for (size_t k = 0; k < xv.size(); ++k) {
    double s = 0.1 * (1 + (k / 20) % 3);
    out.push_back(xv[k] < 0 ? s * xv[k] : xv[k]);
  }
  Expect(*Run(Model(13, "(float[2, 3, 4, 5] x, float[3, 1, 1] s) => (y)", "y = PRelu(x, s)"),
              {x, slope})[0],
         F32({2, 3, 4, 5}, out));
  TensorDataRef xi = I64({4}, {-4, -1, 0, 3}), si = I64({1}, {3});
  Expect(*Run(Model(13, "(int64[4] x, int64[1] s) => (y)", "y = PRelu(x, s)"), {xi, si})[0],
         I64({4}, {-12, -3, 0, 3}));
}

// ---- Cast, Clip, Identity, Dropout -----------------------------------------------------------

BOOST_AUTO_TEST_CASE(cast_between_dtypes) {
  TensorDataRef f = F32({8}, {1.7, -1.7, 3e9, -3e9, kNaN, 0, 65504, 0.1});
  auto cast = [&](const TensorDataRef& x, const std::string& sig, int to) {
    return Run(Model(13, sig, "y = Cast <to = " + std::to_string(to) + "> (x)"), {x})[0];
  };
  // float -> int32 truncates, saturates, NaN -> 0 (the kernel IR's rule).
  Expect(*cast(f, "(float[8] x) => (y)", 6),
         MakeTensor(DType::kI32, {8}, {1, -1, 2147483647, -2147483648.0, 0, 0, 65504, 0}));
  Expect(*cast(f, "(float[8] x) => (y)", 7), I64({8}, {1, -1, 3e9, -3e9, 0, 0, 65504, 0}));
  Expect(*cast(f, "(float[8] x) => (y)", 9),
         MakeTensor(DType::kBool, {8}, {1, 1, 1, 1, 1, 0, 1, 1}));
  Expect(*cast(f, "(float[8] x) => (y)", 10), Map(*f, DType::kF16, [](double v) { return v; }), 0,
         0);
  Expect(*cast(f, "(float[8] x) => (y)", 16), Map(*f, DType::kBF16, [](double v) { return v; }), 0,
         0);
  Expect(*cast(f, "(float[8] x) => (y)", 11), Map(*f, DType::kF64, [](double v) { return v; }), 0,
         0);
  Expect(*cast(f, "(float[8] x) => (y)", 1), f, 0, 0);  // same type: a view
  TensorDataRef b = MakeTensor(DType::kBool, {3}, {1, 0, 1});
  Expect(*cast(b, "(bool[3] x) => (y)", 1), F32({3}, {1, 0, 1}));
  Expect(*cast(b, "(bool[3] x) => (y)", 7), I64({3}, {1, 0, 1}));
  TensorDataRef i = I64({4}, {300, -1, 16777217, 0});
  Expect(*cast(i, "(int64[4] x) => (y)", 2),
         MakeTensor(DType::kU8, {4}, {44, 255, 1, 0}));  // wraps
  Expect(*cast(i, "(int64[4] x) => (y)", 1), F32({4}, {300, -1, 16777216, 0}), 0, 0);
  TensorDataRef h = MakeTensor(DType::kF16, {3}, {0.5, -2.25, 1000});
  Expect(*cast(h, "(float16[3] x) => (y)", 1), F32({3}, {0.5, -2.25, 1000}), 0, 0);
  Expect(*cast(h, "(float16[3] x) => (y)", 6), MakeTensor(DType::kI32, {3}, {0, -2, 1000}));
  // CastLike takes the dtype of its second input.
  Expect(*Run(Model(15, "(float[8] x, int64[1] like) => (y)", "y = CastLike(x, like)"),
              {f, I64({1}, {0})})[0],
         I64({8}, {1, -1, 3e9, -3e9, 0, 0, 65504, 0}));
}

BOOST_AUTO_TEST_CASE(clip_attributes_and_inputs) {
  TensorDataRef x = F32({2, 5}, {-3, -1, 0, 1, 3, kNaN, 0.5, -0.5, 7, -7});
  auto clip = [](double v, double lo, double hi) {
    return std::isnan(v) ? v : std::min(std::max(v, lo), hi);
  };
  Expect(*Run(Model(7, "(float[2, 5] x) => (y)", "y = Clip <min = -1.0, max = 2.0> (x)"), {x})[0],
         Map(*x, DType::kF32, [&](double v) { return clip(v, -1, 2); }));
  Expect(*Run(Model(7, "(float[2, 5] x) => (y)", "y = Clip <max = 0.0> (x)"), {x})[0],
         Map(*x, DType::kF32, [&](double v) { return clip(v, -kInf, 0); }));
  // Opset 11+: runtime bounds, constant bounds, one bound only, min > max.
  std::string sig = "(float[2, 5] x, float lo, float hi) => (y)";
  Expect(*Run(Model(13, sig, "y = Clip(x, lo, hi)"), {x, F32({}, {-0.5}), F32({}, {1})})[0],
         Map(*x, DType::kF32, [&](double v) { return clip(v, -0.5, 1); }));
  Expect(*Run(Model(13, sig, "y = Clip(x, lo, hi)"), {x, F32({}, {2}), F32({}, {1})})[0],
         Map(*x, DType::kF32, [&](double v) { return std::isnan(v) ? v : 1.0; }));
  Expect(*Run(Model(13, "(float[2, 5] x) => (y) <float lo = {0.0}>", "y = Clip(x, lo)"), {x})[0],
         Map(*x, DType::kF32, [&](double v) { return clip(v, 0, kInf); }));
  Expect(*Run(Model(13, "(float[2, 5] x) => (y) <float hi = {0.25}>", "y = Clip(x, , hi)"), {x})[0],
         Map(*x, DType::kF32, [&](double v) { return clip(v, -kInf, 0.25); }));
  Expect(*Run(Model(13, "(float[2, 5] x) => (y)", "y = Clip(x)"), {x})[0], x);
  TensorDataRef i = MakeTensor(DType::kI32, {5}, {-100, -5, 0, 5, 100});
  Expect(*Run(Model(13, "(int32[5] x) => (y) <int32 lo = {-6}, int32 hi = {50}>",
                    "y = Clip(x, lo, hi)"),
              {i})[0],
         MakeTensor(DType::kI32, {5}, {-6, -5, 0, 5, 50}));
}

BOOST_AUTO_TEST_CASE(identity_and_dropout) {
  TensorDataRef x = RandomTensor(DType::kF32, {3, 4}, -1, 1, 4);
  Expect(*Run(Model(13, "(float[N, 4] x) => (y)", "y = Identity(x)"), {x})[0], x, 0, 0);
  Expect(*Run(Model(13, "(float[N, 4] x) => (y)", "y = Dropout(x)"), {x})[0], x, 0, 0);
  std::vector<TensorDataRef> both =
      Run(Model(13, "(float[N, 4] x) => (y, m)", "y, m = Dropout(x)"), {x});
  Expect(*both[0], x, 0, 0);
  Expect(*both[1], MakeTensor(DType::kBool, {3, 4}, std::vector<double>(12, 1)));
  std::vector<TensorDataRef> ratio =
      Run(Model(13, "(float[N, 4] x) => (y, m) <float r = {0.3}, bool t = {0}>",
                "y, m = Dropout(x, r, t)"),
          {x});
  Expect(*ratio[0], x, 0, 0);
  // Before opset 10 the mask has the data's dtype.
  std::vector<TensorDataRef> old =
      Run(Model(7, "(float[N, 4] x) => (y, m)", "y, m = Dropout <ratio = 0.2> (x)"), {x});
  Expect(*old[0], x, 0, 0);
  Expect(*old[1], F32({3, 4}, std::vector<double>(12, 1)));
  StatusOr<std::vector<TensorDataRef>> training = testing::RunModel(
      Model(13, "(float[N, 4] x) => (y) <float r = {0.5}, bool t = {1}>", "y = Dropout(x, r, t)"),
      {x}, Table());
  BOOST_TEST(training.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(training.status().message().find("training_mode") != std::string::npos);
  // A training_mode only known at run time cannot be assumed false.
  StatusOr<std::vector<TensorDataRef>> runtime = testing::RunModel(
      Model(13, "(float[N, 4] x, bool t) => (y) <float r = {0.5}>", "y = Dropout(x, r, t)"),
      {x, MakeTensor(DType::kBool, {}, {1})}, Table());
  BOOST_TEST(runtime.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(runtime.status().message().find("compile-time constant") != std::string::npos);
}

// ---- Softmax family --------------------------------------------------------------------------

// Reference: normalize x (dims) over dims [axis, end) for every position of the other dims.
TensorDataRef SoftmaxRef(const TensorData& x, int axis, int end, const std::string& op,
                         DType dtype) {
  std::vector<int64_t> dims = x.dims();
  int64_t outer = 1, row = 1, inner = 1;
  for (int d = 0; d < static_cast<int>(dims.size()); ++d) {
    (d < axis ? outer : d < end ? row : inner) *= dims[d];
  }
  std::vector<double> v = x.ToDoubles(), out(v.size());
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t r) { return (o * row + r) * inner + i; };
      double m = -kInf, s = 0;
      int64_t best = 0;
      for (int64_t r = 0; r < row; ++r) {
        if (v[at(r)] > m) best = r;
        m = std::max(m, v[at(r)]);
      }
      for (int64_t r = 0; r < row; ++r) s += std::exp(v[at(r)] - m);
      for (int64_t r = 0; r < row; ++r) {
        double e = v[at(r)];
        out[at(r)] = op == "Softmax"      ? std::exp(e - m) / s
                     : op == "LogSoftmax" ? e - m - std::log(s)
                                          : double(r == best);
      }
    }
  }
  return MakeTensor(dtype, dims, out);
}

BOOST_DATA_TEST_CASE(softmax_family_matches_reference,
                     data::make({"Softmax", "LogSoftmax", "Hardmax"}), op_name) {
  std::string op = op_name;
  struct Case {
    int opset;
    std::vector<int64_t> dims;
    int axis;  // normalized
  };
  const Case kCases[] = {
      {13, {2, 3, 33}, 2}, {13, {2, 3, 5}, 1}, {13, {4, 7}, 0}, {13, {3, 1}, 1},   {13, {5, 17}, 1},
      {11, {2, 3, 4}, 1},  {11, {2, 3, 4}, 0}, {11, {6, 9}, 1}, {7, {2, 3, 4}, 2},
  };
  uint64_t seed = 1;
  for (const Case& c : kCases) {
    std::string type = "float[";
    for (size_t i = 0; i < c.dims.size(); ++i) type += (i ? "," : "") + std::to_string(c.dims[i]);
    type += "]";
    std::string model = Model(c.opset, "(" + type + " x) => (y)",
                              "y = " + op + " <axis = " + std::to_string(c.axis) + "> (x)");
    TensorDataRef x = RandomTensor(DType::kF32, c.dims, -20, 20, seed++);
    int end = c.opset < 13 ? static_cast<int>(c.dims.size()) : c.axis + 1;
    Expect(*Run(model, {x})[0], SoftmaxRef(*x, c.axis, end, op, DType::kF32), 2e-6, 1e-6);
  }
  // Default axis: -1 from opset 13 (along the last dim), 1 before (the trailing dims together).
  TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 4}, -5, 5, 99);
  Expect(*Run(Model(13, "(float[2, 3, 4] x) => (y)", "y = " + op + "(x)"), {x})[0],
         SoftmaxRef(*x, 2, 3, op, DType::kF32), 2e-6, 1e-6);
  Expect(*Run(Model(12, "(float[2, 3, 4] x) => (y)", "y = " + op + "(x)"), {x})[0],
         SoftmaxRef(*x, 1, 3, op, DType::kF32), 2e-6, 1e-6);
  // Symbolic rows at two sizes, f16 computed in f32, along the last axis and a middle one (the
  // tiled kernel; 300 positions span two tiles).
  std::string sym = Model(13, "(float16[N, 10] x) => (y)", "y = " + op + "(x)");
  std::string mid = Model(13, "(float16[N, 5, M] x) => (y)", "y = " + op + " <axis = 1> (x)");
  for (int64_t n : {1, 6}) {
    TensorDataRef h = RandomTensor(DType::kF16, {n, 10}, -4, 4, n);
    Expect(*Run(sym, {h})[0], SoftmaxRef(*h, 1, 2, op, DType::kF16), 2e-3, 2e-3);
    TensorDataRef h3 = RandomTensor(DType::kF16, {n, 5, n == 1 ? 300 : 3}, -4, 4, n + 1);
    Expect(*Run(mid, {h3})[0], SoftmaxRef(*h3, 1, 2, op, DType::kF16), 2e-3, 2e-3);
  }
}

BOOST_AUTO_TEST_CASE(softmax_is_stable_for_large_inputs) {
  TensorDataRef x = F32({2, 3}, {1000, 1001, 1002, -1000, -1000, -1000});
  Expect(*Run(Model(13, "(float[2, 3] x) => (y)", "y = Softmax(x)"), {x})[0],
         SoftmaxRef(*x, 1, 2, "Softmax", DType::kF32), 1e-6, 1e-7);
  Expect(*Run(Model(13, "(float[2, 3] x) => (y)", "y = LogSoftmax(x)"), {x})[0],
         SoftmaxRef(*x, 1, 2, "LogSoftmax", DType::kF32), 1e-6, 1e-6);
  // Hardmax marks the first maximum only.
  TensorDataRef tie = F32({1, 4}, {1, 3, 3, 2});
  Expect(*Run(Model(13, "(float[1, 4] x) => (y)", "y = Hardmax(x)"), {tie})[0],
         F32({1, 4}, {0, 1, 0, 0}));
}

BOOST_AUTO_TEST_CASE(every_registered_elementwise_op_has_a_lowering) {
  const char* kOps[] = {"Abs",
                        "Neg",
                        "Relu",
                        "Sign",
                        "Sigmoid",
                        "Tanh",
                        "Softplus",
                        "Softsign",
                        "Erf",
                        "Sqrt",
                        "Reciprocal",
                        "Exp",
                        "Log",
                        "Floor",
                        "Ceil",
                        "Round",
                        "Sin",
                        "Cos",
                        "Tan",
                        "Asin",
                        "Acos",
                        "Atan",
                        "Sinh",
                        "Cosh",
                        "Asinh",
                        "Acosh",
                        "Atanh",
                        "LeakyRelu",
                        "Elu",
                        "Selu",
                        "Celu",
                        "HardSigmoid",
                        "HardSwish",
                        "ThresholdedRelu",
                        "Shrink",
                        "Not",
                        "IsNaN",
                        "IsInf",
                        "Identity",
                        "Add",
                        "Sub",
                        "Mul",
                        "Div",
                        "Mod",
                        "Pow",
                        "And",
                        "Or",
                        "Xor",
                        "Equal",
                        "Less",
                        "Greater",
                        "LessOrEqual",
                        "GreaterOrEqual",
                        "Min",
                        "Max",
                        "Sum",
                        "Mean",
                        "PRelu",
                        "Where",
                        "Cast",
                        "CastLike",
                        "Clip",
                        "Dropout",
                        "Softmax",
                        "LogSoftmax",
                        "Hardmax"};
  for (const char* op : kOps) {
    for (int opset : {17, 19})
      BOOST_TEST(Table().Find(op, opset) != nullptr, op << " at " << opset);
  }
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

// Elementwise lowerings record their element function for fusion; it may only read its values
// (never the node's own buffers, which a fused kernel does not have).
BOOST_AUTO_TEST_CASE(element_functions_are_recorded_for_fusion) {
  struct Case {
    std::string signature, body;
    std::vector<int> slots;  // empty: no element function (a view or a row kernel)
  };
  const Case kCases[] = {
      {"(float[2, 3] x) => (y)", "y = Relu(x)", {0}},
      {"(float[2, 3] x, float[3] b) => (y)", "y = Add(x, b)", {0, 1}},
      {"(float[2, 3] x, float lo, float hi) => (y)", "y = Clip(x, lo, hi)", {0, 1, 2}},
      {"(float[2, 3] x, float hi) => (y) <float lo = {0.0}>", "y = Clip(x, lo, hi)", {0, 2}},
      {"(bool[3] c, float[2, 3] x, float[2, 1] z) => (y)", "y = Where(c, x, z)", {0, 1, 2}},
      {"(float[2, 3] x) => (y)", "y = Cast <to = 7> (x)", {0}},
      {"(float[2, 3] x, float[2, 3] z, float[3] w) => (y)", "y = Mean(x, z, w)", {0, 1, 2}},
      {"(float[2, 3] x) => (y)", "y = Cast <to = 1> (x)", {}},
      {"(float[2, 3] x) => (y)", "y = Identity(x)", {}},
      {"(float[2, 3] x) => (y)", "y = Softmax(x)", {}},
  };
  for (const Case& c : kCases) {
    StatusOr<Graph> g = testing::InferText(Model(13, c.signature, c.body));
    BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
    StatusOr<LoweredNode> lowered = LowerNode(*g, 0, false, Table());
    BOOST_REQUIRE_MESSAGE(lowered.ok(), lowered.status().message());
    BOOST_TEST(lowered->element_slots == c.slots, c.body);
    BOOST_TEST(static_cast<bool>(lowered->element_fn) == !c.slots.empty(), c.body);
    if (!lowered->element_fn) continue;
    Lets lets;
    std::vector<jit::Expr> values;
    for (int slot : c.slots) {
      DType t = g->value(g->node(0).inputs[slot]).dtype;
      values.push_back(jit::Var("v" + std::to_string(slot), t));
    }
    std::string text = jit::ToText(lowered->element_fn(lets, values));
    for (int k = 0; k < 3; ++k) {
      std::string load = "in" + std::to_string(k) + "[";
      BOOST_TEST(text.find(load) == std::string::npos, c.body << ": " << text);
    }
  }
}

}  // namespace
}  // namespace kiln::compiler
