// Region shapes the real models need: Flatten between pooling and Gemm kept in the region,
// batched MatMuls with a shared weight run as one GEMM, sum post-ops (residual adds) accumulating
// into a dead residual in place, and the decomposed LayerNorm exporters emit claimed as one
// oneDNN layer normalization. Results against plain reference loops.
#define BOOST_TEST_MODULE onednn_fusion_test
#include <algorithm>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <ostream>
#include <string>

#include "compiler/passes/partition.h"
#include "external/onednn/compile/codegen.h"
#include "external/onednn/region.h"
#include "external/onednn/compile/rules.h"
#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

namespace data = boost::unit_test::data;

RegionProgram Decoded(const CompiledRegion& r) {
  StatusOr<RegionProgram> region = DecodeRegion(r.code.blob.data(), r.code.blob.size());
  BOOST_REQUIRE(region.ok());
  return *region;
}

double DotTolerance(int64_t k) { return 1e-5 * std::max<double>(1.0, std::sqrt(k)) * 4; }

// ---- Flatten -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(gap_flatten_gemm_runs_in_one_region) {
  Dims wd = {10, 8};
  Floats w = Random(Numel(wd), 1), c = Random(10, 2);
  compiler::Graph g = MakeGraph(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 8, 3, 5] X) => (float Y, float F) {
      p = GlobalAveragePool(X)
      F = Flatten(p)
      Y = Gemm <transB = 1> (F, W, C)
    })",
                                {{"W", wd, w}, {"C", {10}, c}});
  // With constant-weight GEMMs claimed, the partitioner takes all three nodes (Flatten no
  // longer splits the region). By default the Gemm stays on the JIT (prepacked weights), and
  // the pool and Flatten, a region with no Conv, too.
  StatusOr<std::vector<compiler::PartitionedRegion>> regions =
      compiler::PartitionGraph(g, Rules({/*constant_weight_gemms=*/true}));
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE(regions->size() == 1u);
  BOOST_TEST((*regions)[0].nodes.size() == 3u);
  StatusOr<std::vector<compiler::PartitionedRegion>> by_default =
      compiler::PartitionGraph(g, Rules());
  BOOST_REQUIRE(by_default.ok());
  BOOST_TEST(by_default->empty());
  StatusOr<std::vector<compiler::PartitionedRegion>> convless =
      compiler::PartitionGraph(g, Rules({/*constant_weight_gemms=*/false,
                                         /*regions_without_conv=*/true}));
  BOOST_REQUIRE(convless.ok());
  BOOST_REQUIRE(convless->size() == 1u);
  BOOST_TEST((*convless)[0].nodes.size() == 2u);  // GlobalAveragePool, Flatten
  CompiledRegion r = Compile(std::move(g));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 3u);
  BOOST_TEST((region.ops[1].kind == OpKind::kFlatten));
  for (int64_t n : {1, 3}) {
    Dims xd = {n, 8, 3, 5};
    Floats x = Random(Numel(xd), 3 + n);
    Floats avg(n * 8);
    for (int64_t p = 0; p < n * 8; ++p) {
      double s = 0;
      for (int k = 0; k < 15; ++k) s += x[p * 15 + k];
      avg[p] = static_cast<float>(s / 15);
    }
    Floats want(n * 10);
    for (int64_t i = 0; i < n; ++i)
      for (int j = 0; j < 10; ++j) {
        double acc = c[j];
        for (int k = 0; k < 8; ++k) acc += static_cast<double>(avg[i * 8 + k]) * w[j * 8 + k];
        want[i * 10 + j] = static_cast<float>(acc);
      }
    std::vector<Floats> got = r.Run({{xd, x}}, {{n, 10}, {n, 8}});
    BOOST_TEST(Close(got[0], want, DotTolerance(8 * 15), 1e-4));
    BOOST_TEST(Close(got[1], avg, 1e-5, 1e-5));  // the flattened view copied out
  }
}

BOOST_DATA_TEST_CASE(flatten_of_a_region_input_any_axis, data::make({0, 1, 2, 3}), axis) {
  CompiledRegion r = Compile(
      MakeGraph("<ir_version: 8, opset_import: [\"\" : 13]>\n g (float[2, 3, 4] X) => (float Y) {\n"
                " f = Flatten <axis = " +
                std::to_string(axis) + "> (X)\n Y = Relu(f)\n}"));
  Dims xd = {2, 3, 4};
  Dims yd = {1, 1};
  for (int i = 0; i < 3; ++i) yd[i < axis ? 0 : 1] *= xd[i];
  Floats x = Random(Numel(xd), 7);
  Floats want = x;
  for (float& v : want) v = std::max(v, 0.0f);
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], want, 1e-7, 1e-7));  // exact copies
}

