// The JIT's tiled GEMM (compiler/lower/nn_gemm.cc) at the edges of its tiles: M, N and K that
// are not multiples of the register tile, the column panel or the K chunk, full and partial
// column panels in one product, with a bias and a GELU epilogue, at 1 and 2 threads, against a
// double reference within the f32 error bound of a K-term dot product.
#define BOOST_TEST_MODULE gemm_tiles_test
#include <omp.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

constexpr double kUnit = 0x1p-24;  // f32 unit roundoff

// gamma_n = n u / (1 - n u): the relative bound of an n-term f32 sum of products (Higham 3.1).
double Gamma(int64_t n) { return n * kUnit / (1 - n * kUnit); }

std::shared_ptr<const Executable> CompileJit(const std::string& text) {
  std::string bytes = testing::ModelBytes(text);
  CompileOptions o;
  o.external = "none";
  auto kiln = CompileOnnxBytes(bytes.data(), bytes.size(), o);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  auto exe = testing::LoadWithJit(*kiln);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  return *exe;
}

std::string Literal(const std::string& decl, const std::vector<double>& v) {
  std::string s = decl + " = {";
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", v[i]);
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + "}";
}

struct Product {
  std::vector<double> y;      // the exact (double) product plus bias
  std::vector<double> bound;  // gamma_{K+1} * (sum |a b| + |bias|) per element
};

// y[b, i, j] = sum_t x[b, i, t] w[wb, t, j] + bias[j] (wb = b when `batched_w`, else 0).
Product Reference(const TensorData& x, const TensorData& w, const std::vector<double>& bias,
                  int64_t batch, int64_t m, int64_t k, int64_t n, bool batched_w) {
  std::vector<double> xd = x.ToDoubles(), wd = w.ToDoubles();
  Product p{std::vector<double>(batch * m * n), std::vector<double>(batch * m * n)};
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = bias.empty() ? 0 : bias[j], mag = bias.empty() ? 0 : std::fabs(bias[j]);
        for (int64_t t = 0; t < k; ++t) {
          double prod = xd[(b * m + i) * k + t] * wd[((batched_w ? b : 0) * k + t) * n + j];
          acc += prod;
          mag += std::fabs(prod);
        }
        p.y[(b * m + i) * n + j] = acc;
        p.bound[(b * m + i) * n + j] = Gamma(k + 1) * mag;
      }
  return p;
}

double Gelu(double y) { return 0.5 * y * (1 + std::erf(y / std::sqrt(2.0))); }

// Every element within its bound: the product's, and with `gelu` the product's error through
// GELU's slope (< 1.13) plus the epilogue's own rounding (erff a few ulp, four f32 operations).
void ExpectWithin(const TensorData& got, const Product& want, bool gelu, const std::string& what) {
  std::vector<double> g = got.ToDoubles();
  BOOST_REQUIRE_EQUAL(g.size(), want.y.size());
  for (size_t i = 0; i < g.size(); ++i) {
    double y = want.y[i];
    double expect = gelu ? Gelu(y) : y;
    double tol = gelu ? 1.13 * want.bound[i] + 8 * kUnit * std::fabs(y) : want.bound[i];
    tol += kUnit * std::fabs(expect);  // the f32 result's own rounding
    BOOST_REQUIRE_MESSAGE(std::fabs(g[i] - expect) <= tol, what << "[" << i << "] = " << g[i]
                                                                << ", want " << expect << " +- "
                                                                << tol);
  }
}

// x [1, M, K] times constant weights [K, N] (kiln::PackedMatMul) plus a bias, optionally GELU,
// for several M, each at 1 and 2 threads.
void CheckPacked(int64_t k, int64_t n, bool gelu, const std::vector<int64_t>& ms) {
  auto w = testing::RandomTensor(DType::kF32, {k, n}, -1, 1, 11);
  auto bias = testing::RandomTensor(DType::kF32, {n}, -1, 1, 12);
  std::string kn = std::to_string(k) + ", " + std::to_string(n), ns = std::to_string(n);
  std::string tail = gelu ? R"(
      s = Mul(a, c)
      e = Erf(s)
      f = Add(e, one)
      g = Mul(a, f)
      y = Mul(g, half)
    })"
                          : R"(
      y = Identity(a)
    })";
  auto exe = CompileJit(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[1, M, )" + std::to_string(k) +
                        R"(] x) => (float[1, M, )" + ns + R"(] y)
      <)" + Literal("float[" + kn + "] w", w->ToDoubles()) +
                        ", " + Literal("float[" + ns + "] b", bias->ToDoubles()) + R"(,
       float c = {0.70710678118654752}, float one = {1}, float half = {0.5}> {
      p = MatMul(x, w)
      a = Add(p, b))" + tail);
  for (int64_t m : ms) {
    auto x = testing::RandomTensor(DType::kF32, {1, m, k}, -1, 1, 13 + m);
    Product want = Reference(*x, *w, bias->ToDoubles(), 1, m, k, n, false);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      auto out = testing::RunExecutable(exe, {x});
      BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
      ExpectWithin(*(*out)[0], want, gelu,
                   "y (M " + std::to_string(m) + ", K " + std::to_string(k) + ", N " + ns + ", " +
                       std::to_string(threads) + " threads)");
    }
  }
}

