// oneDNN regions op by op: graphs built from ONNX text, compiled by external/onednn's codegen,
// run by its runtime, and compared with plain C++ reference loops (tolerances from f32
// accumulation over the reduction length). Also checks which fusions the codegen made.
#define BOOST_TEST_MODULE onednn_ops_test
#include <algorithm>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "external/onednn/region.h"
#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

namespace data = boost::unit_test::data;

std::string Ints(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// The node producing a named value.
struct NodeIdOf {
  const compiler::Graph& g;
  compiler::NodeId operator()(const char* value) const {
    return g.value(*g.FindValue(value)).producer;
  }
};

RegionProgram Decoded(const CompiledRegion& r) {
  StatusOr<RegionProgram> region = DecodeRegion(r.code.blob.data(), r.code.blob.size());
  BOOST_REQUIRE(region.ok());
  return *region;
}

Floats Relu(Floats v) {
  for (float& x : v) x = std::max(x, 0.0f);
  return v;
}

// f32 accumulation of k products of values in [-1, 1]: error grows ~ sqrt(k) * eps * k.
double DotTolerance(int64_t k) { return 1e-5 * std::max<double>(1.0, std::sqrt(k)) * 4; }

// ---- Conv ----------------------------------------------------------------------------------

struct ConvCase {
  const char* name;
  int64_t c, o, group, k, stride, pad, dilation, h;
};
std::ostream& operator<<(std::ostream& os, const ConvCase& c) { return os << c.name; }

const ConvCase kConvCases[] = {
    {"plain_3x3", 8, 16, 1, 3, 1, 1, 1, 9},    {"groups_2", 8, 12, 2, 3, 1, 1, 1, 8},
    {"depthwise", 16, 16, 16, 3, 1, 1, 1, 10}, {"depthwise_stride2", 32, 32, 32, 3, 2, 1, 1, 11},
    {"stride2_pad0", 4, 8, 1, 3, 2, 0, 1, 9},  {"dilation2", 6, 6, 1, 3, 1, 2, 2, 10},
    {"pointwise", 16, 32, 1, 1, 1, 0, 1, 7},   {"k5_pad2_odd_channels", 3, 5, 1, 5, 1, 2, 1, 12},
};

BOOST_DATA_TEST_CASE(conv_bias_relu_matches_reference, data::make(kConvCases), cc) {
  Dims wd = {cc.o, cc.c / cc.group, cc.k, cc.k};
  Floats w = Random(Numel(wd), 1), b = Random(cc.o, 2);
  std::string p = std::to_string(cc.pad), s = std::to_string(cc.stride),
              dl = std::to_string(cc.dilation);
  std::string text =
      "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      "g (float[N, " +
      std::to_string(cc.c) + ", " + std::to_string(cc.h) + ", " + std::to_string(cc.h) +
      "] X) => (float Y) {\n"
      "  c = Conv <group = " +
      std::to_string(cc.group) + ", pads = [" + p + ", " + p + ", " + p + ", " + p +
      "], strides = [" + s + ", " + s + "], dilations = [" + dl + ", " + dl +
      "]> (X, W, B)\n"
      "  Y = Relu(c)\n}";
  CompiledRegion r = Compile(MakeGraph(text, {{"W", wd, w}, {"B", {cc.o}, b}}));
  RegionProgram region = Decoded(r);
  BOOST_TEST(region.ops.size() == 1u);  // Relu fused as a post-op
  BOOST_TEST(region.ops[0].post_ops.size() == 1u);
  for (int64_t n : {1, 2}) {
    Dims xd = {n, cc.c, cc.h, cc.h}, yd;
    Floats x = Random(Numel(xd), 3 + n);
    ConvParams cp{cc.group,
                  {cc.stride, cc.stride},
                  {cc.dilation, cc.dilation},
                  {cc.pad, cc.pad, cc.pad, cc.pad}};
    Floats want = Relu(RefConv2d(x, xd, w, wd, &b, cp, &yd));
    std::vector<Floats> got = r.Run({{xd, x}}, {yd});
    BOOST_TEST(Close(got[0], want, DotTolerance(wd[1] * cc.k * cc.k), 1e-4));
  }
}

// kiln's Winograd convolution inside a region whose plans differ by batch: F(2x2) at N = 1,
// oneDNN's primitive at N = 2 (its weights reordered again after the first plan dropped them),
// F(4x4) at N = 3 (dropping them again while the N = 2 plan still holds its share); then every
// plan runs again. Each run matches the reference and the profile names what ran.
BOOST_AUTO_TEST_CASE(winograd_plans_per_shape_keep_the_weights_they_use) {
  struct Impls : RegionProfiler {
    std::vector<std::string> names;
    void Record(const RegionStepSample& s) override { names.emplace_back(s.impl); }
  };
  const char* env = std::getenv("KILN_ONEDNN_WINOGRAD");
  const std::string saved = env != nullptr ? env : "";
  Dims wd = {24, 16, 3, 3};
  Floats w = Random(Numel(wd), 11), b = Random(24, 12);
  setenv("KILN_ONEDNN_WINOGRAD", "force2", 1);  // the runtime may build N = 1's plan at once
  CompiledRegion r = Compile(MakeGraph(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      "g (float[N, 16, 10, 10] X) => (float Y) {\n"
      "  c = Conv <pads = [1, 1, 1, 1]> (X, W, B)\n"
      "  Y = Relu(c)\n}",
      {{"W", wd, w}, {"B", {24}, b}}));
  const std::pair<int64_t, const char*> plans[] = {{1, "force2"}, {2, "0"}, {3, "force4"}};
  for (int pass = 0; pass < 2; ++pass) {
    for (const auto& [n, mode] : plans) {
      setenv("KILN_ONEDNN_WINOGRAD", mode, 1);  // read when the plan is built (first pass)
      Dims xd = {n, 16, 10, 10}, yd;
      Floats x = Random(Numel(xd), 13 + static_cast<uint32_t>(n));
      Floats want = Relu(RefConv2d(x, xd, w, wd, &b, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd));
      std::vector<Floats> got;
      Impls impls;
      BOOST_REQUIRE(r.TryRun({{xd, x}}, {yd}, &got, &impls).ok());
      BOOST_TEST(Close(got[0], want, DotTolerance(16 * 9), 1e-4));
      const std::string conv = n == 1 ? "kiln:winograd_f2" : n == 3 ? "kiln:winograd_f4" : "";
      const bool winograd = std::find(impls.names.begin(), impls.names.end(),
                                      "kiln:winograd_f2") != impls.names.end() ||
                            std::find(impls.names.begin(), impls.names.end(),
                                      "kiln:winograd_f4") != impls.names.end();
      BOOST_TEST_CONTEXT("N " << n << " pass " << pass) {
        if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
          BOOST_TEST(!winograd);  // oneDNN runs everywhere on such CPUs
        } else if (conv.empty()) {
          BOOST_TEST(!winograd);
        } else {
          BOOST_TEST(std::count(impls.names.begin(), impls.names.end(), conv) == 1);
        }
      }
    }
  }
  if (env != nullptr) {
    setenv("KILN_ONEDNN_WINOGRAD", saved.c_str(), 1);
  } else {
    unsetenv("KILN_ONEDNN_WINOGRAD");
  }
}

BOOST_AUTO_TEST_CASE(conv_same_upper_auto_pad) {
  Dims wd = {4, 3, 3, 3};
  Floats w = Random(Numel(wd), 5);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 3, 8, 8] X) => (float Y) {
      Y = Conv <auto_pad = "SAME_UPPER", strides = [2, 2]> (X, W)
    })",
                                       {{"W", wd, w}}));
  // SAME_UPPER, stride 2 over 8 with k3: out 4, total pad 1 -> begin 0, end 1.
  Dims xd = {1, 3, 8, 8}, yd;
  Floats x = Random(Numel(xd), 6);
  Floats want = RefConv2d(x, xd, w, wd, nullptr, {1, {2, 2}, {1, 1}, {0, 0, 1, 1}}, &yd);
  BOOST_TEST(yd == (Dims{1, 4, 4, 4}));
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], want, DotTolerance(27), 1e-4));
}