BOOST_AUTO_TEST_CASE(flatten_axis_out_of_range_is_rejected_by_validation) {
  RegionProgram r;
  r.tensors = {{DType::kF32, 3}, {DType::kF32, 2}};
  r.inputs = {{0, {2, 3, 4}}};
  r.outputs = {1};
  Op op;
  op.kind = OpKind::kFlatten;
  op.inputs = {0};
  op.output = 1;
  op.axis = 4;
  r.ops = {op};
  BOOST_TEST(ValidateRegion(r).message() == "ops[0] (Flatten): axis 4 for rank 3");
  r.ops[0].axis = 3;
  BOOST_TEST(ValidateRegion(r).ok());
  std::vector<uint8_t> blob = EncodeRegion(r);
  StatusOr<RegionProgram> d = DecodeRegion(blob.data(), blob.size());
  BOOST_REQUIRE(d.ok());
  BOOST_TEST((d->ops[0].kind == OpKind::kFlatten));
  BOOST_TEST(d->ops[0].axis == 3);
}

// ---- MatMul with a weight shared across the batch ------------------------------------------

// [S, 1, K] x [K, N] (seq-first attention projections) + bias, then a residual and a
// broadcast multiply: computed as one [S, N] GEMM; the operands view the same bytes.
BOOST_AUTO_TEST_CASE(matmul_shared_weight_bias_residual_and_broadcast_mul) {
  const int64_t k = 32, n = 24;
  Floats w = Random(k * n, 11), b = Random(n, 12);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[S, 1, 32] X, float[S, 1, 24] R, float[S, 1, 1] M) => (float Y) {
      m = MatMul(X, W)
      a = Add(m, B)
      s = Add(a, R)
      Y = Mul(s, M)
    })",
                                       {{"W", {k, n}, w}, {"B", {n}, b}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 1u);  // bias, sum and binary fused
  for (int64_t s : {1, 7}) {
    Dims xd = {s, 1, k};
    Floats x = Random(s * k, 13 + s), res = Random(s * n, 14 + s), mul = Random(s, 15 + s);
    Floats want = RefMatMul(x, xd, w, {k, n});
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float& v = want[i * n + j];
        v = (v + b[j] + res[i * n + j]) * mul[i];
      }
    std::vector<Floats> got = r.Run({{xd, x}, {{s, 1, n}, res}, {{s, 1, 1}, mul}}, {{s, 1, n}});
    BOOST_TEST(Close(got[0], want, DotTolerance(k) * 4, 1e-4));
  }
}

// A post-op operand that varies over one leading dim but not the other cannot be viewed as a
// matrix: the batched form is kept (and still correct).
BOOST_AUTO_TEST_CASE(matmul_shared_weight_with_uncollapsible_operand) {
  const int64_t k = 8, n = 5;
  Floats w = Random(k * n, 21);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 3, 8] X, float[2, 1, 5] Z) => (float Y) {
      m = MatMul(X, W)
      Y = Add(m, Z)
    })",
                                       {{"W", {k, n}, w}}));
  Dims xd = {2, 3, k};
  Floats x = Random(Numel(xd), 22), z = Random(2 * n, 23);
  Floats want = RefMatMul(x, xd, w, {k, n});
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t j = 0; j < n; ++j) want[(t * 3 + i) * n + j] += z[t * n + j];
  BOOST_TEST(Close(r.Run({{xd, x}, {{2, 1, n}, z}}, {{2, 3, n}})[0], want, DotTolerance(k), 1e-4));
}

