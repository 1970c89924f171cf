// Lowerings of the nn family (compiler/lower/nn*.cc): each op run through the JIT on ONNX-text
// models and checked against plain C++ loop references, over awkward sizes (not multiples of the
// GEMM tiles), symbolic batch dims run at two values, dtypes and every attribute.
#define BOOST_TEST_MODULE nn_test
#include <dirent.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "compiler/lower/evaluate.h"
#include "compiler/lower/lower.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/shape_inference.h"
#include "jit/compute.h"
#include "jit/engine.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::Compare;
using testing::Count;
using testing::Floats;
using testing::Generate;
using testing::Ints;
using testing::MakeTensor;
using testing::Model;
using testing::Nd;
using testing::RandomTensor;
using testing::Shape;
using testing::ToNd;
using testing::Unravel;

const LoweringTable& Table() { return testing::TableOf<AddNnLowerings>(); }

std::vector<TensorDataRef> Run(const std::string& model, const std::vector<TensorDataRef>& in) {
  StatusOr<std::vector<TensorDataRef>> out = testing::RunModel(model, in, Table());
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message() + "\nmodel:\n" + model);
  return *out;
}

// ---- A tiny N-d array for the references ----

void Expect(const TensorData& actual, const Nd& expected, DType dtype, double rtol = 1e-5,
            double atol = 1e-5) {
  TensorDataRef e = MakeTensor(dtype, expected.dims, expected.v);
  std::string diff = Compare(actual, *e, rtol, atol);
  BOOST_TEST(diff.empty(), diff);
}

// ---- f16 / bf16 tolerances, derived from the numerics ----------------------------------------
//
// The nn kernels widen f16/bf16 inputs to f32 (AccType in compiler/lower/nn.cc), compute in f32 and
// round once at the store. Let r be the exact result (the double reference), c the kernel's f32
// value with |c - r| <= A (the f32 error, bounded per op below), a = round(c) the output and
// e = round(r) the expected tensor (Expect rounds the reference to the output type). Then
//   |a - e| <= |a - c| + |c - r| + |r - e| <= (u|c| + s) + A + (u|r| + s)
//           <= 2u/(1-u) * |e| + (1+u) * A + 2s * (1 + u/(1-u)),
// with u = 2^-11 (f16) or 2^-8 (bf16), half an ulp relative to the value, and s = 2^-25, half of
// f16's smallest subnormal (bf16's is far smaller). Compare() checks |a - e| <= atol + rtol * |e|.
struct HalfTol {
  double rtol, atol;
};

HalfTol HalfTolerance(DType dtype, double f32_error) {
  BOOST_REQUIRE(dtype == DType::kF16 || dtype == DType::kBF16);
  const double u = std::ldexp(1.0, dtype == DType::kF16 ? -11 : -8), s = std::ldexp(1.0, -25);
  return {2 * u / (1 - u), (1 + u) * f32_error + 2 * s * (1 + u / (1 - u))};
}

// A for `roundings` f32 operations (adds, multiplies, fmas, sqrt, divisions), each correctly
// rounded and so off by at most 2^-24 of a value no larger than `abs_sum`, the sum of the
// magnitudes of the terms involved: gamma_n = n * 2^-24 / (1 - n * 2^-24) <= 1.01 * n * 2^-24
// while n * 2^-24 < 0.0099 (n < 166,000).
double F32Error(int64_t roundings, double abs_sum) {
  BOOST_REQUIRE(roundings * std::ldexp(1.0, -24) < 0.0099);
  return 1.01 * roundings * std::ldexp(1.0, -24) * abs_sum;
}

bool IsHalf(DType t) { return t == DType::kF16 || t == DType::kBF16; }

// An ONNX text type: "float[2,3]", or "float" for a scalar.
std::string Ty(const std::string& t, const std::vector<int64_t>& d) {
  return d.empty() ? t : t + Shape(d);
}

const char* TypeName(DType t) {
  switch (t) {
    case DType::kF64:
      return "double";
    case DType::kF16:
      return "float16";
    case DType::kBF16:
      return "bfloat16";
    case DType::kI32:
      return "int32";
    case DType::kI64:
      return "int64";
    case DType::kI8:
      return "int8";
    case DType::kU8:
      return "uint8";
    default:
      return "float";
  }
}

// ---- MatMul --------------------------------------------------------------------------------

// numpy matmul reference.
Nd MatMulRef(const Nd& a0, const Nd& b0) {
  Nd a = a0, b = b0;
  bool a_vec = a.dims.size() == 1, b_vec = b.dims.size() == 1;
  if (a_vec) a.dims.insert(a.dims.begin(), 1);
  if (b_vec) b.dims.push_back(1);
  size_t ra = a.dims.size(), rb = b.dims.size(), rbatch = std::max(ra, rb) - 2;
  int64_t m = a.dims[ra - 2], k = a.dims[ra - 1], n = b.dims[rb - 1];
  std::vector<int64_t> batch(rbatch);
  for (size_t d = 0; d < rbatch; ++d) {
    int64_t da = d + ra >= rbatch + 2 ? a.dims[d + ra - 2 - rbatch] : 1;
    int64_t db = d + rb >= rbatch + 2 ? b.dims[d + rb - 2 - rbatch] : 1;
    batch[d] = std::max(da, db);
  }
  std::vector<int64_t> full = batch;
  full.push_back(m);
  full.push_back(n);
  Nd out = Generate(full, [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> ia(ra), ib(rb);
    for (size_t d = 0; d + 2 < ra; ++d) {
      int64_t o = idx[d + rbatch - (ra - 2)];
      ia[d] = a.dims[d] == 1 ? 0 : o;
    }
    for (size_t d = 0; d + 2 < rb; ++d) {
      int64_t o = idx[d + rbatch - (rb - 2)];
      ib[d] = b.dims[d] == 1 ? 0 : o;
    }
    double s = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      ia[ra - 2] = idx[rbatch];
      ia[ra - 1] = kk;
      ib[rb - 2] = kk;
      ib[rb - 1] = idx[rbatch + 1];
      s += a.at(ia) * b.at(ib);
    }
    return s;
  });
  std::vector<int64_t> dims = batch;
  if (!a_vec) dims.push_back(m);
  if (!b_vec) dims.push_back(n);
  out.dims = dims;
  return out;
}

void CheckMatMul(std::vector<int64_t> da, std::vector<int64_t> db, DType dtype = DType::kF32,
                 double tol = 1e-4) {
  BOOST_TEST_MESSAGE("MatMul " << Shape(da) << " x " << Shape(db) << " " << TypeName(dtype));
  bool is_int = dtype == DType::kI32 || dtype == DType::kI64;
  TensorDataRef a = RandomTensor(dtype, da, is_int ? -5 : -1, is_int ? 5 : 1, 1);
  TensorDataRef b = RandomTensor(dtype, db, is_int ? -5 : -1, is_int ? 5 : 1, 2);
  Nd expected = MatMulRef(ToNd(*a), ToNd(*b));
  std::string t = TypeName(dtype);
  std::string model =
      Model(13, "(" + t + Shape(da) + " a, " + t + Shape(db) + " b) => (y)", "y = MatMul(a, b)");
  std::vector<TensorDataRef> out = Run(model, {a, b});
  if (IsHalf(dtype)) {
    // K products of values in [-1, 1]: each exact in f32 (11 + 11 or 8 + 8 significand bits fit
    // in 24), accumulated by K fmas, so A <= F32Error(K, K * 1 * 1). `tol` is not used.
    int64_t k = da.back();
    HalfTol h = HalfTolerance(dtype, F32Error(k, static_cast<double>(k)));
    Expect(*out[0], expected, dtype, h.rtol, h.atol);
    return;
  }
  Expect(*out[0], expected, dtype, tol, tol);
}

BOOST_AUTO_TEST_CASE(MatMulShapes) {
  CheckMatMul({7, 13}, {13, 70});
  CheckMatMul({1, 5}, {5, 1});
  CheckMatMul({6, 64}, {64, 64});
  CheckMatMul({9}, {9, 5});         // 1-D A
  CheckMatMul({4, 9}, {9});         // 1-D B
  CheckMatMul({300, 70}, {70, 1});  // matrix-vector path
  CheckMatMul({2, 0, 5}, {5});
  CheckMatMul({9}, {9});                 // both 1-D: a scalar
  CheckMatMul({3, 5, 9}, {9, 6});        // A's batch folds into rows
  CheckMatMul({2, 1, 5, 9}, {3, 9, 6});  // broadcast batch dims
  CheckMatMul({3, 9, 6}, {2, 1, 6, 5});
  CheckMatMul({9}, {2, 9, 4});                             // 1-D A against batched B
  CheckMatMul({2, 3, 9}, {9});                             // batched A, 1-D B
  CheckMatMul({130, 600}, {600, 200}, DType::kF32, 1e-3);  // several K chunks and row groups
  CheckMatMul({3, 0}, {0, 4});                             // K = 0: zeros
  CheckMatMul({0, 5}, {5, 4});
}

BOOST_AUTO_TEST_CASE(MatMulDTypes) {
  CheckMatMul({7, 13}, {13, 37}, DType::kF64, 1e-12);
  CheckMatMul({2, 7, 13}, {2, 13, 37}, DType::kF64, 1e-12);
  CheckMatMul({7, 13}, {13, 37}, DType::kF16);  // tolerance derived in CheckMatMul
  CheckMatMul({5, 13}, {13, 20}, DType::kBF16);
  CheckMatMul({7, 13}, {13, 37}, DType::kI32, 0);
  CheckMatMul({2, 7, 13}, {13, 37}, DType::kI64, 0);
}

BOOST_AUTO_TEST_CASE(MatMulSymbolicBatch) {
  std::string model = Model(13, "(float[N, S, 24] a, float[24, 40] b) => (y)", "y = MatMul(a, b)");
  for (int64_t n : {1, 5}) {
    TensorDataRef a = RandomTensor(DType::kF32, {n, 7, 24}, -1, 1, 3);
    TensorDataRef b = RandomTensor(DType::kF32, {24, 40}, -1, 1, 4);
    Expect(*Run(model, {a, b})[0], MatMulRef(ToNd(*a), ToNd(*b)), DType::kF32, 1e-4, 1e-4);
  }
  std::string batched =
      Model(13, "(float[N, 3, 8] a, float[N, 8, 11] b) => (y)", "y = MatMul(a, b)");
  for (int64_t n : {2, 3}) {
    TensorDataRef a = RandomTensor(DType::kF32, {n, 3, 8}, -1, 1, 5);
    TensorDataRef b = RandomTensor(DType::kF32, {n, 8, 11}, -1, 1, 6);
    Expect(*Run(batched, {a, b})[0], MatMulRef(ToNd(*a), ToNd(*b)), DType::kF32, 1e-4, 1e-4);
  }
}

// ---- Gemm ----------------------------------------------------------------------------------

void CheckGemm(int64_t m, int64_t k, int64_t n, int ta, int tb, double alpha, double beta,
               std::vector<int64_t> c_dims, bool has_c = true, DType dtype = DType::kF32,
               int opset = 13) {
  BOOST_TEST_MESSAGE("Gemm " << m << "x" << k << "x" << n << " tA=" << ta << " tB=" << tb
                             << " C=" << Shape(c_dims) << " " << TypeName(dtype));
  std::vector<int64_t> da = ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k};
  std::vector<int64_t> db = tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n};
  bool is_int = dtype == DType::kI32 || dtype == DType::kI64;
  TensorDataRef a = RandomTensor(dtype, da, -3, 3, 7), b = RandomTensor(dtype, db, -3, 3, 8);
  TensorDataRef c = RandomTensor(dtype, c_dims, -3, 3, 9);
  Nd A = ToNd(*a), B = ToNd(*b), C = ToNd(*c);
  Nd expected = Generate({m, n}, [&](const std::vector<int64_t>& i) {
    double s = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      s += (ta ? A.at({kk, i[0]}) : A.at({i[0], kk})) * (tb ? B.at({i[1], kk}) : B.at({kk, i[1]}));
    }
    double r = alpha * s;
    if (has_c) {
      std::vector<int64_t> ci;
      size_t off = 2 - c_dims.size();
      for (size_t d = 0; d < c_dims.size(); ++d) ci.push_back(c_dims[d] == 1 ? 0 : i[off + d]);
      r += beta * C.at(ci);
    }
    return r;
  });
  std::string t = TypeName(dtype);
  std::string sig = "(" + t + Shape(da) + " a, " + t + Shape(db) + " b" +
                    (has_c ? ", " + Ty(t, c_dims) + " c" : "") + ") => (y)";
  char attrs[200];
  std::snprintf(attrs, sizeof(attrs), "<transA = %d, transB = %d, alpha = %.6f, beta = %.6f>", ta,
                tb, alpha, beta);
  std::string model =
      Model(opset, sig, std::string("y = Gemm ") + attrs + (has_c ? "(a, b, c)" : "(a, b)"));
  std::vector<TensorDataRef> in = {a, b};
  if (has_c) in.push_back(c);
  if (IsHalf(dtype)) {
    // K exact products of values in [-3, 3] (|term| <= 9) accumulated by K fmas, then alpha * acc,
    // beta * C and their sum: K + 3 roundings of terms summing to at most |alpha| 9K + |beta| 3.
    HalfTol h = HalfTolerance(
        dtype, F32Error(k + 3, std::fabs(alpha) * 9.0 * k + (has_c ? std::fabs(beta) * 3 : 0)));
    Expect(*Run(model, in)[0], expected, dtype, h.rtol, h.atol);
    return;
  }
  double tol = is_int ? 0 : 1e-4;
  Expect(*Run(model, in)[0], expected, dtype, tol, tol);
}