// ResNet basic block tail: relu(conv(x) + x) -> one op with a sum and an eltwise post-op.
BOOST_AUTO_TEST_CASE(conv_residual_add_relu_fuses_into_one_op) {
  Dims wd = {16, 16, 3, 3};
  Floats w = Random(Numel(wd), 7), b = Random(16, 8);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 16, 10, 10] X) => (float Y) {
      c = Conv <pads = [1, 1, 1, 1]> (X, W, B)
      s = Add(c, X)
      Y = Relu(s)
    })",
                                       {{"W", wd, w}, {"B", {16}, b}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 1u);
  BOOST_REQUIRE(region.ops[0].post_ops.size() == 2u);
  BOOST_TEST(static_cast<int>(region.ops[0].post_ops[0].kind) ==
             static_cast<int>(PostOpKind::kSum));
  BOOST_TEST(static_cast<int>(region.ops[0].post_ops[1].kind) ==
             static_cast<int>(PostOpKind::kEltwise));
  Dims xd = {2, 16, 10, 10}, yd;
  Floats x = Random(Numel(xd), 9);
  Floats conv = RefConv2d(x, xd, w, wd, &b, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd);
  for (size_t i = 0; i < conv.size(); ++i) conv[i] = std::max(conv[i] + x[i], 0.0f);
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], conv, DotTolerance(144), 1e-4));
}

// A TCN block's tail: relu(relu(conv(x)) + r), r a region input. The Add follows an eltwise,
// so it is a binary post-op (oneDNN's JIT convs take a sum only first); its operand must reach
// the primitive in dst's layout, else only oneDNN's gemm convolution accepts it and runs its
// post-ops element by element (tcn_causal of the third zoo: 5x slower with offload).
BOOST_AUTO_TEST_CASE(conv_relu_add_input_relu_runs_on_a_jit_convolution) {
  struct Convs : RegionProfiler {
    std::vector<std::string> impls;
    void Record(const RegionStepSample& s) override {
      if (std::string(s.kind) == "conv") impls.emplace_back(s.impl);
    }
  };
  Dims wd = {16, 16, 3, 3};
  Floats w = Random(Numel(wd), 21), b = Random(16, 22);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 16, 6, 20] X, float[N, 16, 6, 20] R) => (float Y) {
      c = Conv <pads = [1, 1, 1, 1]> (X, W, B)
      a = Relu(c)
      s = Add(a, R)
      Y = Relu(s)
    })",
                                       {{"W", wd, w}, {"B", {16}, b}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 1u);
  BOOST_REQUIRE(region.ops[0].post_ops.size() == 3u);
  BOOST_TEST(static_cast<int>(region.ops[0].post_ops[1].kind) ==
             static_cast<int>(PostOpKind::kBinary));
  Dims xd = {1, 16, 6, 20}, yd;
  Floats x = Random(Numel(xd), 23), res = Random(Numel(xd), 24);
  Floats want = Relu(RefConv2d(x, xd, w, wd, &b, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd));
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(want[i] + res[i], 0.0f);
  std::vector<Floats> got;
  Convs convs;
  BOOST_REQUIRE(r.TryRun({{xd, x}, {xd, res}}, {yd}, &got, &convs).ok());
  BOOST_TEST(Close(got[0], want, DotTolerance(144), 1e-4));
  BOOST_REQUIRE(convs.impls.size() == 1u);
  BOOST_TEST(convs.impls[0].find("gemm") == std::string::npos, convs.impls[0]);
}

// Two branches joined by Add: the second conv takes the first's output as its residual.
BOOST_AUTO_TEST_CASE(two_branch_add_fuses_into_the_later_conv) {
  Dims wd = {8, 8, 1, 1};
  Floats w1 = Random(Numel(wd), 10), w2 = Random(Numel(wd), 11);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 8, 5, 5] X) => (float Y) {
      a = Conv(X, W1)
      b = Conv(X, W2)
      Y = Add(a, b)
    })",
                                       {{"W1", wd, w1}, {"W2", wd, w2}}));
  BOOST_TEST(Decoded(r).ops.size() == 2u);
  Dims xd = {1, 8, 5, 5}, yd;
  Floats x = Random(Numel(xd), 12);
  Floats a = RefConv2d(x, xd, w1, wd, nullptr, {}, &yd);
  Floats b = RefConv2d(x, xd, w2, wd, nullptr, {}, &yd);
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], a, DotTolerance(8), 1e-4));
}

