// Matrix products with fused epilogues that read broadcast operands: the GEMM's stores must name
// real coordinates, or the epilogue reads its other operands at the wrong place (gpt_tiny and
// swin_t returned NaN: a [1, S, S] mask with -inf added to a [B*H, S, S] attention product was
// read past its end for every head but the first).
#define BOOST_TEST_MODULE gemm_epilogue_test
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

std::shared_ptr<const Executable> CompileJit(const std::string& text) {
  std::string bytes = testing::ModelBytes(text);
  CompileOptions o;
  o.external = "none";
  CompileStats stats;
  auto kiln = CompileOnnxBytes(bytes.data(), bytes.size(), o, &stats);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  // The point of the test: the Add is fused into the product's kernel.
  BOOST_REQUIRE_GE(stats.fused_kernels, 1);
  auto exe = testing::LoadWithJit(*kiln);
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  return *exe;
}

std::string Literal(const char* decl, const std::vector<double>& v) {
  std::string s = std::string(decl) + " = {";
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.9g", v[i]);
    s += (i ? ", " : "") + std::string(buf);
  }
  return s + "}";
}

// `got` equals `want` element by element: the same infinities, no NaN, finite values within
// f32 rounding of a K-term dot product of magnitudes <= 1 (K * 2^-24 * K, bounded by 1e-4 here).
void ExpectClose(const TensorData& got, const std::vector<double>& want, const std::string& what) {
  std::vector<double> g = got.ToDoubles();
  BOOST_REQUIRE_EQUAL(g.size(), want.size());
  for (size_t i = 0; i < g.size(); ++i) {
    if (std::isinf(want[i])) {
      BOOST_REQUIRE_MESSAGE(g[i] == want[i], what << "[" << i << "] = " << g[i] << ", want " << want[i]);
    } else {
      BOOST_REQUIRE_MESSAGE(std::isfinite(g[i]) && std::fabs(g[i] - want[i]) <= 1e-4,
                            what << "[" << i << "] = " << g[i] << ", want " << want[i]);
    }
  }
}

// Attention scores: [BH, S, K] x [BH, K, S] + causal mask [1, S, S] (0 on and below the diagonal,
// -inf above), as exporters write it.
BOOST_AUTO_TEST_CASE(batched_product_plus_broadcast_causal_mask) {
  const int64_t bh = 4, s = 9, k = 5;
  auto exe = CompileJit(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[BH, S, 5] q, float[BH, 5, S] kt, float[1, S, S] mask) => (float[BH, S, S] y) {
      p = MatMul(q, kt)
      y = Add(p, mask)
    }
  )");
  auto q = testing::RandomTensor(DType::kF32, {bh, s, k}, -1, 1, 1);
  auto kt = testing::RandomTensor(DType::kF32, {bh, k, s}, -1, 1, 2);
  std::vector<double> mask(s * s);
  for (int64_t i = 0; i < s; ++i)
    for (int64_t j = 0; j < s; ++j)
      mask[i * s + j] = j > i ? -std::numeric_limits<double>::infinity() : 0.0;
  auto out = testing::RunExecutable(exe, {q, kt, testing::F32({1, s, s}, mask)});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  std::vector<double> qd = q->ToDoubles(), kd = kt->ToDoubles(), want(bh * s * s);
  for (int64_t b = 0; b < bh; ++b)
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < s; ++j) {
        double acc = 0;
        for (int64_t t = 0; t < k; ++t) acc += qd[(b * s + i) * k + t] * kd[(b * k + t) * s + j];
        want[(b * s + i) * s + j] = acc + mask[i * s + j];
      }
  ExpectClose(*(*out)[0], want, "y");
}

// A batched A times a 2-D B (rows flattened over A's batch dims), then a [1, S, N] operand
// broadcast over the batch, and the same with constant weights (kiln::PackedMatMul).
BOOST_AUTO_TEST_CASE(flattened_rows_plus_batch_broadcast_operand) {
  const int64_t b = 3, s = 7, k = 6, n = 20;
  auto w = testing::RandomTensor(DType::kF32, {k, n}, -1, 1, 3);
  auto exe = CompileJit(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[B, S, 6] x, float[6, 20] wr, float[1, S, 20] bias) => (float[B, S, 20] y,
                                                                      float[B, S, 20] z)
      <)" + Literal("float[6, 20] wc", w->ToDoubles()) + R"(> {
      p = MatMul(x, wr)
      y = Add(p, bias)
      pc = MatMul(x, wc)
      z = Mul(pc, bias)
    }
  )");
  auto x = testing::RandomTensor(DType::kF32, {b, s, k}, -1, 1, 4);
  auto bias = testing::RandomTensor(DType::kF32, {1, s, n}, -1, 1, 5);
  auto out = testing::RunExecutable(exe, {x, w, bias});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  std::vector<double> xd = x->ToDoubles(), wd = w->ToDoubles(), bd = bias->ToDoubles();
  std::vector<double> y(b * s * n), z(b * s * n);
  for (int64_t r = 0; r < b * s; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t t = 0; t < k; ++t) acc += xd[r * k + t] * wd[t * n + j];
      y[r * n + j] = acc + bd[(r % s) * n + j];
      z[r * n + j] = acc * bd[(r % s) * n + j];
    }
  ExpectClose(*(*out)[0], y, "y");
  ExpectClose(*(*out)[1], z, "z");
}

}  // namespace
}  // namespace kiln::compiler
