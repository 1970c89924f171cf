// Binary ops with a constant scalar operand (activations written by hand: x * clip(x + 3, 0, 6)
// / 6) run as oneDNN eltwise ops and post-ops, never as binary primitives: oneDNN 2.6 runs a
// scalar operand on blocked layouts with its reference kernel (234 ms for one 1x32x160x240 add,
// 50x slower end to end than the JIT on an OCR model).
#define BOOST_TEST_MODULE onednn_scalar_binary_test
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>

#include "external/onednn/region.h"
#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

// The reference for the tests' 3x3 convolutions with one pixel of padding.
Floats PaddedConv3x3(const Floats& x, const Dims& xd, const Floats& w, const Dims& wd, Dims* yd) {
  return RefConv2d(x, xd, w, wd, nullptr, ConvParams{1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, yd);
}

RegionProgram Decoded(const CompiledRegion& r) {
  StatusOr<RegionProgram> region = DecodeRegion(r.code.blob.data(), r.code.blob.size());
  BOOST_REQUIRE(region.ok());
  return *region;
}

// Every form: the constant on either side, each op, a one-element tensor of rank 1 too.
BOOST_AUTO_TEST_CASE(scalar_binaries_are_eltwise_ops) {
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 8, 5, 7] X) => (float Y) {
      a = Add(X, three)
      b = Sub(one, a)
      c = Mul(two, b)
      d = Div(c, four)
      e = Max(d, half)
      f = Sub(e, three)
      Y = Min(f, one)
    })",
                                       {{"three", {}, {3}},
                                        {"one", {1}, {1}},
                                        {"two", {}, {2}},
                                        {"four", {}, {4}},
                                        {"half", {}, {0.5f}}}));
  RegionProgram region = Decoded(r);
  BOOST_REQUIRE(!region.ops.empty());
  for (const Op& op : region.ops) BOOST_TEST((op.kind == OpKind::kEltwise));
  for (int64_t n : {1, 2}) {
    Dims xd = {n, 8, 5, 7};
    Floats x = Random(Numel(xd), 40 + n, -6.0f, 6.0f);
    Floats want(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      float v = 1.0f - (x[i] + 3.0f);
      v = (2.0f * v) / 4.0f;
      v = std::max(v, 0.5f) - 3.0f;
      want[i] = std::min(v, 1.0f);
    }
    // Each op rounds once, as the reference does (x / 4 runs as x * 0.25, exact too); the bound
    // allows one f32 rounding of values up to 10 in case oneDNN contracts alpha * x + beta.
    BOOST_TEST(Close(r.Run({{xd, x}}, {xd})[0], want, 1e-6, 1e-6));
  }
}

// HardSwish as exporters spell it, after a convolution: the standalone scalar ops run as eltwise
// primitives (scalar ops fused after a conv stay binary post-ops); at most one binary primitive,
// the two-tensor Mul.
BOOST_AUTO_TEST_CASE(hardswish_by_hand_after_a_conv) {
  Dims wd = {4, 3, 3, 3};
  Floats w = Random(Numel(wd), 5);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 3, 9, 9] X) => (float Y) {
      x = Conv <pads = [1, 1, 1, 1]> (X, W)
      p = Add(x, three)
      c = Clip(p, zero, six)
      m = Mul(x, c)
      Y = Div(m, six)
    })",
                                       {{"W", wd, w}, {"three", {}, {3}}, {"zero", {}, {0}},
                                        {"six", {}, {6}}}));
  RegionProgram region = Decoded(r);
  int binaries = 0;
  for (const Op& op : region.ops) binaries += op.kind == OpKind::kBinary;
  BOOST_TEST(binaries <= 1);
  Dims xd = {1, 3, 9, 9};
  Floats x = Random(Numel(xd), 9);
  Dims yd;
  Floats conv = PaddedConv3x3(x, xd, w, wd, &yd);
  Floats want(conv.size());
  for (size_t i = 0; i < conv.size(); ++i) {
    float v = conv[i];
    want[i] = v * std::min(std::max(v + 3.0f, 0.0f), 6.0f) / 6.0f;
  }
  // The conv's f32 sums (27 terms) and x / 6 run as x * (1 / 6) (one more rounding).
  BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], want, 1e-5, 1e-5));
}