// Conv -> BatchNormalization -> Relu: BN folded into new constant weights and bias.
BOOST_AUTO_TEST_CASE(batchnorm_folds_into_conv) {
  Dims wd = {6, 4, 3, 3};
  Floats w = Random(Numel(wd), 13), b = Random(6, 14);
  Floats gamma = Random(6, 15, 0.5f, 1.5f), beta = Random(6, 16), mean = Random(6, 17),
         var = Random(6, 18, 0.2f, 2.0f);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4, 7, 7] X) => (float Y) {
      c = Conv <pads = [1, 1, 1, 1]> (X, W, B)
      n = BatchNormalization <epsilon = 0.001> (c, G, Be, M, V)
      Y = Relu(n)
    })",
                                       {{"W", wd, w},
                                        {"B", {6}, b},
                                        {"G", {6}, gamma},
                                        {"Be", {6}, beta},
                                        {"M", {6}, mean},
                                        {"V", {6}, var}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 1u);
  BOOST_TEST(region.ops[0].post_ops.size() == 1u);
  BOOST_REQUIRE(r.code.constants.size() == 2u);  // the folded weights and bias, both new
  for (const compiler::ExternalConstant& c : r.code.constants) {
    BOOST_TEST(c.value == compiler::kNoValue);
    BOOST_TEST(c.data != nullptr);
  }
  Dims xd = {3, 4, 7, 7}, yd;
  Floats x = Random(Numel(xd), 19);
  Floats want = RefConv2d(x, xd, w, wd, &b, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd);
  for (size_t i = 0; i < want.size(); ++i) {
    int64_t ch = (i / 49) % 6;
    double v = (want[i] - mean[ch]) / std::sqrt(var[ch] + 0.001) * gamma[ch] + beta[ch];
    want[i] = static_cast<float>(std::max(v, 0.0));
  }
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], want, DotTolerance(36) * 3, 1e-4));
}

BOOST_AUTO_TEST_CASE(batchnorm_alone_runs_in_inference_mode) {
  Floats gamma = Random(5, 20, 0.5f, 1.5f), beta = Random(5, 21), mean = Random(5, 22),
         var = Random(5, 23, 0.2f, 2.0f);
  CompiledRegion r =
      Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 5, 3, 4] X) => (float Y) {
      Y = BatchNormalization(X, G, Be, M, V)
    })",
                        {{"G", {5}, gamma}, {"Be", {5}, beta}, {"M", {5}, mean}, {"V", {5}, var}}));
  BOOST_TEST(static_cast<int>(Decoded(r).ops[0].kind) == static_cast<int>(OpKind::kBatchNorm));
  Dims xd = {2, 5, 3, 4};
  Floats x = Random(Numel(xd), 24), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    int64_t ch = (i / 12) % 5;
    want[i] =
        static_cast<float>((x[i] - mean[ch]) / std::sqrt(var[ch] + 1e-5) * gamma[ch] + beta[ch]);
  }
  BOOST_TEST(Close(r.Run({{xd, x}}, {xd})[0], want, 1e-5, 1e-5));
}

// ---- MatMul / Gemm -------------------------------------------------------------------------

// matmul + bias + erf-gelu (the pattern PyTorch exports) -> one MatMul with bias and a gelu
// post-op.
BOOST_AUTO_TEST_CASE(matmul_bias_gelu_fuses_into_one_op) {
  Floats w = Random(24 * 40, 25), b = Random(40, 26);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[B, S, 24] X) => (float Y) {
      m = MatMul(X, W)
      a = Add(m, Bias)
      d = Div(a, Sqrt2)
      e = Erf(d)
      p = Add(e, One)
      q = Mul(a, p)
      Y = Mul(q, Half)
    })",
                                       {{"W", {24, 40}, w},
                                        {"Bias", {40}, b},
                                        {"Sqrt2", {}, {1.4142135f}},
                                        {"One", {}, {1.0f}},
                                        {"Half", {}, {0.5f}}}));
  std::vector<std::vector<compiler::NodeId>> groups = FindComposites(*r.graph);
  BOOST_REQUIRE(groups.size() == 1u);
  BOOST_TEST(groups[0].size() == 5u);  // Div, Erf, Add, Mul, Mul (not MatMul and its bias Add)
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 1u);
  BOOST_TEST(region.ops[0].inputs.size() == 3u);  // bias
  BOOST_REQUIRE(region.ops[0].post_ops.size() == 1u);
  BOOST_TEST(static_cast<int>(region.ops[0].post_ops[0].eltwise) ==
             static_cast<int>(EltwiseAlg::kGeluErf));
  Dims xd = {2, 5, 24};
  Floats x = Random(Numel(xd), 27);
  Floats want = RefMatMul(x, xd, w, {24, 40});
  for (size_t i = 0; i < want.size(); ++i) want[i] = RefGelu(want[i] + b[i % 40]);
  BOOST_TEST(Close(r.Run({{xd, x}}, {{2, 5, 40}})[0], want, DotTolerance(24), 1e-4));
}

// The gelu pattern without a producer to fuse into becomes one eltwise op.
BOOST_AUTO_TEST_CASE(gelu_pattern_alone_is_one_eltwise_op) {
  CompiledRegion r =
      Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 7] X) => (float Y) {
      h = Mul(X, Half)
      d = Mul(X, R)
      e = Erf(d)
      p = Add(One, e)
      Y = Mul(h, p)
    })",
                        {{"R", {}, {0.70710678f}}, {"One", {}, {1.0f}}, {"Half", {}, {0.5f}}}));
  BOOST_REQUIRE(Decoded(r).ops.size() == 1u);
  Dims xd = {3, 7};
  Floats x = Random(Numel(xd), 28, -3.0f, 3.0f), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = RefGelu(x[i]);
  BOOST_TEST(Close(r.Run({{xd, x}}, {xd})[0], want, 1e-6, 1e-5));
}

BOOST_AUTO_TEST_CASE(gemm_trans_b_alpha_beta_relu) {
  Floats w = Random(32 * 20, 29), c = Random(32, 30);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 20] A) => (float Y) {
      m = Gemm <transB = 1, alpha = 0.5, beta = 2.0> (A, W, C)
      Y = Relu(m)
    })",
                                       {{"W", {32, 20}, w}, {"C", {32}, c}}));
  BOOST_TEST(Decoded(r).ops.size() == 1u);
  Dims ad = {6, 20};
  Floats a = Random(Numel(ad), 31), want(6 * 32);
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 32; ++j) {
      double acc = 0;
      for (int k = 0; k < 20; ++k) acc += static_cast<double>(a[i * 20 + k]) * w[j * 20 + k];
      want[i * 32 + j] = static_cast<float>(std::max(0.5 * acc + 2.0 * c[j], 0.0));
    }
  BOOST_TEST(Close(r.Run({{ad, a}}, {{6, 32}})[0], want, DotTolerance(20), 1e-4));
}

// Constant weights read row-major or transposed (OneDnnOptions::matmul_weight_layout): every
// setting computes the same products, for MatMul (stored [K, N], batched A collapsed into one
// GEMM, bias) and Gemm (stored [N, K] by transB), at M below and above the measuring threshold.
const OneDnnOptions::WeightLayout kLayouts[] = {
    OneDnnOptions::WeightLayout::kMeasured, OneDnnOptions::WeightLayout::kOneDnn,
    OneDnnOptions::WeightLayout::kRowMajor, OneDnnOptions::WeightLayout::kTransposed};