BOOST_AUTO_TEST_CASE(GemmAttributes) {
  for (int ta : {0, 1}) {
    for (int tb : {0, 1}) CheckGemm(7, 19, 70, ta, tb, 1, 1, {7, 70});
  }
  CheckGemm(7, 19, 70, 0, 1, 0.5, 2.0, {70});
  CheckGemm(7, 19, 70, 1, 0, -1.5, 0.25, {7, 1});
  CheckGemm(7, 19, 70, 0, 0, 1, 1, {});  // scalar C
  CheckGemm(7, 19, 70, 0, 0, 1, 1, {1, 70});
  CheckGemm(5, 3, 9, 0, 1, 2, 1, {}, false);  // no C (opset 11+)
  CheckGemm(1, 600, 10, 0, 1, 1, 1, {10});    // a classifier row, K in several chunks
  CheckGemm(100, 33, 130, 1, 1, 1, 0.5, {100, 130});
  CheckGemm(6, 8, 12, 0, 0, 1, 1, {6, 12}, true, DType::kF64, 9);
  CheckGemm(6, 8, 12, 0, 1, 1, 1, {12}, true, DType::kF16);
  CheckGemm(6, 8, 12, 0, 1, 1, 1, {12}, true, DType::kI32);
  CheckGemm(6, 8, 12, 1, 0, 1, 1, {6, 1}, true, DType::kI64);
}

BOOST_AUTO_TEST_CASE(GemmSymbolicRows) {
  std::string model = Model(13, "(float[N, 20] a, float[30, 20] b, float[30] c) => (y)",
                            "y = Gemm <transB = 1> (a, b, c)");
  for (int64_t n : {1, 13}) {
    TensorDataRef a = RandomTensor(DType::kF32, {n, 20}, -1, 1, 10);
    TensorDataRef b = RandomTensor(DType::kF32, {30, 20}, -1, 1, 11);
    TensorDataRef c = RandomTensor(DType::kF32, {30}, -1, 1, 12);
    Nd A = ToNd(*a), B = ToNd(*b), C = ToNd(*c);
    Nd expected = Generate({n, 30}, [&](const std::vector<int64_t>& i) {
      double s = C.at({i[1]});
      for (int64_t k = 0; k < 20; ++k) s += A.at({i[0], k}) * B.at({i[1], k});
      return s;
    });
    Expect(*Run(model, {a, b, c})[0], expected, DType::kF32, 1e-4, 1e-4);
  }
}

// ---- Einsum --------------------------------------------------------------------------------

// True when node 0 of `model` lowers to the tiled GEMM (its packed B panel), not a direct loop.
bool LowersToGemm(const std::string& model) {
  StatusOr<Graph> g = testing::InferText(model);
  BOOST_REQUIRE(g.ok());
  StatusOr<LoweredNode> lowered = LowerNode(*g, (*g->TopologicalOrder())[0], false, Table());
  BOOST_REQUIRE_MESSAGE(lowered.ok(), lowered.status().message());
  return jit::ToText(*lowered->kernel).find("pack") != std::string::npos;
}

BOOST_AUTO_TEST_CASE(EinsumForms) {
  auto einsum = [](const std::string& sig, const std::string& eq) {
    return Model(12, sig, "z = Einsum <equation = \"" + eq + "\"> (x, y)");
  };
  BOOST_TEST(
      LowersToGemm(einsum("(float[2,7,3,5] x, float[2,9,3,5] y) => (z)", "bfnh,btnh->bnft")));
  BOOST_TEST(LowersToGemm(einsum("(float[3,5] x, float[4,5] y) => (z)", "ij,kj->ik")));
  BOOST_TEST(!LowersToGemm(einsum("(float[4,4] x, float[4] y) => (z)", "ii,i->i")));

  TensorDataRef a = RandomTensor(DType::kF32, {3, 5}, -1, 1, 20);
  TensorDataRef b = RandomTensor(DType::kF32, {5, 4}, -1, 1, 21);
  TensorDataRef sq = RandomTensor(DType::kF32, {4, 4}, -1, 1, 22);
  TensorDataRef ba = RandomTensor(DType::kF32, {2, 3, 5}, -1, 1, 23);
  TensorDataRef bb = RandomTensor(DType::kF32, {2, 5, 4}, -1, 1, 24);
  Nd A = ToNd(*a), B = ToNd(*b), S = ToNd(*sq), BA = ToNd(*ba), BB = ToNd(*bb);
  auto run = [&](const std::string& sig, const std::string& eq,
                 const std::vector<TensorDataRef>& in, const Nd& expected) {
    BOOST_TEST_MESSAGE("Einsum " << eq);
    std::string args = in.size() == 1 ? "(x)" : "(x, y)";
    Expect(*Run(Model(12, sig, "z = Einsum <equation = \"" + eq + "\"> " + args), in)[0], expected,
           DType::kF32, 1e-5, 1e-5);
  };
  Nd mm = MatMulRef(A, B);
  run("(float[3,5] x, float[5,4] y) => (z)", "ij,jk->ik", {a, b}, mm);
  run("(float[3,5] x, float[5,4] y) => (z)", "ij,jk", {a, b}, mm);  // implicit output
  run("(float[2,3,5] x, float[2,5,4] y) => (z)", "bij,bjk->bik", {ba, bb}, MatMulRef(BA, BB));
  run("(float[2,3,5] x, float[2,5,4] y) => (z)", "...ij,...jk->...ik", {ba, bb}, MatMulRef(BA, BB));
  // Attention-style contraction with the reduced label innermost in both operands.
  TensorDataRef q = RandomTensor(DType::kF32, {2, 7, 3, 5}, -1, 1, 25);
  TensorDataRef kt = RandomTensor(DType::kF32, {2, 9, 3, 5}, -1, 1, 26);
  Nd Q = ToNd(*q), K = ToNd(*kt);
  run("(float[2,7,3,5] x, float[2,9,3,5] y) => (z)", "bfnh,btnh->bnft", {q, kt},
      Generate({2, 3, 7, 9}, [&](const std::vector<int64_t>& i) {
        double sum = 0;
        for (int64_t h = 0; h < 5; ++h)
          sum += Q.at({i[0], i[2], i[1], h}) * K.at({i[0], i[3], i[1], h});
        return sum;
      }));
  run("(float[3,5] x, float[4,5] y) => (z)", "ij,kj->ik",
      {a, RandomTensor(DType::kF32, {4, 5}, -1, 1, 27)},
      MatMulRef(A, Generate({5, 4}, [&](const std::vector<int64_t>& i) {
                  return ToNd(*RandomTensor(DType::kF32, {4, 5}, -1, 1, 27)).at({i[1], i[0]});
                })));
  TensorDataRef u = RandomTensor(DType::kF32, {3}, -1, 1, 28),
                v = RandomTensor(DType::kF32, {4}, -1, 1, 29);
  Nd U = ToNd(*u), V = ToNd(*v);
  run("(float[3] x, float[4] y) => (z)", "i,j->ij", {u, v},
      Generate({3, 4}, [&](const std::vector<int64_t>& i) { return U.at({i[0]}) * V.at({i[1]}); }));
  run("(float[2,3,5] x, float[5,4] y) => (z)", "bij,jk->bik", {ba, b}, MatMulRef(BA, B));
  std::string sym = Model(12, "(float[N,3,5] x, float[N,5,4] y) => (z)",
                          "z = Einsum <equation = \"bij,bjk->bik\"> (x, y)");
  for (int64_t n : {1, 4}) {
    TensorDataRef x1 = RandomTensor(DType::kF32, {n, 3, 5}, -1, 1, 30);
    TensorDataRef y1 = RandomTensor(DType::kF32, {n, 5, 4}, -1, 1, 31);
    Expect(*Run(sym, {x1, y1})[0], MatMulRef(ToNd(*x1), ToNd(*y1)), DType::kF32, 1e-5, 1e-5);
  }
  run("(float[3,5] x) => (z)", "ij->ji", {a}, Generate({5, 3}, [&](const std::vector<int64_t>& i) {
        return A.at({i[1], i[0]});
      }));
  run("(float[3,5] x) => (z)", "ij->i", {a}, Generate({3}, [&](const std::vector<int64_t>& i) {
        double s = 0;
        for (int64_t j = 0; j < 5; ++j) s += A.at({i[0], j});
        return s;
      }));
  run("(float[4,4] x) => (z)", "ii->i", {sq}, Generate({4}, [&](const std::vector<int64_t>& i) {
        return S.at({i[0], i[0]});
      }));
  run("(float[4,4] x) => (z)", "ii", {sq}, Generate({}, [&](const std::vector<int64_t>&) {
        double s = 0;
        for (int64_t i = 0; i < 4; ++i) s += S.at({i, i});
        return s;
      }));
  run("(float[3,5] x, float[5,4] y) => (z)", "ij,jk->", {a, b},
      Generate({}, [&](const std::vector<int64_t>&) {
        double s = 0;
        for (double v : mm.v) s += v;
        return s;
      }));
}

// ---- Conv ----------------------------------------------------------------------------------

struct ConvCase {
  std::vector<int64_t> x, w;  // X [N, C, spatial...], W [M, C/group, k...]
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads;
  std::string auto_pad = "NOTSET";
  bool bias = true;
  DType dtype = DType::kF32;
};

// Begin pads and output dims per the ONNX rules.
void ConvGeometry(const ConvCase& c, std::vector<int64_t>& out, std::vector<int64_t>& pad_begin) {
  size_t s = c.x.size() - 2;
  out = {c.x[0], c.w[0]};
  pad_begin.assign(s, 0);
  for (size_t d = 0; d < s; ++d) {
    int64_t stride = c.strides.empty() ? 1 : c.strides[d];
    int64_t dil = c.dilations.empty() ? 1 : c.dilations[d];
    int64_t ext = (c.w[2 + d] - 1) * dil + 1, in = c.x[2 + d];
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      int64_t o = (in + stride - 1) / stride;
      int64_t total = std::max<int64_t>(0, (o - 1) * stride + ext - in);
      pad_begin[d] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      out.push_back(o);
    } else {
      int64_t pb = 0, pe = 0;
      if (c.auto_pad == "NOTSET" && !c.pads.empty()) {
        pb = c.pads[d];
        pe = c.pads[d + s];
      }
      pad_begin[d] = pb;
      out.push_back((in + pb + pe - ext) / stride + 1);
    }
  }
}

std::string WindowAttrText(const std::vector<int64_t>& strides,
                           const std::vector<int64_t>& dilations, const std::vector<int64_t>& pads,
                           const std::string& auto_pad) {
  std::string a = "auto_pad = \"" + auto_pad + "\"";
  if (!strides.empty()) a += ", strides = " + Shape(strides);
  if (!dilations.empty()) a += ", dilations = " + Shape(dilations);
  if (!pads.empty()) a += ", pads = " + Shape(pads);
  return a;
}