// The FFN of a transformer: [S, 1, K] x W1 + b1, erf Gelu, x W2. The Gelu, a post-op in the
// blob, runs as an in-place eltwise step after the (collapsed) matmul.
BOOST_AUTO_TEST_CASE(ffn_matmul_gelu_matmul) {
  const int64_t k = 16, h = 40, n = 12;
  Floats w1 = Random(k * h, 51), b1 = Random(h, 52), w2 = Random(h * n, 53);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[S, 1, 16] X) => (float Y) {
      m = MatMul(X, W1)
      a = Add(m, B1)
      d = Div(a, Sqrt2)
      e = Erf(d)
      p = Add(e, One)
      q = Mul(a, p)
      gl = Mul(q, Half)
      Y = MatMul(gl, W2)
    })",
                                       {{"W1", {k, h}, w1},
                                        {"B1", {h}, b1},
                                        {"W2", {h, n}, w2},
                                        {"Sqrt2", {}, {std::sqrt(2.0f)}},
                                        {"One", {}, {1.0f}},
                                        {"Half", {}, {0.5f}}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 2u);
  BOOST_REQUIRE(region.ops[0].post_ops.size() == 1u);
  BOOST_TEST((region.ops[0].post_ops[0].eltwise == EltwiseAlg::kGeluErf));
  for (int64_t s : {1, 9}) {
    Dims xd = {s, 1, k};
    Floats x = Random(s * k, 54 + s);
    Floats hid = RefMatMul(x, xd, w1, {k, h});
    for (int64_t i = 0; i < s; ++i)
      for (int64_t j = 0; j < h; ++j) {
        double v = hid[i * h + j] + b1[j];
        hid[i * h + j] = static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))));
      }
    Floats want = RefMatMul(hid, {s, 1, h}, w2, {h, n});
    BOOST_TEST(Close(r.Run({{xd, x}}, {{s, 1, n}})[0], want, DotTolerance(k * h) * 4, 1e-4));
  }
}

// ---- Sum post-ops accumulate in place ------------------------------------------------------

// A ResNet bottleneck's tail: the residual R (a 1x1 projection of X, computed in the region) is
// added to conv(relu(conv(X))) as a sum post-op + relu. Who else reads R after the sum decides
// whether the conv may accumulate into R's buffer or must copy R into its own dst first.
enum class ResidualUse { kDead, kRegionOutput, kLaterOp };

std::ostream& operator<<(std::ostream& os, ResidualUse u) {
  const char* names[] = {"dead", "region_output", "later_op"};
  return os << names[static_cast<int>(u)];
}

struct ResidualBlock {
  Dims wd = {16, 16, 3, 3}, pd = {16, 16, 1, 1};
  Floats wa = Random(Numel(wd), 61), ba = Random(16, 62), wb = Random(Numel(wd), 63),
         bb = Random(16, 64), wp = Random(Numel(pd), 65);

  CompiledRegion Build(ResidualUse use) const {
    std::string outputs = use == ResidualUse::kDead           ? "float Y"
                          : use == ResidualUse::kRegionOutput ? "float Y, float R"
                                                              : "float Y, float Z";
    std::string later = use == ResidualUse::kLaterOp
                            ? "Z = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (R)"
                            : "";
    return Compile(MakeGraph(
        R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[N, 16, 10, 10] X) => ()" +
            outputs + R"() {
        R = Conv(X, Wp)
        a = Conv <pads = [1, 1, 1, 1]> (X, Wa, Ba)
        h = Relu(a)
        b = Conv <pads = [1, 1, 1, 1]> (h, Wb, Bb)
        s = Add(b, R)
        Y = Relu(s)
        )" + later +
            "\n}",
        {{"Wa", wd, wa}, {"Ba", {16}, ba}, {"Wb", wd, wb}, {"Bb", {16}, bb}, {"Wp", pd, wp}}));
  }

  // Y, and the projection R through *r.
  Floats Reference(const Floats& x, const Dims& xd, Floats* r) const {
    Dims yd;
    *r = RefConv2d(x, xd, wp, pd, nullptr, {}, &yd);
    Floats h = RefConv2d(x, xd, wa, wd, &ba, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd);
    for (float& v : h) v = std::max(v, 0.0f);
    Floats y = RefConv2d(h, yd, wb, wd, &bb, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd);
    for (size_t i = 0; i < y.size(); ++i) y[i] = std::max(y[i] + (*r)[i], 0.0f);
    return y;
  }
};