BOOST_DATA_TEST_CASE(weight_layouts_compute_the_same_products,
                     data::make({0, 1, 2, 3}) * data::make({int64_t{2}, int64_t{64}}), layout, m) {
  OneDnnOptions options;
  options.matmul_weight_layout = kLayouts[layout];
  Floats w = Random(96 * 80, 120), b = Random(80, 121), g = Random(80 * 96, 122);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[B, S, 96] X) => (float Y, float Z) {
      m = MatMul(X, W)
      Y = Add(m, Bias)
      f = Flatten <axis = 2> (Y)
      Z = Gemm <transB = 1> (f, G)
    })",
                                       {{"W", {96, 80}, w}, {"Bias", {80}, b}, {"G", {96, 80}, g}}),
                             options);
  Dims xd = {2, m / 2, 96};
  Floats x = Random(Numel(xd), 123);
  Floats y = RefMatMul(x, xd, w, {96, 80});
  for (size_t i = 0; i < y.size(); ++i) y[i] += b[i % 80];
  Floats z(static_cast<size_t>(m) * 96);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < 96; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < 80; ++k) acc += static_cast<double>(y[i * 80 + k]) * g[j * 80 + k];
      z[i * 96 + j] = static_cast<float>(acc);
    }
  std::vector<Floats> got = r.Run({{xd, x}}, {{2, m / 2, 80}, {m, 96}});
  BOOST_TEST(Close(got[0], y, DotTolerance(96), 1e-4));
  // Z's inputs carry Y's rounding; its error bound adds the second product's.
  BOOST_TEST(Close(got[1], z, DotTolerance(80) * 8.0, 1e-4));
  RegionStats s = r.region().stats();
  bool measured = kLayouts[layout] == OneDnnOptions::WeightLayout::kMeasured && m == 64;
  BOOST_TEST(s.layouts_measured == (measured ? 2 : 0));  // 2*48*40 MACs < 2^16 <= 64*96*80
}

// Gemm with a run-time B (no constant to fold alpha into) and trans_a: alpha as output scale.
BOOST_AUTO_TEST_CASE(gemm_runtime_operands_trans_a_alpha) {
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[7, 5] A, float[7, 3] B) => (float Y) {
      Y = Gemm <transA = 1, alpha = 3.0, beta = 0.25> (A, B, C)
    })",
                                       {{"C", {1, 3}, {1.0f, 2.0f, 3.0f}}}));
  Floats a = Random(35, 32), b = Random(21, 33), want(15);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) {
      double acc = 0;
      for (int k = 0; k < 7; ++k) acc += static_cast<double>(a[k * 5 + i]) * b[k * 3 + j];
      want[i * 3 + j] = static_cast<float>(3.0 * acc + 0.25 * (j + 1));
    }
  BOOST_TEST(
      Close(r.Run({{{7, 5}, a}, {{7, 3}, b}}, {{5, 3}})[0], want, DotTolerance(7) * 3, 1e-4));
}

BOOST_AUTO_TEST_CASE(batched_matmul_of_two_inputs) {
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[B, 4, 6] X, float[B, 6, 5] Z) => (float Y) {
      Y = MatMul(X, Z)
    })"));
  Dims xd = {3, 4, 6}, zd = {3, 6, 5};
  Floats x = Random(Numel(xd), 34), z = Random(Numel(zd), 35);
  BOOST_TEST(Close(r.Run({{xd, x}, {zd, z}}, {{3, 4, 5}})[0], RefMatMul(x, xd, z, zd),
                   DotTolerance(6), 1e-4));
}

// ---- Pooling -------------------------------------------------------------------------------

struct PoolCase {
  const char* name;
  const char* op;
  Dims kernel, strides, pads;
  bool include_pad;
};
std::ostream& operator<<(std::ostream& os, const PoolCase& c) { return os << c.name; }

const PoolCase kPoolCases[] = {
    {"max_3x3_s2_p1", "MaxPool", {3, 3}, {2, 2}, {1, 1, 1, 1}, false},
    {"max_2x2", "MaxPool", {2, 2}, {2, 2}, {0, 0, 0, 0}, false},
    {"avg_3x3_exclude_pad", "AveragePool", {3, 3}, {1, 1}, {1, 1, 1, 1}, false},
    {"avg_3x3_include_pad", "AveragePool", {3, 3}, {2, 2}, {1, 1, 1, 1}, true},
    {"avg_2x3_asym_pads", "AveragePool", {2, 3}, {1, 2}, {0, 1, 1, 0}, false},
};

BOOST_DATA_TEST_CASE(pool_matches_reference, data::make(kPoolCases), pc) {
  std::string text = std::string(
                         "<ir_version: 8, opset_import: [\"\" : 17]>\n"
                         "g (float[N, 5, 9, 10] X) => (float Y) {\n  Y = ") +
                     pc.op + " <kernel_shape = " + Ints(pc.kernel) +
                     ", strides = " + Ints(pc.strides) + ", pads = " + Ints(pc.pads) +
                     (std::string(pc.op) == "AveragePool"
                          ? ", count_include_pad = " + std::to_string(pc.include_pad ? 1 : 0)
                          : std::string()) +
                     "> (X)\n}";
  CompiledRegion r = Compile(MakeGraph(text));
  Dims xd = {2, 5, 9, 10}, yd;
  Floats x = Random(Numel(xd), 36);
  Floats want = RefPool2d(x, xd, std::string(pc.op) == "MaxPool", pc.kernel, pc.strides, pc.pads,
                          pc.include_pad, &yd);
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], want, 1e-6, 1e-5));
}

BOOST_AUTO_TEST_CASE(global_pools_after_conv) {
  Dims wd = {16, 3, 3, 3};
  Floats w = Random(Numel(wd), 37);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3, 8, 8] X) => (float A, float M) {
      c = Conv <pads = [1, 1, 1, 1]> (X, W)
      A = GlobalAveragePool(c)
      M = GlobalMaxPool(c)
    })",
                                       {{"W", wd, w}}));
  Dims xd = {2, 3, 8, 8}, cd;
  Floats x = Random(Numel(xd), 38);
  Floats c = RefConv2d(x, xd, w, wd, nullptr, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &cd);
  Floats avg(32), mx(32, -INFINITY);
  for (int p = 0; p < 32; ++p) {
    double s = 0;
    for (int k = 0; k < 64; ++k) {
      s += c[p * 64 + k];
      mx[p] = std::max(mx[p], c[p * 64 + k]);
    }
    avg[p] = static_cast<float>(s / 64);
  }
  std::vector<Floats> got = r.Run({{xd, x}}, {{2, 16, 1, 1}, {2, 16, 1, 1}});
  BOOST_TEST(Close(got[0], avg, DotTolerance(27), 1e-4));
  BOOST_TEST(Close(got[1], mx, DotTolerance(27), 1e-4));
}