void CheckConv(const ConvCase& c) {
  std::vector<int64_t> out, pb;
  ConvGeometry(c, out, pb);
  BOOST_TEST_MESSAGE("Conv x=" << Shape(c.x) << " w=" << Shape(c.w) << " group=" << c.group << " "
                               << c.auto_pad << " -> " << Shape(out));
  size_t s = c.x.size() - 2;
  TensorDataRef x = RandomTensor(c.dtype, c.x, -1, 1, 30);
  TensorDataRef w = RandomTensor(c.dtype, c.w, -1, 1, 31);
  TensorDataRef b = RandomTensor(c.dtype, {c.w[0]}, -1, 1, 32);
  Nd X = ToNd(*x), W = ToNd(*w), B = ToNd(*b);
  int64_t m_per_group = c.w[0] / c.group, c_per_group = c.w[1];
  std::vector<int64_t> taps(c.w.begin() + 2, c.w.end());
  Nd expected = Generate(out, [&](const std::vector<int64_t>& o) {
    double sum = c.bias ? B.at({o[1]}) : 0;
    int64_t g = o[1] / m_per_group;
    for (int64_t ci = 0; ci < c_per_group; ++ci) {
      for (int64_t t = 0; t < Count(taps); ++t) {
        std::vector<int64_t> k = Unravel(t, taps);
        std::vector<int64_t> xi = {o[0], g * c_per_group + ci};
        bool inside = true;
        for (size_t d = 0; d < s; ++d) {
          int64_t stride = c.strides.empty() ? 1 : c.strides[d];
          int64_t dil = c.dilations.empty() ? 1 : c.dilations[d];
          int64_t p = o[2 + d] * stride - pb[d] + k[d] * dil;
          inside = inside && p >= 0 && p < c.x[2 + d];
          xi.push_back(p);
        }
        if (!inside) continue;
        std::vector<int64_t> wi = {o[1], ci};
        wi.insert(wi.end(), k.begin(), k.end());
        sum += X.at(xi) * W.at(wi);
      }
    }
    return sum;
  });
  std::string t = TypeName(c.dtype);
  std::string sig = "(" + t + Shape(c.x) + " x, " + t + Shape(c.w) + " w" +
                    (c.bias ? ", " + t + Shape({c.w[0]}) + " b" : "") + ") => (y)";
  std::string attrs = WindowAttrText(c.strides, c.dilations, c.pads, c.auto_pad) +
                      ", group = " + std::to_string(c.group);
  std::string model =
      Model(13, sig, "y = Conv <" + attrs + "> " + (c.bias ? "(x, w, b)" : "(x, w)"));
  std::vector<TensorDataRef> in = {x, w};
  if (c.bias) in.push_back(b);
  if (IsHalf(c.dtype)) {
    // C/group * taps exact products of values in [-1, 1] and the bias (in [-1, 1]), one fma or
    // add each: n = C/group * taps + 1 roundings of terms whose magnitudes sum to at most n.
    int64_t n = c_per_group * Count(taps) + 1;
    HalfTol h = HalfTolerance(c.dtype, F32Error(n, static_cast<double>(n)));
    Expect(*Run(model, in)[0], expected, c.dtype, h.rtol, h.atol);
    return;
  }
  Expect(*Run(model, in)[0], expected, c.dtype, 1e-4, 1e-4);
}

