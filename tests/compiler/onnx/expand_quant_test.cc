// Quantization exactly as ONNX defines it: QuantizeLinear's round half to even and saturation,
// per-axis scales, DequantizeLinear of int32, and the integer matrix ops kiln expands at import
// (per-row / per-column zero points, per-channel QLinearConv) against plain loops.
#include <cmath>
#include <string>
#include <vector>

#define BOOST_TEST_MODULE expand_quant_test
#include <boost/test/unit_test.hpp>

#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/onnx/run_text.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler::testing {
namespace {

std::vector<TensorDataRef> Run(const std::string& text, const std::vector<TensorDataRef>& inputs) {
  return CompileAndRunText(text, inputs);
}

BOOST_AUTO_TEST_CASE(quantize_rounds_half_to_even_and_saturates_per_axis) {
  // Row 0 has scale 1 (ties), row 1 scale 0.5 and zero point 10 (saturation at both ends).
  std::string text = Model(13, "(float[2,6] x, float[2] s, int8[2] z) => (int8[2,6] q)",
                           "q = QuantizeLinear <axis = 0> (x, s, z)");
  auto got = Run(text, {F32({2, 6}, {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -100, 100, 0.25, 0.75, 58.5, -69}),
                        F32({2}, {1, 0.5}), MakeTensor(DType::kI8, {2}, {0, 10})});
  // 0.5->0, 1.5->2, 2.5->2, -0.5->-0, -1.5->-2, -2.5->-2; row 1: x/0.5 + 10, clamped to [-128, 127]:
  // -190 -> -128, 210 -> 127, 0.5 -> 0 (+10), 1.5 -> 2 (+10), 117 + 10 = 127, -138 + 10 = -128.
  std::string diff = Compare(*got[0], *MakeTensor(DType::kI8, {2, 6},
                                                  {0, 2, 2, 0, -2, -2, -128, 127, 10, 12, 127, -128}),
                             0, 0);
  BOOST_TEST(diff.empty(), diff);
}

BOOST_AUTO_TEST_CASE(dequantize_int32_bias_is_exact_beyond_float_integers) {
  std::string text = Model(13, "(int32[3] x, float s) => (float[3] y)", "y = DequantizeLinear(x, s)");
  auto got = Run(text, {MakeTensor(DType::kI32, {3}, {16777217, -7, 0}), F32({}, {0.5})});
  // 16777217 is not a float; (x - 0) * 0.5 rounds once, to 8388608.
  std::string diff = Compare(*got[0], *F32({3}, {8388608, -3.5, 0}), 0, 0);
  BOOST_TEST(diff.empty(), diff);
}

BOOST_AUTO_TEST_CASE(matmul_integer_with_per_row_and_per_column_zero_points) {
  const int M = 3, K = 5, N = 4;
  auto A = RandomTensor(DType::kU8, {M, K}, 0, 256, 1);
  auto B = RandomTensor(DType::kI8, {K, N}, -128, 128, 2);
  auto az = MakeTensor(DType::kU8, {M}, {0, 128, 255});
  auto bz = MakeTensor(DType::kI8, {N}, {-128, 0, 5, 127});
  std::string text = Model(13, "(uint8[3,5] a, int8[5,4] b, uint8[3] az, int8[4] bz) => (int32[3,4] y)",
                           "y = MatMulInteger(a, b, az, bz)");
  auto got = Run(text, {A, B, az, bz});
  Nd a = ToNd(A), b = ToNd(B), za = ToNd(az), zb = ToNd(bz);
  Nd want = Generate({M, N}, [&](const std::vector<int64_t>& i) {
    double s = 0;
    for (int64_t k = 0; k < K; ++k) s += (a.at({i[0], k}) - za.at({i[0]})) * (b.at({k, i[1]}) - zb.at({i[1]}));
    return s;
  });
  std::string diff = Compare(*got[0], *MakeTensor(DType::kI32, want.dims, want.v), 0, 0);
  BOOST_TEST(diff.empty(), diff);
}

BOOST_AUTO_TEST_CASE(qlinear_conv_with_per_channel_weight_scales_and_bias) {
  // 1x2x4x4 input, 3 output channels of 2x3x3 weights, pad 1: acc = conv of the shifted
  // operands + bias, y = saturate(round(acc * xs * ws[c] / ys) + yz).
  auto X = RandomTensor(DType::kU8, {1, 2, 4, 4}, 0, 256, 3);
  auto W = RandomTensor(DType::kI8, {3, 2, 3, 3}, -128, 128, 4);
  auto Bias = MakeTensor(DType::kI32, {3}, {1000, -2000, 0});
  std::vector<double> ws = {0.002, 0.0005, 0.001};
  std::string text = Model(
      13,
      "(uint8[1,2,4,4] x, float xs, uint8 xz, int8[3,2,3,3] w, float[3] ws, int8[3] wz, float ys, "
      "uint8 yz, int32[3] bias) => (uint8[1,3,4,4] y)",
      "y = QLinearConv <pads = [1, 1, 1, 1]> (x, xs, xz, w, ws, wz, ys, yz, bias)");
  auto got = Run(text, {X, F32({}, {0.02}), MakeTensor(DType::kU8, {}, {120}), W, F32({3}, ws),
                        MakeTensor(DType::kI8, {3}, {0, 0, 0}), F32({}, {0.05}),
                        MakeTensor(DType::kU8, {}, {128}), Bias});
  Nd x = ToNd(X), w = ToNd(W), b = ToNd(Bias);
  Nd want = Generate({1, 3, 4, 4}, [&](const std::vector<int64_t>& i) {
    double acc = b.at({i[1]});
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t dy = 0; dy < 3; ++dy)
        for (int64_t dx = 0; dx < 3; ++dx) {
          int64_t yy = i[2] + dy - 1, xx = i[3] + dx - 1;
          if (yy < 0 || yy >= 4 || xx < 0 || xx >= 4) continue;
          acc += (x.at({0, c, yy, xx}) - 120) * w.at({i[1], c, dy, dx});
        }
    // The multiplier in float, as ORT and kiln compute it; the product rounded half to even.
    float mult = static_cast<float>(0.02f * static_cast<float>(ws[i[1]])) / 0.05f;
    double q = std::nearbyint(static_cast<float>(acc) * mult) + 128;
    return std::min(255.0, std::max(0.0, q));
  });
  std::string diff = Compare(*got[0], *MakeTensor(DType::kU8, want.dims, want.v), 0, 0);
  BOOST_TEST(diff.empty(), diff);
}

}  // namespace
}  // namespace kiln::compiler::testing