// The implementation and operands of each step of one kind ("pool", "conv") a profiled run
// reports.
struct StepsOf : RegionProfiler {
  explicit StepsOf(std::string k) : kind(std::move(k)) {}
  std::string kind;
  std::vector<std::string> impls, shapes;
  void Record(const RegionStepSample& s) override {
    if (s.kind != kind) return;
    impls.emplace_back(s.impl);
    shapes.emplace_back(s.shapes);
  }
};

// MaxPools between convolutions (blocked layouts, 12 channels: a half-padded block) run kiln's
// own kernel on AVX2 CPUs (oneDNN 2.6's is ~5x slower there), with ceil_mode and padded
// windows as googlenet has them; the results match the reference loops.
BOOST_AUTO_TEST_CASE(max_pools_between_convs_run_kilns_blocked_kernel) {
  Dims wd = {12, 3, 3, 3};
  Floats w = Random(Numel(wd), 60);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3, 10, 10] X) => (float A, float B) {
      c = Conv <pads = [1, 1, 1, 1]> (X, W)
      A = MaxPool <kernel_shape = [3, 3], strides = [2, 2], ceil_mode = 1> (c)
      B = MaxPool <kernel_shape = [3, 3], pads = [1, 1, 1, 1]> (c)
    })",
                                       {{"W", wd, w}}));
  Dims xd = {2, 3, 10, 10}, cd, ad, bd;
  Floats x = Random(Numel(xd), 61);
  Floats c = RefConv2d(x, xd, w, wd, nullptr, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &cd);
  // ceil_mode: a 5th window over rows / columns 8..10, i.e. one row / column of padding.
  Floats a = RefPool2d(c, cd, true, {3, 3}, {2, 2}, {0, 0, 1, 1}, false, &ad);
  Floats b = RefPool2d(c, cd, true, {3, 3}, {1, 1}, {1, 1, 1, 1}, false, &bd);
  BOOST_REQUIRE(ad == (Dims{2, 12, 5, 5}));
  std::vector<Floats> got;
  StepsOf profiler("pool");
  BOOST_REQUIRE(r.TryRun({{xd, x}}, {ad, bd}, &got, &profiler).ok());
  BOOST_TEST(Close(got[0], a, DotTolerance(27), 1e-4));
  BOOST_TEST(Close(got[1], b, DotTolerance(27), 1e-4));
  bool avx2 = __builtin_cpu_supports("avx2");
  BOOST_TEST(profiler.impls.size() == 2u);
  for (const std::string& impl : profiler.impls) BOOST_TEST((impl == "kiln:avx2") == avx2, impl);
}

// A Conformer's depthwise Conv1d (kernel 15, pads 7) and a strided, dilated, asymmetric one,
// after a pointwise Conv1d (blocked input) and straight on the region's input (plain), with a
// SiLU-like sigmoid post-op: run as oneDNN's 2-D depthwise JIT kernel on a padded copy (not its
// gemm convolution), against the reference loops (a 2-D convolution with H = 1).
struct Dw1dCase {
  const char* name;
  int64_t k, stride, dilation, pad_l, pad_r;
  bool after_pointwise;
};
std::ostream& operator<<(std::ostream& os, const Dw1dCase& c) { return os << c.name; }
const Dw1dCase kDw1dCases[] = {
    {"conformer_k15_p7_after_pointwise", 15, 1, 1, 7, 7, true},
    {"k15_p7_on_the_input", 15, 1, 1, 7, 7, false},
    {"k5_stride2_dilation2_asymmetric", 5, 2, 2, 3, 1, true},
    {"k3_no_pads", 3, 1, 1, 0, 0, true},
};

BOOST_DATA_TEST_CASE(depthwise_conv1d_runs_the_2d_depthwise_kernel, data::make(kDw1dCases), dc) {
  const int64_t c = 20, w_in = 23;
  Dims pwd = {c, c, 1}, dwd = {c, 1, dc.k};
  Floats pw = Random(Numel(pwd), 70), dw = Random(Numel(dwd), 71), b = Random(c, 72);
  auto ints = [](std::vector<int64_t> v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return "[" + s + "]";
  };
  std::string attrs = "group = 20, kernel_shape = " + ints({dc.k}) +
                      ", strides = " + ints({dc.stride}) + ", dilations = " + ints({dc.dilation}) +
                      ", pads = " + ints({dc.pad_l, dc.pad_r});
  std::string first = dc.after_pointwise ? "p = Conv(X, PW)" : "";
  std::string src = dc.after_pointwise ? "p" : "X";
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 20, 23] X) => (float Y) {
      )" + first + R"(
      d = Conv <)" + attrs + R"(> ()" + src + R"(, DW, B)
      s = Sigmoid(d)
      Y = Mul(d, s)
    })",
                                       {{"PW", pwd, pw}, {"DW", dwd, dw}, {"B", {c}, b}}));
  Dims xd = {2, c, w_in};
  Floats x = Random(Numel(xd), 73);
  Dims pd4;
  Floats p = dc.after_pointwise
                 ? RefConv2d(x, {2, c, 1, w_in}, pw, {c, c, 1, 1}, nullptr, {}, &pd4)
                 : x;
  Dims yd4;
  ConvParams cp;
  cp.group = c, cp.strides = {1, dc.stride}, cp.dilations = {1, dc.dilation};
  cp.pads = {0, dc.pad_l, 0, dc.pad_r};
  Floats want = RefConv2d(p, {2, c, 1, w_in}, dw, {c, 1, 1, dc.k}, &b, cp, &yd4);
  for (float& v : want) v = v / (1.0f + std::exp(-v));
  Dims yd = {2, c, yd4[3]};
  std::vector<Floats> got;
  StepsOf profiler("conv");
  BOOST_REQUIRE(r.TryRun({{xd, x}}, {yd}, &got, &profiler).ok());
  BOOST_TEST(Close(got[0], want, DotTolerance(c + dc.k), 1e-4));
  if (__builtin_cpu_supports("avx2")) {
    BOOST_REQUIRE(!profiler.impls.empty());
    BOOST_TEST(profiler.impls.back() == "jit_dw:avx2", profiler.impls.back());
    BOOST_TEST(profiler.shapes.back().find("x1x") != std::string::npos, profiler.shapes.back());
  }
}