BOOST_AUTO_TEST_CASE(Conv2D) {
  CheckConv({{1, 3, 7, 9}, {10, 3, 3, 3}, 1, {}, {}, {1, 1, 1, 1}});
  CheckConv({{2, 4, 11, 10}, {8, 4, 3, 3}, 1, {2, 2}, {}, {1, 0, 1, 2}});
  CheckConv({{1, 4, 13, 12}, {8, 4, 3, 2}, 1, {1, 2}, {2, 2}, {2, 1, 0, 1}, "NOTSET", false});
  CheckConv({{2, 6, 9, 9}, {8, 3, 3, 3}, 2, {}, {}, {1, 1, 1, 1}});       // groups (GEMM per group)
  CheckConv({{1, 5, 9, 10}, {5, 1, 3, 3}, 5, {2, 2}, {}, {1, 1, 1, 1}});  // depthwise (direct)
  CheckConv({{1, 3, 8, 70}, {6, 1, 3, 3}, 3, {}, {}, {0, 1, 2, 1}});      // multiplier 2, long rows
  CheckConv({{1, 16, 7, 7}, {24, 16, 1, 1}});                             // pointwise
  CheckConv({{1, 4, 5, 150}, {4, 1, 3, 3}, 4, {1, 2}, {}, {1, 1, 1, 1}});  // depthwise, strided
  CheckConv({{2, 7, 5, 6}, {9, 7, 1, 1}, 1, {2, 2}});                      // strided 1x1
  CheckConv({{1, 3, 7, 9}, {10, 3, 3, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER"});
  CheckConv({{1, 3, 8, 9}, {10, 3, 4, 4}, 1, {1, 1}, {}, {}, "SAME_LOWER"});
  CheckConv({{1, 3, 8, 9}, {10, 3, 4, 4}, 1, {1, 1}, {}, {}, "SAME_UPPER"});
  CheckConv({{1, 3, 8, 9}, {10, 3, 3, 2}, 1, {2, 1}, {}, {}, "VALID"});
  CheckConv({{1, 8, 6, 6}, {70, 8, 3, 3}, 1, {}, {}, {1, 1, 1, 1}});  // M past one row group
  ConvCase f16{{1, 3, 7, 9}, {8, 3, 3, 3}, 1, {}, {}, {1, 1, 1, 1}};
  f16.dtype = DType::kF16;
  CheckConv(f16);
  ConvCase f64{{1, 3, 7, 9}, {8, 3, 3, 3}, 1, {}, {}, {1, 1, 1, 1}};
  f64.dtype = DType::kF64;
  CheckConv(f64);
}

BOOST_AUTO_TEST_CASE(Conv1D3D) {
  CheckConv({{2, 3, 17}, {5, 3, 3}, 1, {2}, {}, {1, 1}});
  CheckConv({{1, 4, 20}, {4, 1, 5}, 4, {}, {2}, {4, 4}});  // depthwise 1-D, dilated
  CheckConv({{1, 2, 5, 6, 7}, {6, 2, 3, 3, 3}, 1, {}, {}, {1, 1, 1, 1, 1, 1}});
  CheckConv({{1, 2, 5, 6, 7}, {2, 1, 3, 2, 3}, 2, {2, 1, 2}, {}, {0, 1, 1, 0, 0, 1}});
}

BOOST_AUTO_TEST_CASE(ConvSymbolicBatch) {
  std::string model = Model(13, "(float[N, 4, 10, 10] x, float[8, 4, 3, 3] w) => (y)",
                            "y = Conv <pads = [1, 1, 1, 1]> (x, w)");
  for (int64_t n : {1, 3}) {
    ConvCase c{{n, 4, 10, 10}, {8, 4, 3, 3}, 1, {}, {}, {1, 1, 1, 1}, "NOTSET", false};
    std::vector<int64_t> out, pb;
    ConvGeometry(c, out, pb);
    TensorDataRef x = RandomTensor(DType::kF32, c.x, -1, 1, 30);
    TensorDataRef w = RandomTensor(DType::kF32, c.w, -1, 1, 31);
    Nd X = ToNd(*x), W = ToNd(*w);
    Nd expected = Generate(out, [&](const std::vector<int64_t>& o) {
      double sum = 0;
      for (int64_t ci = 0; ci < 4; ++ci)
        for (int64_t kh = 0; kh < 3; ++kh)
          for (int64_t kw = 0; kw < 3; ++kw) {
            int64_t h = o[2] - 1 + kh, v = o[3] - 1 + kw;
            if (h >= 0 && h < 10 && v >= 0 && v < 10)
              sum += X.at({o[0], ci, h, v}) * W.at({o[1], ci, kh, kw});
          }
      return sum;
    });
    Expect(*Run(model, {x, w})[0], expected, DType::kF32, 1e-4, 1e-4);
  }
}

// ---- ConvTranspose -------------------------------------------------------------------------

struct ConvTCase {
  std::vector<int64_t> x, w;  // X [N, C, spatial...], W [C, M/group, k...]
  int64_t group = 1;
  std::vector<int64_t> strides, dilations, pads, output_padding, output_shape;
  std::string auto_pad = "NOTSET";
  bool bias = true;
};

void CheckConvTranspose(const ConvTCase& c) {
  size_t s = c.x.size() - 2;
  std::vector<int64_t> out = {c.x[0], c.w[1] * c.group}, pb(s);
  for (size_t d = 0; d < s; ++d) {
    int64_t stride = c.strides.empty() ? 1 : c.strides[d];
    int64_t dil = c.dilations.empty() ? 1 : c.dilations[d];
    int64_t op = c.output_padding.empty() ? 0 : c.output_padding[d];
    int64_t ext = (c.w[2 + d] - 1) * dil + 1, in = c.x[2 + d];
    int64_t o;
    if (!c.output_shape.empty()) {
      o = c.output_shape[d + (c.output_shape.size() == s + 2 ? 2 : 0)];
    } else if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      o = in * stride;
    } else {
      int64_t pads = c.pads.empty() ? 0 : c.pads[d] + c.pads[d + s];
      o = stride * (in - 1) + op + ext - pads;
    }
    if (!c.output_shape.empty() || c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      int64_t total = stride * (in - 1) + op + ext - o;
      int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor, as the ONNX spec
      pb[d] = c.auto_pad == "SAME_UPPER" ? half : total - half;
    } else {
      pb[d] = c.pads.empty() ? 0 : c.pads[d];
    }
    out.push_back(o);
  }
  BOOST_TEST_MESSAGE("ConvTranspose x=" << Shape(c.x) << " w=" << Shape(c.w) << " -> "
                                        << Shape(out));
  TensorDataRef x = RandomTensor(DType::kF32, c.x, -1, 1, 40);
  TensorDataRef w = RandomTensor(DType::kF32, c.w, -1, 1, 41);
  TensorDataRef b = RandomTensor(DType::kF32, {out[1]}, -1, 1, 42);
  Nd X = ToNd(*x), W = ToNd(*w), B = ToNd(*b);
  // Scatter form: every input element adds W * x to the outputs its window covers.
  Nd expected =
      Generate(out, [&](const std::vector<int64_t>& o) { return c.bias ? B.at({o[1]}) : 0.0; });
  int64_t m_per_group = c.w[1], c_per_group = c.x[1] / c.group;
  std::vector<int64_t> taps(c.w.begin() + 2, c.w.end());
  for (int64_t xi = 0; xi < Count(c.x); ++xi) {
    std::vector<int64_t> i = Unravel(xi, c.x);
    int64_t g = i[1] / c_per_group;
    for (int64_t m = 0; m < m_per_group; ++m) {
      for (int64_t t = 0; t < Count(taps); ++t) {
        std::vector<int64_t> k = Unravel(t, taps);
        std::vector<int64_t> oi = {i[0], g * m_per_group + m};
        bool inside = true;
        for (size_t d = 0; d < s; ++d) {
          int64_t stride = c.strides.empty() ? 1 : c.strides[d];
          int64_t dil = c.dilations.empty() ? 1 : c.dilations[d];
          int64_t p = i[2 + d] * stride - pb[d] + k[d] * dil;
          inside = inside && p >= 0 && p < out[2 + d];
          oi.push_back(p);
        }
        if (!inside) continue;
        std::vector<int64_t> wi = {i[1], m};
        wi.insert(wi.end(), k.begin(), k.end());
        expected[oi] += X.at(i) * W.at(wi);
      }
    }
  }
  std::string attrs = WindowAttrText(c.strides, c.dilations, c.pads, c.auto_pad) +
                      ", group = " + std::to_string(c.group);
  if (!c.output_padding.empty()) attrs += ", output_padding = " + Shape(c.output_padding);
  if (!c.output_shape.empty()) attrs += ", output_shape = " + Shape(c.output_shape);
  std::string sig = "(float" + Shape(c.x) + " x, float" + Shape(c.w) + " w" +
                    (c.bias ? ", float" + Shape({out[1]}) + " b" : "") + ") => (y)";
  std::string model =
      Model(13, sig, "y = ConvTranspose <" + attrs + "> " + (c.bias ? "(x, w, b)" : "(x, w)"));
  std::vector<TensorDataRef> in = {x, w};
  if (c.bias) in.push_back(b);
  Expect(*Run(model, in)[0], expected, DType::kF32, 1e-4, 1e-4);
}

BOOST_AUTO_TEST_CASE(ConvTransposeAttributes) {
  CheckConvTranspose({{1, 3, 5, 6}, {3, 4, 3, 3}});
  CheckConvTranspose({{2, 3, 5, 6}, {3, 4, 3, 3}, 1, {2, 2}, {}, {1, 0, 1, 2}});
  CheckConvTranspose({{1, 2, 4, 5}, {2, 3, 3, 2}, 1, {3, 2}, {}, {}, {1, 1}});  // output_padding
  CheckConvTranspose({{1, 2, 4, 5}, {2, 3, 3, 3}, 1, {2, 2}, {2, 1}, {1, 1, 1, 1}});  // dilated
  CheckConvTranspose({{1, 4, 5, 5}, {4, 2, 3, 3}, 2, {2, 2}, {}, {1, 1, 1, 1}});      // groups
  CheckConvTranspose({{1, 2, 4, 5}, {2, 3, 3, 3}, 1, {2, 2}, {}, {}, {}, {8, 10}});  // output_shape
  CheckConvTranspose({{1, 2, 4, 5}, {2, 3, 3, 3}, 1, {2, 2}, {}, {}, {}, {1, 2, 8, 11}});
  CheckConvTranspose(
      {{1, 2, 4, 5}, {2, 3, 3, 3}, 1, {2, 2}, {}, {}, {}, {10, 12}});  // past natural
  CheckConvTranspose({{1, 2, 4, 5}, {2, 3, 3, 3}, 1, {2, 2}, {}, {}, {}, {}, "SAME_UPPER"});
  CheckConvTranspose({{1, 2, 4, 5}, {2, 3, 4, 4}, 1, {2, 2}, {}, {}, {}, {}, "SAME_LOWER"});
  CheckConvTranspose({{2, 3, 9}, {3, 2, 4}, 1, {3}, {}, {1, 2}, {}, {}, "NOTSET", false});  // 1-D
  CheckConvTranspose({{1, 2, 3, 4, 3}, {2, 2, 2, 2, 2}, 1, {2, 2, 2}});                     // 3-D
  CheckConvTranspose({{1, 2, 3, 70}, {2, 3, 1, 3}, 1, {1, 2}});  // rows past one tile
}

// Fewer than 4 output channels per group but many input channels (Conv-TasNet's decoder, 128 ->
// 1 channels, kernel 16, stride 8) run as the tiled GEMM: the direct loops, meant for depthwise
// layers, test every tap of every input channel per output and ran that decoder 30x slower.
BOOST_AUTO_TEST_CASE(ConvTransposeFewOutputChannelsManyInputs) {
  auto model = [](const std::string& x, const std::string& w, const std::string& attrs) {
    return Model(13, "(float" + x + " x, float" + w + " w) => (y)",
                 "y = ConvTranspose <" + attrs + "> (x, w)");
  };
  BOOST_TEST(LowersToGemm(model("[2, 32, 40]", "[32, 1, 16]", "strides = [8]")));
  BOOST_TEST(LowersToGemm(model("[2, 32, 40]", "[32, 1, 8]", "strides = [8]")));
  BOOST_TEST(LowersToGemm(model("[1, 32, 5, 6]", "[32, 3, 3, 3]", "strides = [2, 2], group = 2")));
  // Depthwise (one input channel per group) stays direct.
  BOOST_TEST(!LowersToGemm(model("[1, 32, 40]", "[32, 1, 4]", "strides = [2], group = 32")));

  CheckConvTranspose({{2, 32, 40}, {32, 1, 16}, 1, {8}, {}, {}, {}, {}, "NOTSET", false});
  CheckConvTranspose({{2, 32, 40}, {32, 1, 8}, 1, {8}});  // kernel = stride: one tap per output
  CheckConvTranspose({{1, 32, 5, 6}, {32, 3, 3, 3}, 2, {2, 2}, {}, {1, 0, 1, 1}});
  CheckConvTranspose({{1, 24, 7}, {24, 2, 5}, 1, {3}, {2}, {1, 2}});  // dilated, padded
}

// The same attribute combinations with enough output channels per group for the GEMM per
// output phase (nn_conv_transpose.cc): strides with and without a common factor with the
// dilation, kernels smaller and larger than the stride, phases that receive no tap, output
// grids that do not divide by the stride, and row / column counts past one register tile.
BOOST_AUTO_TEST_CASE(ConvTransposeGemmPerPhase) {
  CheckConvTranspose({{1, 3, 5, 6}, {3, 8, 3, 3}});
  CheckConvTranspose({{2, 3, 5, 6}, {3, 7, 3, 3}, 1, {2, 2}, {}, {1, 0, 1, 2}});
  CheckConvTranspose({{1, 2, 4, 5}, {2, 5, 3, 2}, 1, {3, 2}, {}, {}, {1, 1}});  // output_padding
  CheckConvTranspose({{1, 2, 4, 5}, {2, 6, 3, 3}, 1, {2, 2}, {2, 1}, {1, 1, 1, 1}});  // dilated
  CheckConvTranspose({{1, 3, 5, 4}, {3, 4, 2, 3}, 1, {2, 3}, {2, 3}});  // dilation = stride
  CheckConvTranspose({{1, 3, 5, 4}, {3, 4, 3, 3}, 1, {4, 2}, {2, 3}});  // stride 4, dilation 2
  CheckConvTranspose({{1, 8, 5, 5}, {8, 5, 3, 3}, 2, {2, 2}, {}, {1, 1, 1, 1}});     // groups
  CheckConvTranspose({{1, 2, 4, 5}, {2, 4, 3, 3}, 1, {2, 2}, {}, {}, {}, {8, 10}});  // output_shape
  CheckConvTranspose(
      {{1, 2, 4, 5}, {2, 4, 3, 3}, 1, {2, 2}, {}, {}, {}, {10, 12}});  // past natural
  CheckConvTranspose({{1, 2, 4, 5}, {2, 4, 3, 3}, 1, {3, 3}, {}, {}, {}, {}, "SAME_UPPER"});
  CheckConvTranspose({{1, 2, 4, 5}, {2, 4, 4, 4}, 1, {2, 2}, {}, {}, {}, {}, "SAME_LOWER"});
  CheckConvTranspose({{2, 3, 9}, {3, 6, 4}, 1, {3}, {}, {1, 2}, {}, {}, "NOTSET", false});  // 1-D
  CheckConvTranspose({{1, 2, 3, 4, 3}, {2, 4, 2, 2, 2}, 1, {2, 2, 2}});                     // 3-D
  CheckConvTranspose({{1, 4, 3, 5, 2}, {4, 5, 3, 2, 3}, 1, {2, 1, 3}, {1, 2, 1}});  // 3-D mixed
  CheckConvTranspose({{1, 16, 9, 11}, {16, 13, 2, 2}, 1, {2, 2}});  // the U-Net upsampling
  CheckConvTranspose({{1, 19, 6, 40}, {19, 8, 4, 4}, 1, {2, 2}, {}, {1, 1, 1, 1}});  // k4 s2 p1
}

// Kernel = stride without pads (nn_conv_transpose.cc's one GEMM per input row, its rows the
// output channels times the phases): 1-, 2- and 3-D, unequal strides, groups, no bias, two
// images, rows past one row group (30 x 4 = 120 > 96) and columns past one panel (40 > 16);
// then the cases next to it that must keep the GEMM per phase (output padding, pads, dilation).
BOOST_AUTO_TEST_CASE(ConvTransposeUpsample) {
  CheckConvTranspose({{2, 6, 5, 40}, {6, 30, 2, 2}, 1, {2, 2}});
  CheckConvTranspose({{1, 5, 7}, {5, 4, 3}, 1, {3}, {}, {}, {}, {}, "NOTSET", false});  // 1-D
  CheckConvTranspose({{1, 3, 3, 4, 5}, {3, 4, 2, 2, 2}, 1, {2, 2, 2}});                  // 3-D
  CheckConvTranspose({{1, 4, 5, 9}, {4, 6, 3, 2}, 1, {3, 2}});  // unequal strides
  CheckConvTranspose({{1, 8, 4, 6}, {8, 5, 2, 2}, 2, {2, 2}});  // groups
  CheckConvTranspose({{1, 4, 5, 6}, {4, 5, 2, 2}, 1, {2, 2}, {}, {}, {1, 1}});  // output_padding
  CheckConvTranspose({{1, 4, 5, 6}, {4, 5, 2, 2}, 1, {2, 2}, {}, {1, 0, 0, 1}});  // pads
  CheckConvTranspose({{1, 4, 5, 6}, {4, 5, 2, 2}, 1, {2, 2}, {2, 1}});           // dilated
  CheckConvTranspose({{1, 4, 5, 6}, {4, 5, 2, 2}, 1, {2, 2}, {}, {}, {}, {10, 13}});  // shape
}

// ---- Pooling -------------------------------------------------------------------------------

struct PoolCase {
  std::string op;  // MaxPool, AveragePool, LpPool
  std::vector<int64_t> x, kernel, strides, dilations, pads;
  std::string auto_pad = "NOTSET";
  int ceil_mode = 0, count_include_pad = 0, storage_order = 0, p = 2;
  DType dtype = DType::kF32;
  bool indices = false;
};

// Runs `c` as a one-node model, or, when `actual` is given, checks it (the pool of `given_x`).
void CheckPool(const PoolCase& c, TensorDataRef given_x = nullptr,
               const TensorData* actual = nullptr) {
  size_t s = c.x.size() - 2;
  std::vector<int64_t> out = {c.x[0], c.x[1]}, pb(s), pe(s);
  for (size_t d = 0; d < s; ++d) {
    int64_t stride = c.strides.empty() ? 1 : c.strides[d];
    int64_t dil = c.dilations.empty() ? 1 : c.dilations[d];
    int64_t ext = (c.kernel[d] - 1) * dil + 1, in = c.x[2 + d];
    if (c.auto_pad == "SAME_UPPER" || c.auto_pad == "SAME_LOWER") {
      int64_t o = (in + stride - 1) / stride;
      int64_t total = std::max<int64_t>(0, (o - 1) * stride + ext - in);
      pb[d] = c.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pe[d] = total - pb[d];
      out.push_back(o);
    } else {
      pb[d] = c.pads.empty() || c.auto_pad == "VALID" ? 0 : c.pads[d];
      pe[d] = c.pads.empty() || c.auto_pad == "VALID" ? 0 : c.pads[d + s];
      int64_t span = in + pb[d] + pe[d] - ext;
      out.push_back((c.ceil_mode ? (span + stride - 1) / stride : span / stride) + 1);
    }
  }
  BOOST_TEST_MESSAGE(c.op << " x=" << Shape(c.x) << " k=" << Shape(c.kernel) << " -> "
                          << Shape(out));
  TensorDataRef x = given_x ? given_x
                            : RandomTensor(c.dtype, c.x, c.dtype == DType::kI8 ? -100 : -2,
                                           c.dtype == DType::kI8 ? 100 : 2, 50);
  Nd X = ToNd(*x);
  Nd idx_expected{out, std::vector<double>(Count(out))};
  Nd expected = Generate(out, [&](const std::vector<int64_t>& o) {
    double best = -std::numeric_limits<double>::infinity(), sum = 0, n = 0, n_pad = 0;
    int64_t best_index = 0;
    for (int64_t t = 0; t < Count(c.kernel); ++t) {
      std::vector<int64_t> k = Unravel(t, c.kernel);
      std::vector<int64_t> xi = {o[0], o[1]};
      bool inside = true, counted = true;
      for (size_t d = 0; d < s; ++d) {
        int64_t stride = c.strides.empty() ? 1 : c.strides[d];
        int64_t dil = c.dilations.empty() ? 1 : c.dilations[d];
        int64_t q = o[2 + d] * stride - pb[d] + k[d] * dil;
        inside = inside && q >= 0 && q < c.x[2 + d];
        counted = counted && q >= -pb[d] && q < c.x[2 + d] + pe[d];
        xi.push_back(q);
      }
      n_pad += counted;
      if (!inside) continue;
      double v = X.at(xi);
      ++n;
      sum += c.op == "LpPool" ? std::pow(std::fabs(v), c.p) : v;
      if (v > best) {
        best = v;
        int64_t flat = 0;
        if (c.storage_order) {
          for (int d = static_cast<int>(s) - 1; d >= 0; --d) flat = flat * c.x[2 + d] + xi[2 + d];
        } else {
          for (size_t d = 0; d < s; ++d) flat = flat * c.x[2 + d] + xi[2 + d];
        }
        best_index = (o[0] * c.x[1] + o[1]) * Count({c.x.begin() + 2, c.x.end()}) + flat;
      }
    }
    idx_expected[o] = static_cast<double>(best_index);
    if (c.op == "MaxPool") return best;
    if (c.op == "LpPool") return std::pow(sum, 1.0 / c.p);
    return sum / (c.count_include_pad ? n_pad : n);
  });
  std::string attrs = WindowAttrText(c.strides, c.dilations, c.pads, c.auto_pad) +
                      ", kernel_shape = " + Shape(c.kernel);
  if (c.op != "LpPool") attrs += ", ceil_mode = " + std::to_string(c.ceil_mode);
  if (c.op == "AveragePool")
    attrs += ", count_include_pad = " + std::to_string(c.count_include_pad);
  if (c.op == "MaxPool") attrs += ", storage_order = " + std::to_string(c.storage_order);
  if (c.op == "LpPool") attrs += ", p = " + std::to_string(c.p);
  std::string t = TypeName(c.dtype);
  std::string model =
      Model(17, "(" + t + Shape(c.x) + " x) => (y" + (c.indices ? ", i)" : ")"),
            std::string(c.indices ? "y, i" : "y") + " = " + c.op + " <" + attrs + "> (x)");
  // MaxPool only selects an input value: exact in every dtype. The averaging pools are checked in
  // f32/f64 only here (no half-precision bound is derived for them).
  BOOST_REQUIRE_MESSAGE(c.op == "MaxPool" || !IsHalf(c.dtype), c.op << " in half precision");
  double tol = c.op == "MaxPool" ? 0 : 1e-5;
  if (actual) {
    Expect(*actual, expected, c.dtype, tol, tol);
    return;
  }
  std::vector<TensorDataRef> result = Run(model, {x});
  Expect(*result[0], expected, c.dtype, tol, tol);
  if (c.indices) Expect(*result[1], idx_expected, DType::kI64, 0, 0);
}

BOOST_AUTO_TEST_CASE(MaxPoolAttributes) {
  PoolCase c{"MaxPool", {1, 3, 7, 9}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}};
  CheckPool(c);
  c.indices = true;
  CheckPool(c);
  c.storage_order = 1;
  CheckPool(c);
  PoolCase ceil{"MaxPool", {2, 2, 8, 9}, {3, 2}, {2, 2}, {}, {}};
  ceil.ceil_mode = 1;
  ceil.indices = true;
  CheckPool(ceil);
  PoolCase dil{"MaxPool", {1, 2, 9, 10}, {2, 3}, {1, 2}, {2, 2}, {0, 1, 1, 0}};
  CheckPool(dil);
  PoolCase same{"MaxPool", {1, 2, 7, 8}, {3, 3}, {2, 2}, {}, {}, "SAME_UPPER"};
  CheckPool(same);
  same.auto_pad = "SAME_LOWER";
  CheckPool(same);
  PoolCase one_d{"MaxPool", {2, 3, 70}, {4}, {3}, {}, {1, 2}};
  one_d.indices = true;
  CheckPool(one_d);
  PoolCase three_d{"MaxPool", {1, 2, 4, 5, 6}, {2, 2, 3}, {2, 1, 2}, {}, {}};
  CheckPool(three_d);
  PoolCase i8{"MaxPool", {1, 2, 5, 5}, {2, 2}, {1, 1}, {}, {}};
  i8.dtype = DType::kI8;
  CheckPool(i8);
  PoolCase f16{"MaxPool", {1, 2, 5, 5}, {2, 2}, {1, 1}, {}, {}};
  f16.dtype = DType::kF16;
  CheckPool(f16);
}

BOOST_AUTO_TEST_CASE(AverageAndLpPool) {
  for (int include : {0, 1}) {
    PoolCase c{"AveragePool", {1, 3, 7, 9}, {3, 3}, {2, 2}, {}, {1, 1, 1, 1}};
    c.count_include_pad = include;
    CheckPool(c);
    PoolCase ceil{"AveragePool", {1, 2, 8, 9}, {3, 3}, {2, 2}, {}, {1, 0, 0, 1}};
    ceil.ceil_mode = 1;
    ceil.count_include_pad = include;
    CheckPool(ceil);
    PoolCase same{"AveragePool", {1, 2, 7, 8}, {3, 2}, {2, 3}, {}, {}, "SAME_LOWER"};
    same.count_include_pad = include;
    CheckPool(same);
  }
  CheckPool({"AveragePool", {2, 3, 11}, {4}, {2}, {}, {}});
  PoolCase wide{"AveragePool", {1, 2, 3, 140}, {2, 3}, {1, 2}, {}, {0, 1, 1, 1}};  // rows > 64
  CheckPool(wide);
  wide.count_include_pad = 1;
  CheckPool(wide);
  wide.op = "MaxPool";
  CheckPool(wide);
  CheckPool({"AveragePool", {1, 2, 4, 5, 6}, {2, 2, 2}, {1, 2, 2}, {}, {}});
  CheckPool({"AveragePool", {1, 2, 9, 9}, {3, 3}, {1, 1}, {2, 2}, {}});  // dilations (opset 19)
  PoolCase lp{"LpPool", {1, 3, 7, 8}, {3, 2}, {2, 1}, {}, {1, 0, 1, 0}};
  CheckPool(lp);
  lp.p = 1;
  CheckPool(lp);
  lp.p = 3;
  CheckPool(lp);
}

BOOST_AUTO_TEST_CASE(GlobalPools) {
  TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 5, 7}, -2, 2, 60);
  Nd X = ToNd(*x);
  auto reduce = [&](const std::function<double(const std::vector<double>&)>& f) {
    return Generate({2, 3, 1, 1}, [&](const std::vector<int64_t>& o) {
      std::vector<double> v;
      for (int64_t h = 0; h < 5; ++h)
        for (int64_t w = 0; w < 7; ++w) v.push_back(X.at({o[0], o[1], h, w}));
      return f(v);
    });
  };
  std::string sig = "(float[2,3,5,7] x) => (a, m, l, l1)";
  std::vector<TensorDataRef> out =
      Run(Model(13, sig,
                "a = GlobalAveragePool(x)\n m = GlobalMaxPool(x)\n l = GlobalLpPool(x)\n"
                " l1 = GlobalLpPool <p = 1> (x)"),
          {x});
  Expect(*out[0], reduce([](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e;
    return s / v.size();
  }),
         DType::kF32);
  Expect(*out[1],
         reduce([](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }),
         DType::kF32);
  Expect(*out[2], reduce([](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += e * e;
    return std::sqrt(s);
  }),
         DType::kF32);
  Expect(*out[3], reduce([](const std::vector<double>& v) {
    double s = 0;
    for (double e : v) s += std::fabs(e);
    return s;
  }),
         DType::kF32);
  // 1-D and 3-D inputs with a symbolic batch.
  std::string model = Model(13, "(float[N, 2, 9] x, float[N, 2, 2, 3, 4] z) => (a, b)",
                            "a = GlobalAveragePool(x)\n b = GlobalMaxPool(z)");
  for (int64_t n : {1, 3}) {
    TensorDataRef x1 = RandomTensor(DType::kF32, {n, 2, 9}, -2, 2, 61);
    TensorDataRef z = RandomTensor(DType::kF32, {n, 2, 2, 3, 4}, -2, 2, 62);
    Nd X1 = ToNd(*x1), Z = ToNd(*z);
    std::vector<TensorDataRef> r = Run(model, {x1, z});
    Expect(*r[0],
           Generate({n, 2, 1},
                    [&](const std::vector<int64_t>& o) {
                      double s = 0;
                      for (int64_t i = 0; i < 9; ++i) s += X1.at({o[0], o[1], i});
                      return s / 9;
                    }),
           DType::kF32);
    Expect(*r[1],
           Generate({n, 2, 1, 1, 1},
                    [&](const std::vector<int64_t>& o) {
                      double m = -1e9;
                      for (int64_t i = 0; i < 24; ++i)
                        m = std::max(m, Z.v[(o[0] * 2 + o[1]) * 24 + i]);
                      return m;
                    }),
           DType::kF32);
  }
}