// Squeeze-excite: the [N, C, 1, 1] scale multiplies the channel-blocked conv output; the runtime
// reorders the small operand into the conv's blocking (oneDNN's row-major broadcast beside a
// blocked tensor is its reference kernel). C = 12 is not a multiple of the block (8 or 16).
BOOST_AUTO_TEST_CASE(squeeze_excite_scale_on_a_blocked_conv_output) {
  Dims wd = {12, 3, 3, 3};
  Floats w = Random(Numel(wd), 21);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 3, 9, 9] X) => (float Y) {
      x = Conv <pads = [1, 1, 1, 1]> (X, W)
      p = GlobalAveragePool(x)
      s = Sigmoid(p)
      Y = Mul(x, s)
    })",
                                       {{"W", wd, w}}));
  for (int64_t n : {1, 2}) {
    Dims xd = {n, 3, 9, 9};
    Floats x = Random(Numel(xd), 22 + n);
    Dims yd;
    Floats conv = PaddedConv3x3(x, xd, w, wd, &yd);
    Floats want(conv.size());
    const int64_t hw = 81;
    for (int64_t c = 0; c < n * 12; ++c) {
      double mean = 0;
      for (int64_t i = 0; i < hw; ++i) mean += conv[c * hw + i];
      float scale = 1.0f / (1.0f + std::exp(-static_cast<float>(mean / hw)));
      for (int64_t i = 0; i < hw; ++i) want[c * hw + i] = conv[c * hw + i] * scale;
    }
    // 27-term f32 conv sums, an 81-term mean and oneDNN's sigmoid (a few ulps).
    BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], want, 1e-5, 1e-5));
  }
}

// The squeeze-excite block of mobilenet_v3 written by hand: 1x1 conv -> + 3 -> clip(0, 6) -> / 6
// (hardsigmoid) scales the features. The scalar ops after the conv stay its post-ops in their
// binary form: as eltwise linear post-ops the zoo's mobilenet_v3_small_by_hand came out ~1e4
// times too large.
BOOST_AUTO_TEST_CASE(hand_written_hardsigmoid_after_a_conv) {
  Dims wd = {8, 8, 1, 1};
  Floats w = Random(Numel(wd), 31);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 8, 6, 6] X) => (float Y) {
      p = GlobalAveragePool(X)
      q = Conv(p, W)
      a = Add(q, three)
      c = Clip(a, zero, six)
      s = Div(c, six)
      Y = Mul(X, s)
    })",
                                       {{"W", wd, w}, {"three", {}, {3}}, {"zero", {}, {0}},
                                        {"six", {}, {6}}}));
  Dims xd = {1, 8, 6, 6};
  Floats x = Random(Numel(xd), 32, -4.0f, 4.0f);
  Floats want(x.size());
  for (int64_t o = 0; o < 8; ++o) {
    double acc = 0;
    for (int64_t i = 0; i < 8; ++i) {
      double mean = 0;
      for (int64_t k = 0; k < 36; ++k) mean += x[i * 36 + k];
      acc += w[o * 8 + i] * (mean / 36);
    }
    float s = std::min(std::max(static_cast<float>(acc) + 3.0f, 0.0f), 6.0f) / 6.0f;
    for (int64_t k = 0; k < 36; ++k) want[o * 36 + k] = x[o * 36 + k] * s;
  }
  // A 36-term mean and an 8-term dot product in f32, one division.
  BOOST_TEST(Close(r.Run({{xd, x}}, {xd})[0], want, 1e-5, 1e-5));
}

}  // namespace
}  // namespace kiln::onednn::testing