// A dead residual is accumulated into in place (no copy step); one that is read after the sum
// (a region output copied out at the end, or a later op's operand) is copied into dst first
// and survives the sum unchanged. All three give the reference's numbers, and Y is
// bit-identical whether the sum ran in place or on a copy.
BOOST_DATA_TEST_CASE(conv_sum_runs_in_place_only_over_a_dead_residual,
                     data::make({ResidualUse::kDead, ResidualUse::kRegionOutput,
                                 ResidualUse::kLaterOp}),
                     use) {
  ResidualBlock block;
  CompiledRegion r = block.Build(use);
  CompiledRegion copied = block.Build(ResidualUse::kRegionOutput);
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == (use == ResidualUse::kLaterOp ? 4u : 3u));
  const Op& sum_op = region.ops[2];
  BOOST_REQUIRE(sum_op.post_ops.size() == 2u);
  BOOST_REQUIRE((sum_op.post_ops[0].kind == PostOpKind::kSum));
  BOOST_REQUIRE(sum_op.post_ops[0].tensor == region.ops[0].output);  // R, the projection
  if (use == ResidualUse::kLaterOp) BOOST_REQUIRE(region.ops[3].inputs[0] == region.ops[0].output);
  const int copies_per_plan = use == ResidualUse::kDead ? 0 : 1;
  BOOST_TEST(r.region().stats().residual_copies == copies_per_plan);  // the batch-1 plan
  for (int64_t n : {1, 2}) {
    Dims xd = {n, 16, 10, 10};
    Floats x = Random(Numel(xd), 66 + n), proj;
    Floats want = block.Reference(x, xd, &proj);
    std::vector<Dims> shapes = {xd};
    if (use == ResidualUse::kRegionOutput) shapes.push_back(xd);
    if (use == ResidualUse::kLaterOp) shapes.push_back({n, 16, 5, 5});
    std::vector<Floats> got = r.Run({{xd, x}}, shapes);
    // Y's error: two chained 144-term dots (the first one's error scaled by the second's weights).
    BOOST_TEST(Close(got[0], want, DotTolerance(144) * 4, 1e-4));
    if (use == ResidualUse::kRegionOutput) BOOST_TEST(Close(got[1], proj, DotTolerance(16), 1e-4));
    if (use == ResidualUse::kLaterOp) {
      Dims zd;
      Floats z = RefPool2d(proj, xd, true, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, &zd);
      BOOST_TEST(Close(got[1], z, DotTolerance(16), 1e-4));
    }
    Floats y_copied = copied.Run({{xd, x}}, {xd, xd})[0];
    BOOST_TEST(std::memcmp(got[0].data(), y_copied.data(), got[0].size() * sizeof(float)) == 0);
  }
  RegionStats s = r.region().stats();
  BOOST_TEST(s.cached_plans == 2);
  BOOST_TEST(s.residual_copies == 2 * copies_per_plan);
}

// The residual is the caller's input: the conv accumulates into a copy, never into the caller's
// tensor (run on the caller's own buffers, not copies of them).
BOOST_AUTO_TEST_CASE(conv_sum_never_overwrites_a_region_input) {
  ResidualBlock block;
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 16, 10, 10] X, float[1, 16, 10, 10] R) => (float Y) {
      a = Conv <pads = [1, 1, 1, 1]> (X, Wa, Ba)
      h = Relu(a)
      b = Conv <pads = [1, 1, 1, 1]> (h, Wb, Bb)
      s = Add(b, R)
      Y = Relu(s)
    })",
                                       {{"Wa", block.wd, block.wa},
                                        {"Ba", {16}, block.ba},
                                        {"Wb", block.wd, block.wb},
                                        {"Bb", {16}, block.bb}}));
  BOOST_REQUIRE(Decoded(r).ops.size() == 2u);
  BOOST_REQUIRE((Decoded(r).ops[1].post_ops[0].kind == PostOpKind::kSum));
  Dims xd = {1, 16, 10, 10};
  Floats x = Random(Numel(xd), 71), res = Random(Numel(xd), 72), y(Numel(xd), NAN);
  const Floats x0 = x, res0 = res;
  Shape shape{1, 16, 10, 10};
  Tensor tx = Tensor::Wrap(x.data(), DType::kF32, shape),
         tr = Tensor::Wrap(res.data(), DType::kF32, shape),
         ty = Tensor::Wrap(y.data(), DType::kF32, shape);
  const Tensor* args[] = {&tx, &tr, &ty};
  for (int run = 0; run < 2; ++run) {
    BOOST_REQUIRE(r.fn->Run(args, 2, 1).ok());
    BOOST_TEST(std::memcmp(res.data(), res0.data(), res.size() * sizeof(float)) == 0);
    BOOST_TEST(std::memcmp(x.data(), x0.data(), x.size() * sizeof(float)) == 0);
  }
  Dims yd;
  Floats h =
      RefConv2d(x0, xd, block.wa, block.wd, &block.ba, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd);
  for (float& v : h) v = std::max(v, 0.0f);
  Floats want =
      RefConv2d(h, yd, block.wb, block.wd, &block.bb, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd);
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(want[i] + res0[i], 0.0f);
  BOOST_TEST(Close(y, want, DotTolerance(144) * 4, 1e-4));
  BOOST_TEST(r.region().stats().residual_copies == 1);
}