// ---- Normalisation -------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(BatchNormInference) {
  for (int opset : {9, 15}) {
    for (std::vector<int64_t> dims : {std::vector<int64_t>{2, 3, 5, 7}, {4, 3}, {1, 3, 70}}) {
      TensorDataRef x = RandomTensor(DType::kF32, dims, -2, 2, 70);
      TensorDataRef scale = RandomTensor(DType::kF32, {3}, 0.5, 2, 71);
      TensorDataRef bias = RandomTensor(DType::kF32, {3}, -1, 1, 72);
      TensorDataRef mean = RandomTensor(DType::kF32, {3}, -1, 1, 73);
      TensorDataRef var = RandomTensor(DType::kF32, {3}, 0.1, 2, 74);
      Nd X = ToNd(*x), S = ToNd(*scale), B = ToNd(*bias), M = ToNd(*mean), V = ToNd(*var);
      Nd expected = Generate(dims, [&](const std::vector<int64_t>& i) {
        int64_t c = i[1];
        return (X.at(i) - M.at({c})) / std::sqrt(V.at({c}) + 0.01) * S.at({c}) + B.at({c});
      });
      std::string model = Model(
          opset,
          "(float" + Shape(dims) + " x, float[3] s, float[3] b, float[3] m, float[3] v) => (y)",
          "y = BatchNormalization <epsilon = 0.01> (x, s, b, m, v)");
      Expect(*Run(model, {x, scale, bias, mean, var})[0], expected, DType::kF32, 1e-5, 1e-5);
    }
  }
  // f16 and a symbolic batch.
  std::string model = Model(15,
                            "(float16[N, 2, 3] x, float16[2] s, float16[2] b, float16[2] m, "
                            "float16[2] v) => (y)",
                            "y = BatchNormalization(x, s, b, m, v)");
  for (int64_t n : {1, 4}) {
    TensorDataRef x = RandomTensor(DType::kF16, {n, 2, 3}, -2, 2, 75);
    TensorDataRef p = RandomTensor(DType::kF16, {2}, 0.5, 1.5, 76);
    Nd X = ToNd(*x), P = ToNd(*p);
    double terms = 0;  // max over elements of |x - m| * |a| + |b|, a = s / sqrt(v + eps)
    Nd expected = Generate({n, 2, 3}, [&](const std::vector<int64_t>& i) {
      double c = P.at({i[1]});
      terms = std::max(terms, std::fabs(X.at(i) - c) * c / std::sqrt(c + 1e-5) + c);
      return (X.at(i) - c) / std::sqrt(c + 1e-5) * c + c;
    });
    // f32: a = s / sqrt(v + eps) takes the add, sqrt and division (and eps's own rounding to
    // f32), each at most 2^-24 relative to a; then (x - m) and fma(x - m, a, b): 6 roundings,
    // each bounded by 2^-24 * (|x - m| |a| + |b|).
    HalfTol h = HalfTolerance(DType::kF16, F32Error(6, terms));
    Expect(*Run(model, {x, p, p, p, p})[0], expected, DType::kF16, h.rtol, h.atol);
  }
}