// N of 5 (narrower than a panel), 33 and 50 (full panels and a partial one); K of 1, 7, 96 and
// 2100 (past the 2048-deep K chunk); M of 1 to 99 (every row count the last tile of a 6-row
// tiling can have, and a 96-row group followed by a partial one).
BOOST_AUTO_TEST_CASE(packed_weights_plus_bias) {
  CheckPacked(7, 33, false, {1, 5, 16, 49, 50, 97, 99});
  CheckPacked(1, 5, false, {1, 7});
  CheckPacked(2100, 17, false, {3, 13});
}

BOOST_AUTO_TEST_CASE(packed_weights_plus_bias_gelu) { CheckPacked(96, 50, true, {1, 49, 97}); }

// Both operands at run time (the GEMM packs B per call): [B, M, K] x [B, K, N], all dims
// symbolic, so one kernel serves every shape; M > N and M < N order the tasks differently.
BOOST_AUTO_TEST_CASE(batched_runtime_operands) {
  auto exe = CompileJit(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[B, M, K] x, float[B, K, N] w) => (float[B, M, N] y) {
      y = MatMul(x, w)
    }
  )");
  struct Shape {
    int64_t batch, m, k, n;
  };
  for (Shape s : {Shape{3, 49, 32, 49}, Shape{2, 50, 49, 32}, Shape{2, 3, 64, 17},
                  Shape{1, 97, 2100, 35}, Shape{1, 100, 8, 130}, Shape{4, 1, 5, 16}}) {
    auto x = testing::RandomTensor(DType::kF32, {s.batch, s.m, s.k}, -1, 1, 21 + s.m);
    auto w = testing::RandomTensor(DType::kF32, {s.batch, s.k, s.n}, -1, 1, 22 + s.n);
    Product want = Reference(*x, *w, {}, s.batch, s.m, s.k, s.n, true);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      auto out = testing::RunExecutable(exe, {x, w});
      BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
      ExpectWithin(*(*out)[0], want, false,
                   "y (" + std::to_string(s.batch) + "x" + std::to_string(s.m) + "x" +
                       std::to_string(s.k) + "x" + std::to_string(s.n) + ", " +
                       std::to_string(threads) + " threads)");
    }
  }
}

// Static N whose last panel runs narrower tiles (compiler/lower/nn_gemm.cc, GemmLoops): 49 and
// 50 (one or two columns past full panels: the narrow tiles' rows go through the partial
// sums), 24 and 56 (exactly one vector past: they store directly), 17 (one panel and a column),
// both operands at run time, with M tails of 1 and 5 rows and a K past the 2048-deep chunk.
BOOST_AUTO_TEST_CASE(static_n_narrow_last_panel) {
  struct Shape {
    int64_t batch, m, k, n;
  };
  for (Shape s : {Shape{3, 49, 32, 49}, Shape{2, 50, 64, 50}, Shape{2, 11, 9, 24},
                  Shape{1, 97, 2100, 56}, Shape{2, 7, 5, 17}}) {
    auto dims = [](std::vector<int64_t> d) {
      std::string t;
      for (int64_t v : d) t += (t.empty() ? "" : ", ") + std::to_string(v);
      return t;
    };
    auto exe = CompileJit(R"(
      <ir_version: 8, opset_import: ["" : 17]>
      g (float[)" + dims({s.batch, s.m, s.k}) + R"(] x, float[)" + dims({s.batch, s.k, s.n}) +
                          R"(] w) => (float[)" + dims({s.batch, s.m, s.n}) + R"(] y) {
        y = MatMul(x, w)
      }
    )");
    auto x = testing::RandomTensor(DType::kF32, {s.batch, s.m, s.k}, -1, 1, 31 + s.m);
    auto w = testing::RandomTensor(DType::kF32, {s.batch, s.k, s.n}, -1, 1, 32 + s.n);
    Product want = Reference(*x, *w, {}, s.batch, s.m, s.k, s.n, true);
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      auto out = testing::RunExecutable(exe, {x, w});
      BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
      ExpectWithin(*(*out)[0], want, false,
                   "y (static " + dims({s.batch, s.m, s.k, s.n}) + ", " +
                       std::to_string(threads) + " threads)");
    }
  }
}

}  // namespace
}  // namespace kiln::compiler