// MatMul shares the path. H = relu(X W2 + P) with P = X W1 fused as a sum post-op; H feeds a
// softmax. A dead P is accumulated into in place. P read by a later op is copied first, and so
// is P when H is a region output: a row-major H is computed straight into the caller's tensor.
struct MatMulSumCase {
  const char* name;
  char second_output;  // 'Z' (sigmoid(P)), 'H' or none
  int copies_per_plan;
};

std::ostream& operator<<(std::ostream& os, const MatMulSumCase& c) { return os << c.name; }

const MatMulSumCase kMatMulSumCases[] = {
    {"dead", 0, 0},
    {"read_later", 'Z', 1},
    {"into_caller", 'H', 1},
};

// dst can hold one residual. The codegen writes at most one sum post-op per op, but a blob is
// untrusted: a second sum is added as a binary operand rather than copied over the first.
BOOST_AUTO_TEST_CASE(a_second_sum_post_op_adds_its_residual_too) {
  Dims wd = {8, 8, 1, 1}, xd = {1, 8, 3, 3};
  Floats w = Random(Numel(wd), 81);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 8, 3, 3] X, float[1, 8, 3, 3] R) => (float Y) {
      c = Conv(X, W)
      Y = Add(c, R)
    })",
                                       {{"W", wd, w}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 1u);
  BOOST_REQUIRE(region.ops[0].post_ops.size() == 1u);
  BOOST_REQUIRE((region.ops[0].post_ops[0].kind == PostOpKind::kSum));
  PostOp second = region.ops[0].post_ops[0];
  second.tensor = region.ops[0].inputs[0];  // X: Y = conv(X) + R + X
  region.ops[0].post_ops.push_back(second);
  compiler::ExternalCode code = r.code;
  code.blob = EncodeRegion(region);
  OneDnnRuntime runtime;
  StatusOr<std::unique_ptr<TensorFunction>> fn =
      runtime.CreateRegion(MakeSpec(code, r.constants, 2, 1));
  BOOST_REQUIRE_MESSAGE(fn.ok(), fn.status().ToString());
  r.fn = std::move(*fn);
  Floats x = Random(Numel(xd), 82), res = Random(Numel(xd), 83);
  Dims yd;
  Floats want = RefConv2d(x, xd, w, wd, nullptr, {}, &yd);
  for (size_t i = 0; i < want.size(); ++i) want[i] += res[i] + x[i];
  std::vector<Floats> y = r.Run({{xd, x}, {xd, res}}, {xd});
  BOOST_TEST(Close(y[0], want, DotTolerance(8), 1e-5));
}

BOOST_DATA_TEST_CASE(matmul_sum_runs_in_place_only_over_a_dead_residual,
                     data::make(kMatMulSumCases), c) {
  const int64_t k = 32, n = 24;
  Floats w1 = Random(k * n, 81), w2 = Random(k * n, 82);
  bool z = c.second_output == 'Z', h_out = c.second_output == 'H';
  std::string outputs =
      "float Y" + (c.second_output ? std::string(", float ") + c.second_output : "");
  CompiledRegion r = Compile(MakeGraph(std::string(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[S, 32] X) => ()") + outputs +
                                           R"() {
      P = MatMul(X, W1)
      m = MatMul(X, W2)
      s = Add(m, P)
      H = Relu(s)
      Y = Softmax <axis = 1> (H)
      )" + (z ? "Z = Sigmoid(P)" : "") + "\n}",
                                       {{"W1", {k, n}, w1}, {"W2", {k, n}, w2}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == (z ? 4u : 3u));
  BOOST_REQUIRE(region.ops[1].post_ops.size() == 2u);
  BOOST_REQUIRE((region.ops[1].post_ops[0].kind == PostOpKind::kSum));
  BOOST_REQUIRE(region.ops[1].post_ops[0].tensor == region.ops[0].output);
  for (int64_t s : {1, 5}) {
    Dims xd = {s, k};
    Floats x = Random(s * k, 83 + s);
    Floats p = RefMatMul(x, xd, w1, {k, n}), h = RefMatMul(x, xd, w2, {k, n});
    for (size_t i = 0; i < h.size(); ++i) h[i] = std::max(h[i] + p[i], 0.0f);
    std::vector<Dims> shapes(c.second_output ? 2 : 1, Dims{s, n});
    std::vector<Floats> got = r.Run({{xd, x}}, shapes);
    BOOST_TEST(Close(got[0], RefSoftmax(h, {s, n}, 1, false), 1e-6, 1e-4));
    if (z) {
      for (float& v : p) v = static_cast<float>(1 / (1 + std::exp(-static_cast<double>(v))));
      BOOST_TEST(Close(got[1], p, DotTolerance(k), 1e-4));
    } else if (h_out) {
      BOOST_TEST(Close(got[1], h, DotTolerance(k) * 2, 1e-4));
    }
  }
  RegionStats st = r.region().stats();
  BOOST_TEST(st.cached_plans == 2);
  BOOST_TEST(st.residual_copies == 2 * c.copies_per_plan);
}