BOOST_AUTO_TEST_CASE(BatchNormTraining) {
  std::vector<int64_t> dims = {3, 2, 4, 5};
  TensorDataRef x = RandomTensor(DType::kF32, dims, -2, 2, 77);
  TensorDataRef p = RandomTensor(DType::kF32, {2}, 0.5, 1.5, 78);
  Nd X = ToNd(*x), P = ToNd(*p);
  std::vector<double> mean(2, 0), var(2, 0);
  for (int64_t i = 0; i < Count(dims); ++i) mean[Unravel(i, dims)[1]] += X.v[i] / 60;
  for (int64_t i = 0; i < Count(dims); ++i) {
    int64_t c = Unravel(i, dims)[1];
    var[c] += (X.v[i] - mean[c]) * (X.v[i] - mean[c]) / 60;
  }
  Nd expected = Generate(dims, [&](const std::vector<int64_t>& i) {
    int64_t c = i[1];
    return (X.at(i) - mean[c]) / std::sqrt(var[c] + 1e-5) * P.at({c}) + P.at({c});
  });
  std::vector<TensorDataRef> out = Run(
      Model(15, "(float[3,2,4,5] x, float[2] p) => (y, rm, rv)",
            "y, rm, rv = BatchNormalization <training_mode = 1, momentum = 0.8> (x, p, p, p, p)"),
      {x, p});
  Expect(*out[0], expected, DType::kF32, 1e-4, 1e-4);
  Expect(*out[1],
         Generate({2},
                  [&](const std::vector<int64_t>& c) { return P.at(c) * 0.8 + mean[c[0]] * 0.2; }),
         DType::kF32);
  Expect(
      *out[2],
      Generate({2}, [&](const std::vector<int64_t>& c) { return P.at(c) * 0.8 + var[c[0]] * 0.2; }),
      DType::kF32);
}

// Mean and 1/sqrt(var + eps) of x over the dims in [from, rank) at the leading index.
void SliceStats(const Nd& x, size_t from, const std::vector<int64_t>& lead, double eps,
                double& mean, double& inv) {
  std::vector<int64_t> tail(x.dims.begin() + from, x.dims.end());
  int64_t n = Count(tail);
  auto at = [&](int64_t t) {
    std::vector<int64_t> idx = lead;
    std::vector<int64_t> ti = Unravel(t, tail);
    idx.insert(idx.end(), ti.begin(), ti.end());
    return x.at(idx);
  };
  mean = 0;
  for (int64_t t = 0; t < n; ++t) mean += at(t) / n;
  double var = 0;
  for (int64_t t = 0; t < n; ++t) var += (at(t) - mean) * (at(t) - mean) / n;
  inv = 1 / std::sqrt(var + eps);
}

void CheckLayerNorm(std::vector<int64_t> dims, int axis, bool bias, bool stats,
                    DType dtype = DType::kF32, bool scale_broadcast = false) {
  int rank = static_cast<int>(dims.size());
  int a = axis < 0 ? axis + rank : axis;
  std::vector<int64_t> norm(dims.begin() + a, dims.end());
  std::vector<int64_t> pshape = norm;
  if (scale_broadcast) pshape = {norm.back()};  // broadcast over the leading normalized dims
  BOOST_TEST_MESSAGE("LayerNorm " << Shape(dims) << " axis " << axis);
  TensorDataRef x = RandomTensor(dtype, dims, -2, 2, 80);
  TensorDataRef s = RandomTensor(dtype, pshape, 0.5, 1.5, 81);
  TensorDataRef b = RandomTensor(dtype, pshape, -1, 1, 82);
  Nd X = ToNd(*x), S = ToNd(*s), B = ToNd(*b);
  std::vector<int64_t> stat_dims = dims;
  for (int d = a; d < rank; ++d) stat_dims[d] = 1;
  Nd mean_e{stat_dims, std::vector<double>(Count(stat_dims))}, inv_e = mean_e;
  double max_x = 0, terms = 0;
  for (double v : X.v) max_x = std::max(max_x, std::fabs(v));
  Nd expected = Generate(dims, [&](const std::vector<int64_t>& i) {
    std::vector<int64_t> lead(i.begin(), i.begin() + a);
    double mean, inv;
    SliceStats(X, a, lead, 1e-3, mean, inv);
    std::vector<int64_t> pj(i.end() - pshape.size(), i.end());
    terms = std::max(terms, (std::fabs(X.at(i)) + std::fabs(mean)) * inv * std::fabs(S.at(pj)) *
                                    (1 + inv * max_x) +
                                (bias ? std::fabs(B.at(pj)) : 0));
    std::vector<int64_t> si = i;
    for (int d = a; d < rank; ++d) si[d] = 0;
    mean_e[si] = mean;
    inv_e[si] = inv;
    std::vector<int64_t> pi(i.end() - pshape.size(), i.end());
    return (X.at(i) - mean) * inv * S.at(pi) + (bias ? B.at(pi) : 0);
  });
  std::string t = TypeName(dtype);
  std::string outs = stats ? "(y, m, r)" : "(y)";
  std::string model = Model(17,
                            "(" + t + Shape(dims) + " x, " + t + Shape(pshape) + " s" +
                                (bias ? ", " + t + Shape(pshape) + " b" : "") + ") => " + outs,
                            std::string(stats ? "y, m, r" : "y") +
                                " = LayerNormalization <axis = " + std::to_string(axis) +
                                ", epsilon = 0.001> " + (bias ? "(x, s, b)" : "(x, s)"));
  std::vector<TensorDataRef> in = {x, s};
  if (bias) in.push_back(b);
  std::vector<TensorDataRef> out = Run(model, in);
  if (IsHalf(dtype)) {
    // f32 over a slice of n: the mean (n adds, a division), the centred values (a subtraction),
    // the variance (n fmas, a division), eps, sqrt, 1/x, then (x - mean) * inv and the fma with
    // scale and bias: at most 2n + 10 roundings. Each perturbs y by at most 2^-24 of
    // (|x| + |mean|) * inv * |s| + |b|, except that the centred values' errors reach the variance
    // scaled by inv * max|x| (Cauchy-Schwarz on sum |x - mean| <= n sqrt(var)), hence that factor.
    int64_t n = Count(norm);
    HalfTol h = HalfTolerance(dtype, F32Error(2 * n + 10, terms));
    Expect(*out[0], expected, dtype, h.rtol, h.atol);
  } else {
    Expect(*out[0], expected, dtype, 1e-4, 1e-4);
  }
  if (stats) {
    Expect(*out[1], mean_e, DType::kF32, 1e-5, 1e-5);
    Expect(*out[2], inv_e, DType::kF32, 1e-4, 1e-4);
  }
}

// The outermost parallel loop of `s`, or null.
const jit::StmtNode* FirstParallelLoop(const jit::StmtNode* s) {
  if (!s) return nullptr;
  if (s->op == jit::StmtOp::kFor && s->for_kind == jit::ForKind::kParallel) return s;
  for (const auto& child : s->body)
    if (const jit::StmtNode* p = FirstParallelLoop(child.get())) return p;
  return nullptr;
}

// LayerNorm over [1, L, C] (perceiver_like's norm_kv, every sequence-major transformer at batch
// 1): the L rows are iterations of the parallel loop. With the innermost kept dim left a serial
// loop inside it, the parallel loop ran over the batch dim alone, one iteration.
BOOST_AUTO_TEST_CASE(layer_norm_rows_are_parallel_iterations) {
  StatusOr<Graph> g = testing::InferText(Model(
      17, "(float[1, L, 24] x, float[24] s, float[24] b) => (y)", "y = LayerNormalization(x, s, b)"));
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
  StatusOr<LoweredNode> lowered = LowerNode(*g, 0, false, Table());
  BOOST_REQUIRE_MESSAGE(lowered.ok(), lowered.status().ToString());
  BOOST_REQUIRE(lowered->kernel.has_value());
  const jit::StmtNode* loop = FirstParallelLoop(lowered->kernel->body.get());
  BOOST_REQUIRE(loop != nullptr);
  BOOST_TEST(static_cast<int>(loop->exprs[1]->op) != static_cast<int>(jit::ExprOp::kIntImm),
             "the parallel loop has a constant extent (the batch dim alone)");
}

BOOST_AUTO_TEST_CASE(LayerNorm) {
  CheckLayerNorm({4, 70}, -1, true, false);
  CheckLayerNorm({2, 3, 33}, -1, false, true);
  CheckLayerNorm({2, 3, 4, 5}, 1, true, true);
  CheckLayerNorm({2, 3, 4, 5}, 2, true, false, DType::kF32, true);
  CheckLayerNorm({3, 17}, 1, true, false, DType::kF16);
  CheckLayerNorm({5, 9}, 0, true, true);
  std::string model = Model(17, "(float[N, S, 24] x, float[24] s, float[24] b) => (y)",
                            "y = LayerNormalization(x, s, b)");
  for (int64_t n : {1, 3}) {
    TensorDataRef x = RandomTensor(DType::kF32, {n, 5, 24}, -2, 2, 83);
    TensorDataRef s = RandomTensor(DType::kF32, {24}, 0.5, 1.5, 84);
    Nd X = ToNd(*x), S = ToNd(*s);
    Nd expected = Generate({n, 5, 24}, [&](const std::vector<int64_t>& i) {
      double mean, inv;
      SliceStats(X, 2, {i[0], i[1]}, 1e-5, mean, inv);
      return (X.at(i) - mean) * inv * S.at({i[2]}) + S.at({i[2]});
    });
    Expect(*Run(model, {x, s, s})[0], expected, DType::kF32, 1e-4, 1e-4);
  }
}

BOOST_AUTO_TEST_CASE(InstanceAndMeanVarianceNorm) {
  for (std::vector<int64_t> dims :
       {std::vector<int64_t>{2, 3, 5, 7}, {1, 2, 70}, {2, 2, 2, 3, 4}}) {
    TensorDataRef x = RandomTensor(DType::kF32, dims, -2, 2, 90);
    TensorDataRef s = RandomTensor(DType::kF32, {dims[1]}, 0.5, 1.5, 91);
    TensorDataRef b = RandomTensor(DType::kF32, {dims[1]}, -1, 1, 92);
    Nd X = ToNd(*x), S = ToNd(*s), B = ToNd(*b);
    Nd expected = Generate(dims, [&](const std::vector<int64_t>& i) {
      double mean, inv;
      SliceStats(X, 2, {i[0], i[1]}, 0.01, mean, inv);
      return (X.at(i) - mean) * inv * S.at({i[1]}) + B.at({i[1]});
    });
    std::string c = std::to_string(dims[1]);
    std::string model =
        Model(13, "(float" + Shape(dims) + " x, float[" + c + "] s, float[" + c + "] b) => (y)",
              "y = InstanceNormalization <epsilon = 0.01> (x, s, b)");
    Expect(*Run(model, {x, s, b})[0], expected, DType::kF32, 1e-4, 1e-4);
  }
  // MVN over the default axes [0, 2, 3] and over [1].
  std::vector<int64_t> dims = {2, 3, 4, 5};
  TensorDataRef x = RandomTensor(DType::kF32, dims, -2, 2, 93);
  Nd X = ToNd(*x);
  auto mvn = [&](const std::vector<int>& axes) {
    return Generate(dims, [&](const std::vector<int64_t>& i) {
      double sum = 0, sq = 0, n = 0;
      for (int64_t f = 0; f < Count(dims); ++f) {
        std::vector<int64_t> j = Unravel(f, dims);
        bool same = true;
        for (int d = 0; d < 4; ++d) {
          if (std::find(axes.begin(), axes.end(), d) == axes.end()) same = same && j[d] == i[d];
        }
        if (!same) continue;
        sum += X.at(j);
        sq += X.at(j) * X.at(j);
        ++n;
      }
      double mean = sum / n, var = sq / n - mean * mean;
      return (X.at(i) - mean) / (std::sqrt(var) + 1e-9);
    });
  };
  std::vector<TensorDataRef> out = Run(
      Model(13, "(float[2,3,4,5] x) => (a, b)",
            "a = MeanVarianceNormalization(x)\n b = MeanVarianceNormalization <axes = [1]> (x)"),
      {x});
  Expect(*out[0], mvn({0, 2, 3}), DType::kF32, 1e-4, 1e-4);
  Expect(*out[1], mvn({1}), DType::kF32, 1e-4, 1e-4);
}