// DenseNet's pre-activation BatchNormalization -> Relu on a blocked tensor (a conv's output,
// pooled so the BN cannot fold into the conv) runs as one batch normalization with the Relu
// fused in, unless the normalized tensor is read elsewhere (here: also a region output), where
// the Relu stays its own step. Both agree with the reference loops.
BOOST_DATA_TEST_CASE(batchnorm_then_relu_is_one_step, data::make({false, true}), bn_is_output) {
  Dims wd = {16, 3, 3, 3};
  Floats w = Random(Numel(wd), 70), gamma = Random(16, 71, 0.5f, 1.5f), beta = Random(16, 72),
         mean = Random(16, 73), var = Random(16, 74, 0.2f, 2.0f);
  std::string outs = bn_is_output ? "float Y, float B" : "float Y";
  CompiledRegion r = Compile(
      MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3, 10, 10] X) => ()" + outs + R"() {
      c = Conv <pads = [1, 1, 1, 1]> (X, W)
      p = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (c)
      B = BatchNormalization(p, G, Be, M, V)
      Y = Relu(B)
    })",
                {{"W", wd, w}, {"G", {16}, gamma}, {"Be", {16}, beta}, {"M", {16}, mean},
                 {"V", {16}, var}}));
  Dims xd = {2, 3, 10, 10}, cd, pd;
  Floats x = Random(Numel(xd), 75);
  Floats c = RefConv2d(x, xd, w, wd, nullptr, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &cd);
  Floats bn = RefPool2d(c, cd, true, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, &pd);
  for (size_t i = 0; i < bn.size(); ++i) {
    int64_t ch = (i / 25) % 16;
    bn[i] = static_cast<float>((bn[i] - mean[ch]) / std::sqrt(var[ch] + 1e-5) * gamma[ch] +
                               beta[ch]);
  }
  Floats y = bn;
  for (float& v : y) v = std::max(v, 0.0f);
  std::vector<Dims> shapes = {pd};
  if (bn_is_output) shapes.push_back(pd);
  std::vector<Floats> got;
  StepsOf bnorms("batch_norm"), eltwises("eltwise");
  BOOST_REQUIRE(r.TryRun({{xd, x}}, shapes, &got, &bnorms).ok());
  BOOST_REQUIRE(r.TryRun({{xd, x}}, shapes, &got, &eltwises).ok());
  BOOST_TEST(Close(got[0], y, DotTolerance(27) * 4, 1e-4));
  if (bn_is_output) BOOST_TEST(Close(got[1], bn, DotTolerance(27) * 4, 1e-4));
  BOOST_TEST(bnorms.impls.size() == 1u);
  BOOST_TEST(eltwises.impls.size() == (bn_is_output ? 1u : 0u));
  for (const std::string& impl : bnorms.impls) BOOST_TEST(impl.find("ref") != 0, impl);
}

// Groups of 4 channels (resnext's first stage) have no blocked oneDNN convolution on AVX2: the
// runtime pairs them into groups of 8 with block-diagonal weights ([2, 8, 8, 3, 3] for 16
// channels in 4 groups, not [4, 4, 4, 3, 3]) and runs oneDNN's JIT; the result is the grouped
// convolution's. 8 channels per group stay as they are.
BOOST_DATA_TEST_CASE(four_channel_groups_run_paired, data::make({4, 2}), groups) {
  Dims wd = {16, 16 / groups, 3, 3};
  Floats w = Random(Numel(wd), 62), b = Random(16, 63);
  CompiledRegion r = Compile(MakeGraph(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n g (float[N, 16, 9, 9] X) => (float Y) {\n"
      "  c = Conv <pads = [1, 1, 1, 1], group = " + std::to_string(groups) + "> (X, W, B)\n"
      "  Y = Relu(c)\n}",
      {{"W", wd, w}, {"B", {16}, b}}));
  Dims xd = {2, 16, 9, 9}, yd;
  Floats x = Random(Numel(xd), 64);
  Floats want = Relu(RefConv2d(x, xd, w, wd, &b, {groups, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd));
  std::vector<Floats> got;
  StepsOf steps("conv");
  BOOST_REQUIRE(r.TryRun({{xd, x}}, {yd}, &got, &steps).ok());
  BOOST_TEST(Close(got[0], want, DotTolerance(9 * 16 / groups), 1e-4));
  BOOST_REQUIRE(steps.shapes.size() == 1u);
  bool pairs = groups == 4 && __builtin_cpu_supports("avx2") && !__builtin_cpu_supports("avx512f");
  std::string weights = groups == 2 || pairs ? ", 2x8x8x3x3:" : ", 4x4x4x3x3:";
  BOOST_TEST(steps.shapes[0].find(weights) != std::string::npos, steps.shapes[0]);
  if (pairs) BOOST_TEST(steps.impls[0].rfind("jit", 0) == 0u, steps.impls[0]);
}

// ---- Softmax, LayerNorm, eltwise, binary, concat -------------------------------------------

BOOST_DATA_TEST_CASE(softmax_any_axis, data::make({0, 1, 2}) * data::make({false, true}), axis,
                     log) {
  std::string op = log ? "LogSoftmax" : "Softmax";
  CompiledRegion r = Compile(MakeGraph(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n g (float[3, 4, 9] X) => (float Y) {\n Y = " +
      op + " <axis = " + std::to_string(axis) + "> (X)\n}"));
  Dims xd = {3, 4, 9};
  Floats x = Random(Numel(xd), 39, -4.0f, 4.0f);
  BOOST_TEST(Close(r.Run({{xd, x}}, {xd})[0], RefSoftmax(x, xd, axis, log), 1e-6, 1e-5));
}

BOOST_DATA_TEST_CASE(layernorm_axis, data::make({-1, 1}), axis) {
  Dims norm = axis == -1 ? Dims{16} : Dims{6, 16};
  Floats scale = Random(Numel(norm), 40, 0.5f, 1.5f), bias = Random(Numel(norm), 41);
  CompiledRegion r = Compile(MakeGraph(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n g (float[B, 6, 16] X) => (float Y) {\n"
      " Y = LayerNormalization <axis = " +
          std::to_string(axis) + ", epsilon = 0.0001> (X, S, Bi)\n}",
      {{"S", norm, scale}, {"Bi", norm, bias}}));
  Dims xd = {3, 6, 16};
  Floats x = Random(Numel(xd), 42, -2.0f, 3.0f);
  Floats want = RefLayerNorm(x, xd, axis == -1 ? 2 : 1, scale, bias, 1e-4f);
  BOOST_TEST(Close(r.Run({{xd, x}}, {xd})[0], want, 1e-5, 1e-4));
}

struct EltCase {
  const char* op;
  const char* attrs;
  double (*ref)(double);
};
std::ostream& operator<<(std::ostream& os, const EltCase& c) { return os << c.op; }

const EltCase kEltCases[] = {
    {"Relu", "", [](double x) { return std::max(x, 0.0); }},
    {"LeakyRelu", "<alpha = 0.2>", [](double x) { return x > 0 ? x : 0.2 * x; }},
    {"Sigmoid", "", [](double x) { return 1 / (1 + std::exp(-x)); }},
    {"Tanh", "", [](double x) { return std::tanh(x); }},
    {"HardSwish", "", [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }},
    {"Elu", "<alpha = 0.7>", [](double x) { return x > 0 ? x : 0.7 * (std::exp(x) - 1); }},
    {"Exp", "", [](double x) { return std::exp(x); }},
    {"Abs", "", [](double x) { return std::fabs(x); }},
    {"Neg", "", [](double x) { return -x; }},
    {"Softplus", "", [](double x) { return std::log1p(std::exp(x)); }},
};

BOOST_DATA_TEST_CASE(eltwise_matches_reference, data::make(kEltCases), ec) {
  CompiledRegion r = Compile(MakeGraph(std::string("<ir_version: 8, opset_import: [\"\" : 17]>\n"
                                                   "g (float[N, 3, 5] X) => (float Y) {\n Y = ") +
                                       ec.op + " " + ec.attrs + " (X)\n}"));
  Dims xd = {2, 3, 5};
  Floats x = Random(Numel(xd), 43, -4.0f, 4.0f), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = static_cast<float>(ec.ref(x[i]));
  BOOST_TEST(Close(r.Run({{xd, x}}, {xd})[0], want, 1e-6, 1e-5));
}

// The same ops fused into a conv as post-ops.
BOOST_DATA_TEST_CASE(eltwise_as_conv_post_op, data::make(kEltCases), ec) {
  Dims wd = {8, 4, 1, 1};
  Floats w = Random(Numel(wd), 61);
  CompiledRegion r = Compile(MakeGraph(std::string("<ir_version: 8, opset_import: [\"\" : 17]>\n"
                                                   "g (float[N, 4, 5, 5] X) => (float Y) {\n"
                                                   " c = Conv(X, W)\n Y = ") +
                                           ec.op + " " + ec.attrs + " (c)\n}",
                                       {{"W", wd, w}}));
  BOOST_TEST(Decoded(r).ops.size() == 1u);
  Dims xd = {2, 4, 5, 5}, yd;
  Floats x = Random(Numel(xd), 62, -2.0f, 2.0f);
  Floats want = RefConv2d(x, xd, w, wd, nullptr, {}, &yd);
  for (float& v : want) v = static_cast<float>(ec.ref(v));
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], want, 1e-5, 1e-5));
}

BOOST_AUTO_TEST_CASE(clip_with_constant_bounds) {
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[10] X) => (float Y) {
      Y = Clip(X, Lo, Hi)
    })",
                                       {{"Lo", {}, {-0.5f}}, {"Hi", {}, {0.25f}}}));
  Floats x = Random(10, 44), want(10);
  for (int i = 0; i < 10; ++i) want[i] = std::clamp(x[i], -0.5f, 0.25f);
  BOOST_TEST(Close(r.Run({{{10}, x}}, {{10}})[0], want, 0, 1e-7));
}