// ---- Swish (x * sigmoid(x)) ----------------------------------------------------------------

double Swish(double v) { return v / (1.0 + std::exp(-v)); }

// SiLU as exporters write it becomes one swish: a post-op of the conv whose output only it
// reads, else an eltwise op of its own. On 10 channels (padded to oneDNN's block) a sigmoid
// would be 'ref:any'; the swish is not, so the region is created even when any reference
// primitive declines it.
BOOST_AUTO_TEST_CASE(x_times_sigmoid_x_is_one_swish) {
  Dims wd = {10, 10, 1, 1};
  Floats w = Random(Numel(wd), 40);
  compiler::Graph g = MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 10, 6, 6] X) => (float Y, float B) {
      c = Conv(X, W)
      s = Sigmoid(c)
      a = Mul(c, s)
      B = Add(a, X)
      t = Sigmoid(B)
      Y = Mul(t, B)
    })",
                                {{"W", wd, w}});
  OneDnnOptions any_reference;
  any_reference.reference_share_to_decline = 0;
  CompiledRegion r = Compile(std::move(g), any_reference);
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 2u);
  BOOST_TEST((region.ops[0].kind == OpKind::kConv));
  BOOST_REQUIRE(region.ops[0].post_ops.size() == 2u);
  BOOST_TEST((region.ops[0].post_ops[0].eltwise == EltwiseAlg::kSwish));
  BOOST_TEST((region.ops[1].kind == OpKind::kEltwise));
  BOOST_TEST((region.ops[1].eltwise == EltwiseAlg::kSwish));
  Floats x = Random(360, 41), want_b(360), want_y(360);
  for (int o = 0; o < 10; ++o)
    for (int p = 0; p < 36; ++p) {
      double c = 0;
      for (int i = 0; i < 10; ++i) c += static_cast<double>(w[o * 10 + i]) * x[i * 36 + p];
      double b = Swish(c) + x[o * 36 + p];
      want_b[o * 36 + p] = static_cast<float>(b);
      want_y[o * 36 + p] = static_cast<float>(Swish(b));
    }
  std::vector<Floats> got = r.Run({{{1, 10, 6, 6}, x}}, {{1, 10, 6, 6}, {1, 10, 6, 6}});
  BOOST_TEST(Close(got[0], want_y, 1e-5, 1e-5));
  BOOST_TEST(Close(got[1], want_b, 1e-5, 1e-5));
}

// ---- HardSigmoid ---------------------------------------------------------------------------