BOOST_AUTO_TEST_CASE(LpNormAndLrn) {
  std::vector<int64_t> dims = {2, 5, 3, 4};
  TensorDataRef x = RandomTensor(DType::kF32, dims, -2, 2, 95);
  Nd X = ToNd(*x);
  auto lp = [&](int axis, int p) {
    return Generate(dims, [&](const std::vector<int64_t>& i) {
      double norm = 0;
      for (int64_t r = 0; r < dims[axis]; ++r) {
        std::vector<int64_t> j = i;
        j[axis] = r;
        norm += p == 1 ? std::fabs(X.at(j)) : X.at(j) * X.at(j);
      }
      if (p == 2) norm = std::sqrt(norm);
      return X.at(i) / norm;
    });
  };
  auto lrn = [&](int size, double alpha, double beta, double bias) {
    return Generate(dims, [&](const std::vector<int64_t>& i) {
      double sq = 0;
      for (int64_t c = i[1] - (size - 1) / 2; c <= i[1] + size / 2; ++c) {
        if (c < 0 || c >= dims[1]) continue;
        std::vector<int64_t> j = i;
        j[1] = c;
        sq += X.at(j) * X.at(j);
      }
      return X.at(i) / std::pow(bias + alpha / size * sq, beta);
    });
  };
  std::vector<TensorDataRef> out = Run(
      Model(
          13, "(float[2,5,3,4] x) => (a, b, c, d)",
          "a = LpNormalization(x)\n b = LpNormalization <axis = 1, p = 1> (x)\n"
          " c = LRN <size = 3> (x)\n d = LRN <size = 4, alpha = 0.01, beta = 0.5, bias = 2.0> (x)"),
      {x});
  Expect(*out[0], lp(3, 2), DType::kF32);
  Expect(*out[1], lp(1, 1), DType::kF32);
  Expect(*out[2], lrn(3, 1e-4, 0.75, 1), DType::kF32);
  Expect(*out[3], lrn(4, 0.01, 0.5, 2), DType::kF32);
}

BOOST_AUTO_TEST_CASE(UnsupportedFormsAreErrors) {
  TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 4}, -1, 1, 1);
  TensorDataRef c = RandomTensor(DType::kF32, {3}, 0.5, 1, 2);
  StatusOr<std::vector<TensorDataRef>> r =
      testing::RunModel(Model(9, "(float[2,3,4] x, float[3] c) => (y, m)",
                              "y, m = BatchNormalization(x, c, c, c, c)"),
                        {x, c}, Table());
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(r.status().message().find("BatchNormalization") != std::string::npos);
  r = testing::RunModel(Model(13, "(float[1,1,4,4] x) => (y) <float[4] s = {1.0, 1.0, 2.0, 2.0}>",
                              "y = Resize <antialias = 1> (x, , s)"),
                        {RandomTensor(DType::kF32, {1, 1, 4, 4}, -1, 1, 3)}, Table());
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().message().find("antialias") != std::string::npos);
  r = testing::RunModel(Model(13, "(float[1,4,4,4] x) => (y)", "y = LRN <size = 0> (x)"),
                        {RandomTensor(DType::kF32, {1, 4, 4, 4}, -1, 1, 4)}, Table());
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().message().find("size must be positive") != std::string::npos);
}

// ---- Layout and resampling -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(DepthSpace) {
  std::vector<int64_t> dims = {2, 12, 3, 5};
  TensorDataRef x = RandomTensor(DType::kF32, dims, -2, 2, 100);
  Nd X = ToNd(*x);
  int64_t b = 2, c = 3;
  Nd dcr = Generate({2, c, 6, 10}, [&](const std::vector<int64_t>& o) {
    int64_t i = o[2] % b, j = o[3] % b;
    return X.at({o[0], (i * b + j) * c + o[1], o[2] / b, o[3] / b});
  });
  Nd crd = Generate({2, c, 6, 10}, [&](const std::vector<int64_t>& o) {
    int64_t i = o[2] % b, j = o[3] % b;
    return X.at({o[0], o[1] * b * b + i * b + j, o[2] / b, o[3] / b});
  });
  std::vector<int64_t> sdims = {2, 3, 4, 6};
  TensorDataRef z = RandomTensor(DType::kI64, sdims, -100, 100, 101);
  Nd Z = ToNd(*z);
  Nd s2d = Generate({2, 12, 2, 3}, [&](const std::vector<int64_t>& o) {
    int64_t blk = o[1] / 3, ch = o[1] % 3;
    return Z.at({o[0], ch, o[2] * 2 + blk / 2, o[3] * 2 + blk % 2});
  });
  std::vector<TensorDataRef> out =
      Run(Model(13, "(float[2,12,3,5] x, int64[2,3,4,6] z) => (a, b, s)",
                "a = DepthToSpace <blocksize = 2> (x)\n"
                " b = DepthToSpace <blocksize = 2, mode = \"CRD\"> (x)\n"
                " s = SpaceToDepth <blocksize = 2> (z)"),
          {x, z});
  Expect(*out[0], dcr, DType::kF32, 0, 0);
  Expect(*out[1], crd, DType::kF32, 0, 0);
  Expect(*out[2], s2d, DType::kI64, 0, 0);
  // Round trip with a symbolic batch.
  std::string model =
      Model(13, "(float[N, 2, 4, 6] x) => (y)",
            "d = SpaceToDepth <blocksize = 2> (x)\n y = DepthToSpace <blocksize = 2> (d)");
  for (int64_t n : {1, 3}) {
    TensorDataRef v = RandomTensor(DType::kF32, {n, 2, 4, 6}, -2, 2, 102);
    Expect(*Run(model, {v})[0], ToNd(*v), DType::kF32, 0, 0);
  }
}

// Resize reference (ONNX semantics, one dim at a time as separable 1-D interpolation).
struct ResizeRef {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false;
  std::vector<double> roi;

  // Taps (index, weight) for output position o of dim d; `outside` for tf_crop_and_resize.
  // `out` is the unrounded output length (scale * in), as the ONNX reference uses it.
  std::vector<std::pair<int64_t, double>> Taps(int64_t o, int64_t in, double out, double scale,
                                               size_t d, size_t rank, bool& outside) const {
    double x;
    if (coord == "asymmetric") {
      x = o / scale;
    } else if (coord == "align_corners") {
      x = out == 1 ? 0 : o * (in - 1.0) / (out - 1.0);
    } else if (coord == "pytorch_half_pixel") {
      x = out > 1 ? (o + 0.5) / scale - 0.5 : 0;
    } else if (coord == "tf_half_pixel_for_nn") {
      x = (o + 0.5) / scale;
    } else if (coord == "tf_crop_and_resize") {
      double s = roi[d], e = roi[d + rank];
      x = out > 1 ? s * (in - 1) + o * (e - s) * (in - 1) / (out - 1.0) : 0.5 * (s + e) * (in - 1);
      if (x < 0 || x > in - 1) outside = true;
    } else {
      x = (o + 0.5) / scale - 0.5;
    }
    auto clampi = [&](int64_t i) { return std::min<int64_t>(std::max<int64_t>(i, 0), in - 1); };
    if (mode == "nearest") {
      double r;
      if (nearest == "floor")
        r = std::floor(x);
      else if (nearest == "ceil")
        r = std::ceil(x);
      else if (nearest == "round_prefer_ceil")
        r = std::floor(x + 0.5);
      else if (nearest == "simple")
        r = scale < 1 ? std::ceil(x) : std::floor(x);
      else
        r = std::ceil(x - 0.5);
      return {{clampi(static_cast<int64_t>(r)), 1.0}};
    }
    if (mode == "linear") {
      x = std::min(std::max(x, 0.0), in - 1.0);
      int64_t x0 = static_cast<int64_t>(std::floor(x));
      double w = x - x0;
      return {{clampi(x0), 1 - w}, {clampi(x0 + 1), w}};
    }
    int64_t x0 = static_cast<int64_t>(std::floor(x));
    double t = x - x0, a = cubic_a, total = 0;
    std::vector<std::pair<int64_t, double>> taps;
    for (int k = -1; k <= 2; ++k) {
      double dd = std::fabs(t - k), w;
      if (dd <= 1)
        w = ((a + 2) * dd - (a + 3)) * dd * dd + 1;
      else if (dd < 2)
        w = ((a * dd - 5 * a) * dd + 8 * a) * dd - 4 * a;
      else
        w = 0;
      if (exclude_outside && (x0 + k < 0 || x0 + k >= in)) w = 0;
      total += w;
      taps.push_back({clampi(x0 + k), w});
    }
    if (exclude_outside)
      for (auto& tap : taps) tap.second /= total;
    return taps;
  }

  Nd Run(const Nd& x, const std::vector<int64_t>& out, const std::vector<double>& scales) const {
    size_t rank = x.dims.size();
    return Generate(out, [&](const std::vector<int64_t>& o) {
      std::vector<std::vector<std::pair<int64_t, double>>> taps(rank);
      bool outside = false;
      for (size_t d = 0; d < rank; ++d) {
        taps[d] = Taps(o[d], x.dims[d], scales[d] * x.dims[d], scales[d], d, rank, outside);
      }
      if (outside) return extrapolation;
      double sum = 0;
      std::vector<int64_t> idx(rank);
      std::function<void(size_t, double)> rec = [&](size_t d, double w) {
        if (d == rank) {
          sum += w * x.at(idx);
          return;
        }
        for (auto& [i, tw] : taps[d]) {
          idx[d] = i;
          rec(d + 1, w * tw);
        }
      };
      rec(0, 1);
      return sum;
    });
  }
};

// Resize from constant scales (or sizes when `sizes` is non-empty).
void CheckResize(const ResizeRef& ref, std::vector<int64_t> dims, std::vector<double> scales,
                 std::vector<int64_t> sizes = {}, const std::string& extra = "") {
  size_t rank = dims.size();
  std::vector<int64_t> out(rank);
  std::vector<double> eff = scales;
  for (size_t d = 0; d < rank; ++d) {
    if (!sizes.empty()) {
      out[d] = sizes[d];
      eff.push_back(0);
      eff[d] = static_cast<double>(sizes[d]) / dims[d];
    } else {
      out[d] = static_cast<int64_t>(
          std::floor(dims[d] * static_cast<double>(static_cast<float>(scales[d]))));
      eff[d] = static_cast<float>(scales[d]);
    }
  }
  eff.resize(rank);
  BOOST_TEST_MESSAGE("Resize " << ref.mode << " " << ref.coord << " " << ref.nearest << " "
                               << Shape(dims) << " -> " << Shape(out));
  TensorDataRef x = RandomTensor(DType::kF32, dims, -2, 2, 110);
  Nd expected = ref.Run(ToNd(*x), out, eff);
  std::string attrs = "mode = \"" + ref.mode + "\", coordinate_transformation_mode = \"" +
                      ref.coord + "\", nearest_mode = \"" + ref.nearest + "\"" + extra;
  // Constant inputs as initializers: scales/sizes/roi are then known at compile time.
  std::string inits;
  if (!ref.roi.empty()) {
    inits += "float[" + std::to_string(ref.roi.size()) + "] roi = {" + Floats(ref.roi) + "}";
  }
  std::string body;
  if (sizes.empty()) {
    inits += (inits.empty() ? "" : ", ") + std::string("float[") + std::to_string(rank) +
             "] s = {" + Floats(scales) + "}";
    body = "y = Resize <" + attrs + "> (x, " + (ref.roi.empty() ? "" : "roi") + ", s)";
  } else {
    inits += (inits.empty() ? "" : ", ") + std::string("int64[") + std::to_string(rank) +
             "] z = {" + Ints(sizes) + "}";
    body = "y = Resize <" + attrs + "> (x, " + (ref.roi.empty() ? "" : "roi") + ", , z)";
  }
  std::string model = Model(13, "(float" + Shape(dims) + " x) => (y) <" + inits + ">", body);
  Expect(*Run(model, {x})[0], expected, DType::kF32, 1e-4, 1e-4);
}

BOOST_AUTO_TEST_CASE(ResizeNearest) {
  ResizeRef r;
  for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
    r.nearest = nearest;
    CheckResize(r, {1, 2, 3, 5}, {1, 1, 2, 1.5});
    CheckResize(r, {1, 2, 7, 9}, {1, 1, 0.6, 0.5});
  }
  r.nearest = "round_prefer_floor";
  for (const char* coord :
       {"asymmetric", "align_corners", "pytorch_half_pixel", "tf_half_pixel_for_nn"}) {
    r.coord = coord;
    CheckResize(r, {1, 2, 3, 5}, {1, 1, 2.5, 1.7});
    CheckResize(r, {1, 2, 3, 5}, {}, {1, 2, 7, 4});
  }
}