BOOST_AUTO_TEST_CASE(binary_broadcasts_either_operand) {
  Floats k = Random(5, 45);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 5, 3] X, float[3] Z) => (float Y) {
      a = Mul(K, X)
      s = Sub(a, Z)
      Y = Div(s, Two)
    })",
                                       {{"K", {5, 1}, k}, {"Two", {}, {2.0f}}}));
  Dims xd = {2, 5, 3};
  Floats x = Random(Numel(xd), 46), z = Random(3, 47), want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = (k[(i / 3) % 5] * x[i] - z[i % 3]) / 2.0f;
  BOOST_TEST(Close(r.Run({{xd, x}, {{3}, z}}, {xd})[0], want, 1e-6, 1e-6));
}

// Concat of conv outputs (blocked inside the region) and of a region input.
BOOST_AUTO_TEST_CASE(concat_of_blocked_and_plain_tensors) {
  Dims wd = {16, 8, 1, 1};
  Floats w = Random(Numel(wd), 48);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 8, 4, 4] X) => (float Y) {
      c = Conv(X, W)
      r = Relu(c)
      Y = Concat <axis = 1> (r, X, c)
    })",
                                       {{"W", wd, w}}));
  Dims xd = {2, 8, 4, 4}, cd;
  Floats x = Random(Numel(xd), 49);
  Floats c = RefConv2d(x, xd, w, wd, nullptr, {}, &cd);
  Floats want;
  for (int n = 0; n < 2; ++n) {
    for (int i = 0; i < 16 * 16; ++i) want.push_back(std::max(c[n * 256 + i], 0.0f));
    for (int i = 0; i < 8 * 16; ++i) want.push_back(x[n * 128 + i]);
    for (int i = 0; i < 16 * 16; ++i) want.push_back(c[n * 256 + i]);
  }
  BOOST_TEST(Close(r.Run({{xd, x}}, {{2, 40, 4, 4}})[0], want, DotTolerance(8), 1e-4));
}

// A region with several outputs, one of them also read inside the region.
BOOST_AUTO_TEST_CASE(intermediate_that_is_also_an_output) {
  Dims wd = {8, 4, 3, 3};
  Floats w = Random(Numel(wd), 50);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 4, 6, 6] X) => (float C, float Y) {
      C = Conv <pads = [1, 1, 1, 1]> (X, W)
      Y = Sigmoid(C)
    })",
                                       {{"W", wd, w}}));
  Dims xd = {1, 4, 6, 6}, cd;
  Floats x = Random(Numel(xd), 51);
  Floats c = RefConv2d(x, xd, w, wd, nullptr, {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &cd);
  Floats y(c.size());
  for (size_t i = 0; i < c.size(); ++i) y[i] = 1.0f / (1.0f + std::exp(-c[i]));
  std::vector<Floats> got = r.Run({{xd, x}}, {cd, cd});
  BOOST_TEST(Close(got[0], c, DotTolerance(36), 1e-4));
  BOOST_TEST(Close(got[1], y, DotTolerance(36), 1e-4));
}

// 1-D conv, checked as a 2-D conv of height 1; the spatial dim is symbolic (no plan at load).
BOOST_AUTO_TEST_CASE(conv1d_with_symbolic_length) {
  Dims wd = {6, 4, 3};
  Floats w = Random(Numel(wd), 52);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4, L] X) => (float Y) {
      Y = Conv <strides = [2], pads = [1, 2]> (X, W)
    })",
                                       {{"W", wd, w}}));
  BOOST_TEST(r.region().stats().plans_built == 0);
  for (int64_t len : {9, 16}) {
    Dims xd = {2, 4, len}, yd;
    Floats x = Random(Numel(xd), 53);
    Floats want = RefConv2d(x, {2, 4, 1, len}, w, {6, 4, 1, 3}, nullptr,
                            {1, {1, 2}, {1, 1}, {0, 1, 0, 2}}, &yd);
    BOOST_TEST(Close(r.Run({{xd, x}}, {{2, 6, yd[3]}})[0], want, DotTolerance(12), 1e-4));
  }
  BOOST_TEST(r.region().stats().plans_built == 2);
}