// MobileNetV3's squeeze-excite block: GlobalAveragePool -> 1x1 Conv -> Relu -> 1x1 Conv ->
// HardSigmoid -> Mul. The gate is claimed, so the block stays in its conv's region (it split
// the network into a region per block), as a linear and a clip post-op of the second conv; a
// HardSigmoid with no conv before it is two eltwise ops (Compile puts every node in one
// region). Both clip on both sides here.
BOOST_AUTO_TEST_CASE(squeeze_excite_hardsigmoid_stays_in_the_region) {
  Dims wd = {16, 16, 1, 1}, w1d = {8, 16, 1, 1}, w2d = {16, 8, 1, 1};
  Floats w = Random(Numel(wd), 80), w1 = Random(Numel(w1d), 81),
         w2 = Random(Numel(w2d), 82, -8.0f, 8.0f);
  compiler::Graph g = MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 16, 5, 5] X) => (float Y, float Z) {
      c = Conv(X, W)
      p = GlobalAveragePool(c)
      f = Conv(p, W1)
      r = Relu(f)
      e = Conv(r, W2)
      h = HardSigmoid <alpha = 0.1666667, beta = 0.5> (e)
      Y = Mul(h, c)
      Z = HardSigmoid(X)
    })",
                                {{"W", wd, w}, {"W1", w1d, w1}, {"W2", w2d, w2}});
  StatusOr<std::vector<compiler::PartitionedRegion>> regions =
      compiler::PartitionGraph(g, Rules());
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE(regions->size() == 1u);
  BOOST_TEST((*regions)[0].nodes.size() == 7u);  // Z's HardSigmoid shares no value with it
  CompiledRegion r = Compile(std::move(g));
  RegionProgram region = Decoded(r);
  int gates = 0, linears = 0, clips = 0;
  for (const Op& op : region.ops) {
    if (op.kind == OpKind::kConv && op.post_ops.size() == 2 &&
        op.post_ops[0].eltwise == EltwiseAlg::kLinear && op.post_ops[1].eltwise == EltwiseAlg::kClip)
      ++gates;
    if (op.kind == OpKind::kEltwise) (op.eltwise == EltwiseAlg::kLinear ? linears : clips)++;
  }
  BOOST_TEST(gates == 1);
  BOOST_TEST(linears == 1);
  BOOST_TEST(clips == 1);
  Floats x = Random(16 * 25, 83, -4.0f, 4.0f), c(16 * 25), y(16 * 25), z(16 * 25);
  auto hard_sigmoid = [](double v, double alpha) {
    return std::min(1.0, std::max(0.0, alpha * v + 0.5));
  };
  std::vector<double> pooled(16, 0.0), relu(8, 0.0);
  for (int o = 0; o < 16; ++o)
    for (int q = 0; q < 25; ++q) {
      double acc = 0;
      for (int i = 0; i < 16; ++i) acc += static_cast<double>(w[o * 16 + i]) * x[i * 25 + q];
      c[o * 25 + q] = static_cast<float>(acc);
      pooled[o] += acc / 25;
    }
  for (int o = 0; o < 8; ++o) {
    for (int i = 0; i < 16; ++i) relu[o] += w1[o * 16 + i] * pooled[i];
    relu[o] = std::max(relu[o], 0.0);
  }
  int saturated = 0;
  for (int o = 0; o < 16; ++o) {
    double e = 0;
    for (int i = 0; i < 8; ++i) e += w2[o * 8 + i] * relu[i];
    double gate = hard_sigmoid(e, 0.1666667);
    saturated += gate == 0.0 || gate == 1.0;
    for (int q = 0; q < 25; ++q) y[o * 25 + q] = static_cast<float>(gate * c[o * 25 + q]);
  }
  BOOST_TEST(saturated > 0);  // the clip is exercised, not only the linear part
  for (size_t i = 0; i < x.size(); ++i) z[i] = static_cast<float>(hard_sigmoid(x[i], 0.2));
  std::vector<Floats> got = r.Run({{{1, 16, 5, 5}, x}}, {{1, 16, 5, 5}, {1, 16, 5, 5}});
  BOOST_TEST(Close(got[0], y, DotTolerance(16 * 16 * 8), 1e-4));
  BOOST_TEST(Close(got[1], z, 1e-6, 1e-6));
}

// ---- AveragePool before a 1x1 Conv ----------------------------------------------------------

// DenseNet's transition: a 1x1 conv (here with a bias) then AvgPool 2x2 / 2. Both are linear per
// pixel and the pool's weights sum to 1, so the region pools first and convolves a quarter of
// the pixels; the result is the conv-then-pool reference up to rounding. A 3x3 conv, a padded
// pool or ceil_mode keep the written order.
BOOST_DATA_TEST_CASE(average_pool_runs_before_a_pointwise_conv,
                     data::make({"", "pads = [1, 1, 1, 1], ", "ceil_mode = 1, ", "3x3"}), variant) {
  std::string v = variant;
  bool k3 = v == "3x3";
  Dims wd = {12, 16, k3 ? 3 : 1, k3 ? 3 : 1};
  Floats w = Random(Numel(wd), 90), b = Random(12, 91);
  std::string pool_attrs = k3 ? "" : v;
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 16, 9, 10] X) => (float Y) {
      c = Conv(X, W, B)
      Y = AveragePool <)" + pool_attrs + R"(kernel_shape = [2, 2], strides = [2, 2]> (c)
    })",
                                       {{"W", wd, w}, {"B", {12}, b}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 2u);
  bool swapped = v.empty();
  BOOST_TEST((region.ops[0].kind == (swapped ? OpKind::kPool : OpKind::kConv)));
  BOOST_TEST((region.ops[1].kind == (swapped ? OpKind::kConv : OpKind::kPool)));
  Dims xd = {2, 16, 9, 10}, cd, yd;
  Floats x = Random(Numel(xd), 92);
  Floats c = RefConv2d(x, xd, w, wd, &b, {}, &cd);
  Dims pads = v.find("pads") != std::string::npos ? Dims{1, 1, 1, 1} : Dims{0, 0, 0, 0};
  bool ceil = v.find("ceil") != std::string::npos;
  // AveragePool's ceil_mode window past the edge averages the pixels it covers (the reference
  // takes that as padding not counted), as does a padded window by default.
  if (ceil) pads = {0, 0, 1, 0};
  Floats y = RefPool2d(c, cd, false, {2, 2}, {2, 2}, pads, false, &yd);
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], y, DotTolerance(16 * Numel(wd) / 12 / 16), 1e-4));
}