BOOST_AUTO_TEST_CASE(ResizeLinearCubic) {
  for (const char* mode : {"linear", "cubic"}) {
    ResizeRef r;
    r.mode = mode;
    for (const char* coord : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"}) {
      r.coord = coord;
      CheckResize(r, {1, 2, 4, 5}, {1, 1, 2, 1.5});
      CheckResize(r, {2, 1, 8, 9}, {}, {2, 1, 3, 5});
    }
    r.coord = "half_pixel";
    CheckResize(r, {3, 10}, {1, 0.7});     // rank 2
    CheckResize(r, {2, 4, 3}, {1, 2, 2});  // rank 3 on two dims
  }
  ResizeRef cubic;
  cubic.mode = "cubic";
  cubic.exclude_outside = true;
  cubic.cubic_a = -0.5;
  CheckResize(cubic, {1, 1, 4, 4}, {1, 1, 1.5, 2}, {},
              ", cubic_coeff_a = -0.500000, exclude_outside = 1");
  ResizeRef crop;
  crop.mode = "linear";
  crop.coord = "tf_crop_and_resize";
  crop.roi = {0, 0, 0.2, -0.1, 1, 1, 0.9, 1.2};
  crop.extrapolation = 7;
  CheckResize(crop, {1, 1, 6, 7}, {}, {1, 1, 4, 5}, ", extrapolation_value = 7.000000");
  crop.mode = "nearest";
  CheckResize(crop, {1, 1, 6, 7}, {}, {1, 1, 4, 5}, ", extrapolation_value = 7.000000");
}

BOOST_AUTO_TEST_CASE(ResizeRuntimeScalesAndOldOpsets) {
  // Scales only known at run time: the output shape comes from the shape function.
  std::string model = Model(13, "(float[N, 2, 3, 4] x, float[4] s) => (y)",
                            "y = Resize <mode = \"linear\"> (x, , s)");
  for (int64_t n : {1, 2}) {
    TensorDataRef x = RandomTensor(DType::kF32, {n, 2, 3, 4}, -2, 2, 120);
    TensorDataRef s = MakeTensor(DType::kF32, {4}, {1, 1, 2, 0.5});
    ResizeRef r;
    r.mode = "linear";
    Expect(*Run(model, {x, s})[0], r.Run(ToNd(*x), {n, 2, 6, 2}, {1, 1, 2, 0.5}), DType::kF32, 1e-4,
           1e-4);
  }
  // Sizes only known at run time.
  std::string by_sizes = Model(13, "(float[2, 3, 4] x, int64[3] z) => (y)",
                               "y = Resize <mode = \"nearest\"> (x, , , z)");
  for (std::vector<double> sizes : {std::vector<double>{2, 5, 3}, {1, 2, 9}}) {
    TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 4}, -2, 2, 123);
    std::vector<int64_t> out(sizes.begin(), sizes.end());
    std::vector<double> scales = {sizes[0] / 2, sizes[1] / 3, sizes[2] / 4};
    Expect(*Run(by_sizes, {x, MakeTensor(DType::kI64, {3}, sizes)})[0],
           ResizeRef().Run(ToNd(*x), out, scales), DType::kF32, 0, 0);
  }
  // Resize-10 (asymmetric coordinates; nearest rounds down when upsampling).
  TensorDataRef x = RandomTensor(DType::kF32, {1, 1, 3, 4}, -2, 2, 121);
  ResizeRef old;
  old.coord = "asymmetric";
  old.nearest = "simple";
  std::vector<TensorDataRef> out =
      Run(Model(10, "(float[1,1,3,4] x) => (y) <float[4] s = {1.0, 1.0, 2.0, 3.0}>",
                "y = Resize(x, s)"),
          {x});
  Expect(*out[0], old.Run(ToNd(*x), {1, 1, 6, 12}, {1, 1, 2, 3}), DType::kF32);
  // Upsample-7 (scales attribute) and -9 (scales input), nearest and linear.
  out = Run(Model(7, "(float[1,1,3,4] x) => (y, z)",
                  "y = Upsample <scales = [1.0, 1.0, 2.0, 3.0]> (x)\n"
                  " z = Upsample <mode = \"linear\", scales = [1.0, 1.0, 2.0, 1.5]> (x)"),
            {x});
  Expect(*out[0], old.Run(ToNd(*x), {1, 1, 6, 12}, {1, 1, 2, 3}), DType::kF32);
  ResizeRef lin = old;
  lin.mode = "linear";
  Expect(*out[1], lin.Run(ToNd(*x), {1, 1, 6, 6}, {1, 1, 2, 1.5}), DType::kF32, 1e-5, 1e-5);
  TensorDataRef s = MakeTensor(DType::kF32, {4}, {1, 1, 3, 2});
  out = Run(Model(9, "(float[1,1,3,4] x, float[4] s) => (y)", "y = Upsample(x, s)"), {x, s});
  Expect(*out[0], old.Run(ToNd(*x), {1, 1, 9, 8}, {1, 1, 3, 2}), DType::kF32);
  // Integer data, nearest.
  TensorDataRef xi = RandomTensor(DType::kI64, {1, 1, 2, 3}, -50, 50, 122);
  ResizeRef nn;
  out = Run(Model(13, "(int64[1,1,2,3] x) => (y) <float[4] s = {1.0, 1.0, 2.0, 2.0}>",
                  "y = Resize(x, , s)"),
            {xi});
  Expect(*out[0], nn.Run(ToNd(*xi), {1, 1, 4, 6}, {1, 1, 2, 2}), DType::kI64, 0, 0);
}

// Symbolic spatial dims: SAME pads, pooling windows and resize lengths computed at run time.
BOOST_AUTO_TEST_CASE(SymbolicSpatialDims) {
  std::string model;
  model = Model(13,
                "(float[1, 3, H, W] x, float[8, 3, 3, 3] w, float[3, 1, 3, 3] dw) => (y, d, p, a, "
                "r) <float[4] s = {1.0, 1.0, 2.0, 0.5}>",
                "y = Conv <auto_pad = \"SAME_UPPER\", strides = [2, 2]> (x, w)\n"
                " d = Conv <auto_pad = \"SAME_LOWER\", group = 3> (x, dw)\n"
                " p = MaxPool <auto_pad = \"SAME_LOWER\", kernel_shape = [3, 2], strides = [2, "
                "2]> (x)\n"
                " a = AveragePool <kernel_shape = [2, 3], pads = [1, 1, 0, 1], count_include_pad "
                "= 1> (x)\n"
                " r = Resize <mode = \"linear\"> (x, , s)");
  for (auto [h, w] : {std::pair<int64_t, int64_t>{7, 9}, {10, 6}}) {
    BOOST_TEST_MESSAGE("H=" << h << " W=" << w);
    TensorDataRef x = RandomTensor(DType::kF32, {1, 3, h, w}, -1, 1, 130);
    TensorDataRef wt = RandomTensor(DType::kF32, {8, 3, 3, 3}, -1, 1, 131);
    TensorDataRef dw = RandomTensor(DType::kF32, {3, 1, 3, 3}, -1, 1, 132);
    std::vector<TensorDataRef> out = Run(model, {x, wt, dw});
    // Reference conv through the same helper as Conv2D (bias-free).
    auto conv_ref = [&](const ConvCase& c, const TensorDataRef& weights) {
      std::vector<int64_t> od, pb;
      ConvGeometry(c, od, pb);
      Nd X = ToNd(*x), W = ToNd(*weights);
      int64_t mg = c.w[0] / c.group;
      return Generate(od, [&](const std::vector<int64_t>& o) {
        double sum = 0;
        int64_t g = o[1] / mg;
        for (int64_t ci = 0; ci < c.w[1]; ++ci)
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              int64_t stride = c.strides.empty() ? 1 : c.strides[0];
              int64_t p = o[2] * stride - pb[0] + kh, q = o[3] * stride - pb[1] + kw;
              if (p >= 0 && p < h && q >= 0 && q < w)
                sum += X.at({0, g * c.w[1] + ci, p, q}) * W.at({o[1], ci, kh, kw});
            }
        return sum;
      });
    };
    ConvCase same{{1, 3, h, w}, {8, 3, 3, 3}, 1, {2, 2}, {}, {}, "SAME_UPPER", false};
    Expect(*out[0], conv_ref(same, wt), DType::kF32, 1e-4, 1e-4);
    ConvCase depth{{1, 3, h, w}, {3, 1, 3, 3}, 3, {}, {}, {}, "SAME_LOWER", false};
    Expect(*out[1], conv_ref(depth, dw), DType::kF32, 1e-4, 1e-4);
    PoolCase mp{"MaxPool", {1, 3, h, w}, {3, 2}, {2, 2}, {}, {}, "SAME_LOWER"};
    CheckPool(mp, x, out[2].get());
    PoolCase ap{"AveragePool", {1, 3, h, w}, {2, 3}, {1, 1}, {}, {1, 1, 0, 1}};
    ap.count_include_pad = 1;
    CheckPool(ap, x, out[3].get());
    ResizeRef lin;
    lin.mode = "linear";
    Expect(*out[4], lin.Run(ToNd(*x), {1, 3, 2 * h, w / 2}, {1, 1, 2, 0.5}), DType::kF32, 1e-4,
           1e-4);
  }
}

// The backend sweep's own JIT engine (the Evaluator shares ownership of it).
std::shared_ptr<jit::Engine> SweepEngine() {
  static std::shared_ptr<jit::Engine> engine(std::move(*jit::Engine::Create()));
  return engine;
}

// The ONNX backend node tests of the nn ops (Debian libonnx-testdata), run through these
// lowerings: a sweep for development, disabled by default (run with --run_test=BackendNodeTests;
// it prints one line per failing test and a summary, and asserts nothing).
BOOST_AUTO_TEST_CASE(BackendNodeTests, *boost::unit_test::disabled()) {
  const std::string root = "/usr/share/libonnx-testdata/data/node/";
  const char* prefixes[] = {
      "test_conv",         "test_maxpool",      "test_averagepool", "test_resize",
      "test_upsample",     "test_gemm",         "test_matmul",      "test_einsum",
      "test_batchnorm",    "test_instancenorm", "test_layer_norm",  "test_lrn",
      "test_depthtospace", "test_spacetodepth", "test_global",      "test_lppool",
      "test_mvn",          "test_lpnorm",       "test_basic_conv",  "test_basic_convinteger"};
  int passed = 0, failed = 0;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(root.c_str()), closedir);
  if (!dir) return;
  std::vector<std::string> names;
  while (dirent* e = readdir(dir.get())) names.push_back(e->d_name);
  std::sort(names.begin(), names.end());
  auto read = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  };
  for (const std::string& name : names) {
    bool match = false;
    for (const char* p : prefixes) match = match || name.rfind(p, 0) == 0;
    if (!match) continue;
    std::string dirpath = root + name + "/";
    StatusOr<Graph> g = ImportOnnxFile(dirpath + "model.onnx");
    std::string why;
    if (g.ok()) {
      Status st = InferShapes(*g);
      if (!st.ok()) why = "infer: " + st.message();
    } else {
      why = "import: " + g.status().message();
    }
    for (int set = 0; why.empty(); ++set) {
      std::string data = dirpath + "test_data_set_" + std::to_string(set) + "/";
      if (read(data + "input_0.pb").empty() && read(data + "output_0.pb").empty()) break;
      std::vector<TensorDataRef> inputs;
      for (size_t i = 0; i < g->inputs().size(); ++i) {
        std::string bytes = read(data + "input_" + std::to_string(i) + ".pb");
        StatusOr<TensorDataRef> t = ImportOnnxTensorBytes(bytes);
        inputs.push_back(t.ok() && !bytes.empty() ? *t : nullptr);
      }
      Evaluator ev(SweepEngine(), &Table());
      StatusOr<std::vector<TensorDataRef>> out = ev.RunGraph(*g, inputs);
      if (!out.ok()) {
        why = "run: " + out.status().message();
        break;
      }
      for (size_t o = 0; o < out->size() && why.empty(); ++o) {
        std::string bytes = read(data + "output_" + std::to_string(o) + ".pb");
        StatusOr<TensorDataRef> e = ImportOnnxTensorBytes(bytes);
        if (!e.ok()) continue;
        std::string diff = Compare(*(*out)[o], **e, 1e-3, 1e-4);
        if (!diff.empty()) why = "output " + std::to_string(o) + ": " + diff;
      }
    }
    if (why.empty()) {
      ++passed;
    } else {
      ++failed;
      std::printf("FAIL %s: %s\n", name.c_str(), why.substr(0, 300).c_str());
    }
  }
  std::printf("backend node tests: %d passed, %d failed\n", passed, failed);
}

}  // namespace
}  // namespace kiln::compiler