// A constant [C, 1, 1] Add after a bias-less conv becomes its bias (a new [C] constant viewing
// the same bytes); Mul by a per-channel constant stays a binary post-op.
BOOST_AUTO_TEST_CASE(conv_add_constant_becomes_bias_and_mul_a_binary_post_op) {
  Dims wd = {4, 2, 3, 3};
  Floats w = Random(Numel(wd), 54), add = Random(4, 55), mul = Random(4, 56);
  CompiledRegion r =
      Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 2, 6, 6] X) => (float Y) {
      c = Conv(X, W)
      a = Add(c, A)
      Y = Mul(a, M)
    })",
                        {{"W", wd, w}, {"A", {4, 1, 1}, add}, {"M", {1, 4, 1, 1}, mul}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(region.ops.size() == 1u);
  BOOST_TEST(region.ops[0].inputs.size() == 3u);
  BOOST_REQUIRE(region.ops[0].post_ops.size() == 1u);
  BOOST_TEST(static_cast<int>(region.ops[0].post_ops[0].kind) ==
             static_cast<int>(PostOpKind::kBinary));
  BOOST_REQUIRE(r.code.constants.size() == 3u);
  BOOST_TEST(r.code.constants[1].data != nullptr);  // the bias: new, [4]
  BOOST_TEST(r.code.constants[1].data->dims() == (Dims{4}));
  Dims xd = {2, 2, 6, 6}, yd;
  Floats x = Random(Numel(xd), 57);
  Floats want = RefConv2d(x, xd, w, wd, &add, {}, &yd);
  for (size_t i = 0; i < want.size(); ++i) want[i] *= mul[(i / 16) % 4];
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], want, DotTolerance(18), 1e-4));
}

// Weights that are region inputs (not constants) are reordered per run, inside the plan.
BOOST_AUTO_TEST_CASE(conv_and_gemm_with_runtime_weights) {
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4, 6, 6] X, float[8, 2, 3, 3] W, float[3, 5] A, float[5, 2] B, float[3, 2] C)
        => (float Y, float G) {
      Y = Conv <group = 2, pads = [1, 1, 1, 1]> (X, W)
      G = Gemm <alpha = 2.0, beta = 2.0> (A, B, C)
    })"));
  Dims xd = {2, 4, 6, 6}, wd = {8, 2, 3, 3}, yd;
  Floats x = Random(Numel(xd), 70), w = Random(Numel(wd), 71);
  Floats a = Random(15, 72), b = Random(10, 73), c = Random(6, 74);
  Floats want = RefConv2d(x, xd, w, wd, nullptr, {2, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &yd);
  Floats gemm = RefMatMul(a, {3, 5}, b, {5, 2});
  for (size_t i = 0; i < gemm.size(); ++i) gemm[i] = 2 * gemm[i] + 2 * c[i];
  std::vector<Floats> got = r.Run({{xd, x}, {wd, w}, {{3, 5}, a}, {{5, 2}, b}, {{3, 2}, c}},
                                  {yd, {3, 2}});
  BOOST_TEST(Close(got[0], want, DotTolerance(18), 1e-4));
  BOOST_TEST(Close(got[1], gemm, DotTolerance(5) * 2, 1e-4));
}

// MatMul with a constant batched B of lower rank than A (broadcast over A's leading dims).
BOOST_AUTO_TEST_CASE(matmul_constant_batched_weights_broadcast) {
  Floats w = Random(2 * 6 * 3, 75);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 2, 5, 6] X) => (float Y) {
      Y = MatMul(X, W)
    })", {{"W", {2, 6, 3}, w}}));
  Dims xd = {4, 2, 5, 6};
  Floats x = Random(Numel(xd), 76), want;
  for (int i = 0; i < 4; ++i) {
    Floats xi(x.begin() + i * 60, x.begin() + (i + 1) * 60);
    Floats yi = RefMatMul(xi, {2, 5, 6}, w, {2, 6, 3});
    want.insert(want.end(), yi.begin(), yi.end());
  }
  BOOST_TEST(Close(r.Run({{xd, x}}, {{4, 2, 5, 3}})[0], want, DotTolerance(6), 1e-4));
}

// ---- Codegen errors ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(codegen_errors_name_the_node_or_value) {
  compiler::Graph g = MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[4] X, float[4] Z) => (float Y, float E) {
      a = Relu(X)
      Y = Add(a, Z)
      E = Erf(X)
    })");
  NodeIdOf id{g};
  // Z is read but not passed as an input.
  StatusOr<compiler::ExternalCode> c =
      Codegen(g, {id("a"), id("Y")}, {*g.FindValue("X")}, {*g.FindValue("Y")});
  BOOST_TEST(c.status().code() == StatusCode::kInvalidArgument);
  BOOST_TEST(c.status().message() ==
             "oneDNN codegen: node 'Add_1' (Add): value 'Z' is neither a "
             "region input nor a constant");
  c = Codegen(g, {id("E")}, {*g.FindValue("X")}, {*g.FindValue("E")});
  BOOST_TEST(c.status().message() == "oneDNN codegen: node 'Erf_2' (Erf): not supported by oneDNN");
  c = Codegen(g, {id("a")}, {*g.FindValue("X")}, {*g.FindValue("Y")});
  BOOST_TEST(c.status().message() == "oneDNN codegen: output 'Y' is not produced by the region");
  c = Codegen(g, {99}, {}, {});
  BOOST_TEST(c.status().message() == "oneDNN codegen: node id 99 is out of range");
}

// ---- Support predicates --------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(is_supported_rejects_what_onednn_cannot_run) {
  compiler::Graph g = MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 4, 6, 6] X, int64[3] I, float[2, 1] P, float[1, 3] Q) => (float A, int64 B,
        float C, float D, float E, float F) {
      A = Relu(X)
      B = Neg(I)
      C = Erf(X)
      D = Add(P, Q)
      E = AveragePool <kernel_shape = [3, 3], ceil_mode = 1, count_include_pad = 1> (X)
      F = Conv(X, W)
    })",
                                {{"W", {2, 4, 1, 1}, Random(8, 1)}});
  auto supported = [&](const char* out) {
    return IsSupported(g, g.value(*g.FindValue(out)).producer);
  };
  BOOST_TEST(supported("A"));
  BOOST_TEST(!supported("B"));  // int64
  BOOST_TEST(!supported("C"));  // Erf alone
  BOOST_TEST(!supported("D"));  // both operands broadcast
  BOOST_TEST(!supported("E"));  // ceil_mode with count_include_pad
  BOOST_TEST(supported("F"));
}

}  // namespace
}  // namespace kiln::onednn::testing