// ---- Decomposed LayerNorm ------------------------------------------------------------------

// torch.nn.LayerNorm exported at opset 13 (the operand orders vary between exporters).
std::string LayerNormText(const char* mean_axes, bool swapped) {
  std::string mul = swapped ? "m = Mul(G, d)\n" : "m = Mul(d, G)\n";
  std::string add = swapped ? "Y = Add(Bt, m)\n" : "Y = Add(m, Bt)\n";
  std::string eps = swapped ? "e = Add(E, v)\n" : "e = Add(v, E)\n";
  return std::string(
             "<ir_version: 8, opset_import: [\"\" : 13]>\n"
             "g (float[N, 5, 16] X) => (float Y) {\n"
             "mu = ReduceMean <axes = ") +
         mean_axes +
         "> (X)\n"
         "c = Sub(X, mu)\n"
         "p = Pow(c, Two)\n"
         "v = ReduceMean <axes = [-1]> (p)\n" +
         eps + "s = Sqrt(e)\nd = Div(c, s)\n" + mul + add + "}";
}

BOOST_DATA_TEST_CASE(decomposed_layernorm_is_one_op, data::make({false, true}), swapped) {
  Floats gamma = Random(16, 31, 0.5f, 1.5f), beta = Random(16, 32);
  const float eps = 1e-5f;
  compiler::Graph g =
      MakeGraph(LayerNormText("[-1]", swapped),
                {{"G", {16}, gamma}, {"Bt", {16}, beta}, {"E", {}, {eps}}, {"Two", {}, {2.0f}}});
  std::vector<std::vector<compiler::NodeId>> groups = FindComposites(g);
  BOOST_REQUIRE(groups.size() == 1u);
  BOOST_TEST(groups[0].size() == 9u);
  // A LayerNorm on its own is claimed only with regions_without_conv (the JIT's by default).
  StatusOr<std::vector<compiler::PartitionedRegion>> regions = compiler::PartitionGraph(
      g, Rules({/*constant_weight_gemms=*/false, /*regions_without_conv=*/true}));
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE(regions->size() == 1u);
  StatusOr<std::vector<compiler::PartitionedRegion>> by_default =
      compiler::PartitionGraph(g, Rules());
  BOOST_REQUIRE(by_default.ok());
  BOOST_TEST(by_default->empty());
  CompiledRegion r = Compile(std::move(g));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 1u);
  BOOST_TEST((region.ops[0].kind == OpKind::kLayerNorm));
  BOOST_TEST(region.ops[0].axis == 2);
  BOOST_TEST(region.ops[0].epsilon == eps);
  for (int64_t n : {1, 4}) {
    Dims xd = {n, 5, 16};
    Floats x = Random(Numel(xd), 33 + n, -2.0f, 3.0f);
    Floats want = RefLayerNorm(x, xd, 2, gamma, beta, eps);
    BOOST_TEST(Close(r.Run({{xd, x}}, {xd})[0], want, 1e-5, 1e-4));
  }
}

BOOST_AUTO_TEST_CASE(layernorm_lookalikes_are_not_claimed) {
  Floats gamma = Random(16, 41), beta = Random(16, 42);
  // The mean over another axis is not a layer norm over the last one.
  compiler::Graph g =
      MakeGraph(LayerNormText("[1]", false),
                {{"G", {16}, gamma}, {"Bt", {16}, beta}, {"E", {}, {1e-5f}}, {"Two", {}, {2.0f}}});
  BOOST_TEST(FindComposites(g).empty());
  BOOST_TEST(!IsLayerNormRoot(g, g.value(*g.FindValue("Y")).producer));
  // gamma of the wrong size.
  compiler::Graph g2 = MakeGraph(LayerNormText("[-1]", false), {{"G", {5, 16}, Random(80, 43)},
                                                                {"Bt", {16}, beta},
                                                                {"E", {}, {1e-5f}},
                                                                {"Two", {}, {2.0f}}});
  BOOST_TEST(FindComposites(g2).empty());
}

}  // namespace
}  // namespace kiln::onednn::testing
