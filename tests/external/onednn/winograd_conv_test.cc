// kiln's Winograd 3x3 convolution (external/onednn/run/winograd_conv.h) against a float64
// direct convolution and oneDNN's own convolution primitive on the same aBcd8b layouts: zoo
// shapes, padding, odd H and W, channel counts that pad the last block, batches, bias and the
// relu / clip / sum post-ops; and the cases it leaves to oneDNN.
//
// The tolerance is a forward error bound, not a fitted constant. Every value the kernel
// computes is a nested sum of products; in floating point a sum of n terms carries an error of
// at most gamma_n = n eps / (1 - n eps) times the sum of the terms' magnitudes (Higham,
// "Accuracy and Stability of Numerical Algorithms", 3.1). Chaining the input transform
// (alpha terms, twice), U's rounding to float (1), the GEMM over the padded channels (Cp) and
// the output transform (alpha terms, twice), plus bias and residual adds (2), gives for each
// output
//   |winograd - exact| <= gamma_n * (|A^T| (sum_c (|G||g||G^T|) .* (|B^T||d||B|)) |A|),
//   n = 4 alpha + Cp + 3,
// the same Winograd product taken with every matrix and operand in absolute value (computed
// here in float64). That bound grows with the transforms' coefficients (F(4x4)'s B^T has 5/2s,
// A^T 8s), which is exactly Winograd's error growth. oneDNN's direct convolution sums 9 C
// products: |onednn - exact| <= gamma_{9 Cp + 3} * sum |w||x|. The comparison with oneDNN
// allows the sum of both bounds. Relu, clip and max are 1-Lipschitz, so the bounds carry
// through the post-ops. A wrong tap, channel or tile misses by O(|y|), far above either.
#define BOOST_TEST_MODULE onednn_winograd_conv_test
#include "external/onednn/run/winograd_conv.h"

#include <omp.h>

#include <algorithm>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <ostream>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "tests/external/onednn/cpu_engine.h"

namespace kiln::onednn::internal {
namespace {

namespace data = boost::unit_test::data;
using dnnl::memory;
using tag = memory::format_tag;
using Kind = WinogradPostOp::Kind;

using testing::Cpu;

struct Case {
  const char* name;
  int64_t n, c, k, h, w, pt, pl, pb, pr;
  bool bias;
  std::vector<WinogradPostOp> post;
  int m;
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name << "_f" << c.m; }

const WinogradPostOp kRelu{Kind::kRelu}, kSum{Kind::kSum};
const WinogradPostOp kClip{Kind::kClip, 0.0f, 6.0f}, kLeaky{Kind::kRelu, 0.1f};
const WinogradPostOp kSigmoid{Kind::kSigmoid}, kTanh{Kind::kTanh}, kSilu{Kind::kSwish, 1.0f};
const WinogradPostOp kHardSwish{Kind::kHardSwish}, kLinear{Kind::kLinear, 0.5f, -0.25f};

std::vector<Case> Cases() {
  std::vector<Case> base = {
      // The zoo's channel counts (resnet18/50 stages, C = K, pad 1; googlenet's; densenet121's)
      // at smaller H and W (the error grows with C, not H or W; smaller keeps the float64
      // reference quick).
      {"resnet_64", 1, 64, 64, 20, 20, 1, 1, 1, 1, true, {kRelu}},
      {"resnet_128_residual", 1, 128, 128, 16, 16, 1, 1, 1, 1, true, {kSum, kRelu}},
      {"resnet_256", 1, 256, 256, 7, 7, 1, 1, 1, 1, true, {kRelu}},
      {"resnet_512_residual", 1, 512, 512, 5, 5, 1, 1, 1, 1, true, {kSum, kRelu}},
      {"googlenet_96_128", 1, 96, 128, 16, 16, 1, 1, 1, 1, true, {kRelu}},
      {"googlenet_16_32", 1, 16, 32, 28, 28, 1, 1, 1, 1, true, {kRelu}},
      {"densenet_128_32", 1, 128, 32, 20, 20, 1, 1, 1, 1, false, {}},
      // Odd sizes, no padding, asymmetric padding, channels that pad the last block, batches.
      {"odd_hw_no_pad", 2, 8, 16, 9, 13, 0, 0, 0, 0, false, {}},
      {"asymmetric_pad", 1, 16, 24, 11, 10, 2, 0, 1, 2, true, {kClip}},
      {"channels_12_to_20", 2, 12, 20, 7, 9, 1, 1, 1, 1, true, {kRelu}},
      {"channels_3_to_5_leaky_sum", 1, 3, 5, 6, 5, 1, 1, 1, 1, true, {kLeaky, kSum}},
      {"one_pixel", 3, 8, 8, 1, 1, 1, 1, 1, 1, true, {kClip, kSum}},
      // Exponential-based and other eltwise post-ops: EfficientNet V2's and YOLO's SiLU after
      // 3x3 convs, ESPCN's tanh, a sigmoid gate, MobileNet V3's hard-swish, a scale and shift.
      {"effnetv2_48_192_silu", 1, 48, 192, 12, 12, 1, 1, 1, 1, true, {kSilu}},
      {"espcn_64_32_tanh", 1, 64, 32, 10, 14, 1, 1, 1, 1, true, {kTanh}},
      {"sigmoid_residual", 1, 16, 16, 8, 8, 1, 1, 1, 1, true, {kSum, kSigmoid}},
      {"hard_swish_then_linear", 1, 24, 16, 9, 7, 1, 1, 1, 1, true, {kHardSwish, kLinear}},
  };
  std::vector<Case> all;
  for (int m : {2, 4}) {
    for (Case c : base) {
      c.m = m;
      all.push_back(c);
    }
  }
  return all;
}

// Random values in [-1, 1); the padded channels of a blocked memory zeroed (as oneDNN keeps
// them) through a plain copy's reorder round trip.
std::vector<float> Random(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / 8388608.0f - 1.0f;
  }
  return v;
}

memory Blocked(const std::vector<float>& plain, const memory::dims& dims) {
  memory p({dims, memory::data_type::f32, tag::abcd}, Cpu(), const_cast<float*>(plain.data()));
  memory b({dims, memory::data_type::f32, tag::aBcd8b}, Cpu());
  dnnl::stream st(Cpu());
  dnnl::reorder(p, b).execute(st, p, b);
  st.wait();
  return b;
}

std::vector<float> Plain(const memory& b) {
  memory::dims dims = b.get_desc().dims();
  std::vector<float> v(static_cast<size_t>(dims[0] * dims[1] * dims[2] * dims[3]));
  memory p({dims, memory::data_type::f32, tag::abcd}, Cpu(), v.data());
  dnnl::stream st(Cpu());
  dnnl::reorder(const_cast<memory&>(b), p).execute(st, const_cast<memory&>(b), p);
  st.wait();
  return v;
}

// The transforms of F(m x m, 3x3) in float64, for the bound (winograd_conv.cc has the
// float ones).
struct Transforms {
  int a;
  std::vector<std::vector<double>> bt, g, at;
};
Transforms Of(int m) {
  if (m == 2)
    return {4,
            {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
            {{1, 0, 0}, {.5, .5, .5}, {.5, -.5, .5}, {0, 0, 1}},
            {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  return {6,  // points 0, 1, -1, 2, -1/2, infinity
          {{1, 1.5, -2, -1.5, 1, 0},
           {0, -1, -2.5, -0.5, 1, 0},
           {0, 1, 0.5, -2.5, 1, 0},
           {0, -0.5, -1, 0.5, 1, 0},
           {0, 2, -1, -2, 1, 0},
           {0, 1, 1.5, -2, -1.5, 1}},
          {{1, 0, 0},
           {-1. / 3, -1. / 3, -1. / 3},
           {1. / 3, -1. / 3, 1. / 3},
           {1. / 15, 2. / 15, 4. / 15},
           {-16. / 15, 8. / 15, -4. / 15},
           {0, 0, 1}},
          {{1, 1, 1, 1, 1, 0},
           {0, 1, -1, 2, -0.5, 0},
           {0, 1, 1, 4, 0.25, 0},
           {0, 1, -1, 8, -0.125, 1}}};
}

// L (r x s) * X (s x t) * R^T (t x u given as u x t), all |.| when `abs`.
std::vector<double> Sandwich(const std::vector<std::vector<double>>& l,
                             const std::vector<double>& x, int s, int t,
                             const std::vector<std::vector<double>>& r) {
  int rows = static_cast<int>(l.size()), cols = static_cast<int>(r.size());
  std::vector<double> lx(rows * t, 0.0), out(rows * cols, 0.0);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < t; ++j)
      for (int k = 0; k < s; ++k) lx[i * t + j] += std::fabs(l[i][k]) * x[k * t + j];
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      for (int k = 0; k < t; ++k) out[i * cols + j] += lx[i * t + k] * std::fabs(r[j][k]);
  return out;
}

// The exact convolution (float64, with bias), sum |w||x| per output, and the Winograd bound's
// magnitude (|A^T| (sum_c |U| .* |V|) |A|) per output. Plain [N, K, OH, OW] each.
struct Reference {
  std::vector<double> y, direct_mag, wino_mag;
};
Reference Compute(const Case& c, const std::vector<float>& x, const std::vector<float>& wt,
                  const std::vector<float>& bias, int64_t oh, int64_t ow) {
  Reference r;
  size_t outs = static_cast<size_t>(c.n * c.k * oh * ow);
  r.y.assign(outs, 0.0), r.direct_mag.assign(outs, 0.0), r.wino_mag.assign(outs, 0.0);
  auto at = [&](int64_t n, int64_t ch, int64_t y, int64_t xx) -> double {
    if (y < 0 || y >= c.h || xx < 0 || xx >= c.w) return 0.0;
    return x[((n * c.c + ch) * c.h + y) * c.w + xx];
  };
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t k = 0; k < c.k; ++k)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t xx = 0; xx < ow; ++xx) {
          size_t o = ((n * c.k + k) * oh + y) * ow + xx;
          double s = c.bias ? bias[k] : 0.0, mag = c.bias ? std::fabs(bias[k]) : 0.0;
          for (int64_t ch = 0; ch < c.c; ++ch)
            for (int i = 0; i < 3; ++i)
              for (int j = 0; j < 3; ++j) {
                double p =
                    wt[((k * c.c + ch) * 3 + i) * 3 + j] * at(n, ch, y - c.pt + i, xx - c.pl + j);
                s += p, mag += std::fabs(p);
              }
          r.y[o] = s, r.direct_mag[o] = mag;
        }
  // The Winograd magnitudes, tile by tile.
  Transforms t = Of(c.m);
  const int a = t.a, m = c.m;
  std::vector<std::vector<double>> u(c.k * c.c);  // |G||g||G^T| per (k, c)
  for (int64_t k = 0; k < c.k; ++k)
    for (int64_t ch = 0; ch < c.c; ++ch) {
      std::vector<double> g(9);
      for (int i = 0; i < 9; ++i) g[i] = std::fabs(wt[(k * c.c + ch) * 9 + i]);
      u[k * c.c + ch] = Sandwich(t.g, g, 3, 3, t.g);
    }
  for (int64_t n = 0; n < c.n; ++n)
    for (int64_t ty = 0; ty < oh; ty += m)
      for (int64_t tx = 0; tx < ow; tx += m) {
        std::vector<std::vector<double>> v(c.c);
        for (int64_t ch = 0; ch < c.c; ++ch) {
          std::vector<double> d(a * a);
          for (int i = 0; i < a; ++i)
            for (int j = 0; j < a; ++j)
              d[i * a + j] = std::fabs(at(n, ch, ty - c.pt + i, tx - c.pl + j));
          v[ch] = Sandwich(t.bt, d, a, a, t.bt);
        }
        for (int64_t k = 0; k < c.k; ++k) {
          std::vector<double> mm(a * a, 0.0);
          for (int64_t ch = 0; ch < c.c; ++ch)
            for (int p = 0; p < a * a; ++p) mm[p] += u[k * c.c + ch][p] * v[ch][p];
          std::vector<double> out = Sandwich(t.at, mm, a, a, t.at);
          for (int i = 0; i < m && ty + i < oh; ++i)
            for (int j = 0; j < m && tx + j < ow; ++j)
              r.wino_mag[((n * c.k + k) * oh + ty + i) * ow + tx + j] =
                  out[i * m + j] + (c.bias ? std::fabs(bias[k]) : 0.0);
        }
      }
  return r;
}

// The post-ops applied to an exact value (the residual `old`). `bound`, when given, is the
// error bound of the float32 value the post-ops start from; it becomes the bound of the result:
// each op scales it by its largest slope (sigmoid 1/4, tanh 1, SiLU 1.1, hard-swish 1.5,
// linear |alpha|) and adds its own float32 error, 8 ulp of max(|result|, 1) for the functions
// computed through exp (absolute near zero, as the kernel's tanh and sigmoid are), 2 ulp of
// |result| for the others.
double Post(double y, const std::vector<WinogradPostOp>& ops, double old, double* bound = nullptr) {
  const double eps = std::ldexp(1.0, -24);
  double b = bound ? *bound : 0.0;
  for (const WinogradPostOp& p : ops) {
    double slope = 1, own = 0;
    if (p.kind == Kind::kRelu)
      y = y > 0 ? y : p.alpha * y, slope = std::max(1.0, std::fabs(double{p.alpha}));
    if (p.kind == Kind::kClip) y = std::min<double>(std::max<double>(y, p.alpha), p.beta);
    if (p.kind == Kind::kSum) y += old, own = eps * std::fabs(y);
    if (p.kind == Kind::kSigmoid) y = 1 / (1 + std::exp(-y)), slope = 0.25, own = 8 * eps;
    if (p.kind == Kind::kTanh) y = std::tanh(y), own = 8 * eps;
    if (p.kind == Kind::kSwish) {
      y = y / (1 + std::exp(-p.alpha * y));
      slope = 1.1 * std::max(1.0, std::fabs(double{p.alpha}));
      own = 8 * eps * std::max(std::fabs(y), 1.0);
    }
    if (p.kind == Kind::kHardSwish) {
      y = y * std::min(std::max(y + 3, 0.0), 6.0) / 6, slope = 1.5, own = 2 * eps * std::fabs(y);
    }
    if (p.kind == Kind::kLinear) {
      y = p.alpha * y + p.beta, slope = std::fabs(p.alpha), own = 2 * eps * std::fabs(y);
    }
    b = slope * b + own;
  }
  if (bound) *bound = b;
  return y;
}

double Gamma(double n) {
  const double eps = std::ldexp(1.0, -24);
  return n * eps / (1 - n * eps);
}

BOOST_DATA_TEST_CASE(within_the_error_bound_of_float64_and_onednn, data::make(Cases()), c) {
  int64_t oh = c.h + c.pt + c.pb - 2, ow = c.w + c.pl + c.pr - 2;
  memory::dims xd = {c.n, c.c, c.h, c.w}, yd = {c.n, c.k, oh, ow}, wd = {c.k, c.c, 3, 3};
  std::vector<float> x = Random(c.n * c.c * c.h * c.w, 1), wt = Random(c.k * c.c * 9, 2);
  std::vector<float> bias = Random(c.k, 3), residual = Random(c.n * c.k * oh * ow, 4);
  for (float& v : wt) v *= 0.3f;  // outputs of order 1, as a trained network's are
  memory::desc src_md(xd, memory::data_type::f32, tag::aBcd8b);
  memory::desc dst_md(yd, memory::data_type::f32, tag::aBcd8b);
  auto conv = WinogradConv::Make(
      {src_md, dst_md, wt.data(), wd, {1, 1}, {0, 0}, {c.pt, c.pl}, c.post, 2}, c.m);
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    BOOST_TEST(conv == nullptr);  // the contract on such CPUs: oneDNN's primitive runs
    return;
  }
  BOOST_REQUIRE(conv != nullptr);
  // oneDNN's primitive with the same post-ops.
  dnnl::post_ops po;
  for (const WinogradPostOp& p : c.post) {
    if (p.kind == Kind::kSum) po.append_sum(1.0f);
    if (p.kind == Kind::kRelu) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, p.alpha, 0);
    if (p.kind == Kind::kClip)
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, p.alpha, p.beta);
    if (p.kind == Kind::kSigmoid) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_logistic, 0, 0);
    if (p.kind == Kind::kTanh) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_tanh, 0, 0);
    if (p.kind == Kind::kSwish) po.append_eltwise(1.0f, dnnl::algorithm::eltwise_swish, p.alpha, 0);
    if (p.kind == Kind::kHardSwish)
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_hardswish, 0, 0);
    if (p.kind == Kind::kLinear)
      po.append_eltwise(1.0f, dnnl::algorithm::eltwise_linear, p.alpha, p.beta);
  }
  dnnl::primitive_attr attr;
  attr.set_post_ops(po);
  memory::desc bias_md =
      c.bias ? memory::desc({c.k}, memory::data_type::f32, tag::a) : memory::desc();
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                    dnnl::algorithm::convolution_direct, src_md,
                                    memory::desc(wd, memory::data_type::f32, tag::any), bias_md,
                                    dst_md, {1, 1}, {c.pt, c.pl}, {c.pb, c.pr});
  dnnl::convolution_forward::primitive_desc pd(d, attr, Cpu());
  memory src = Blocked(x, xd), want = Blocked(residual, yd), got = Blocked(residual, yd);
  memory w_plain({wd, memory::data_type::f32, tag::oihw}, Cpu(), wt.data());
  memory w(pd.weights_desc(), Cpu()), b(bias_md, Cpu(), bias.data());
  dnnl::stream st(Cpu());
  dnnl::reorder(w_plain, w).execute(st, w_plain, w);
  dnnl::convolution_forward(pd).execute(
      st, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_BIAS, b}, {DNNL_ARG_DST, want}});
  st.wait();
  std::vector<float> scratch_v(conv->scratch_bytes() / sizeof(float) + 16);
  void* scratch = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(scratch_v.data()) + 63) &
                                          ~uintptr_t{63});
  conv->Run(static_cast<const float*>(src.get_data_handle()), c.bias ? bias.data() : nullptr,
            static_cast<float*>(got.get_data_handle()), scratch);
  // Padded channels of the last block are written as zeros.
  if (c.k % 8 != 0) {
    const float* p = static_cast<const float*>(got.get_data_handle());
    bool zero = true;
    for (int64_t n = 0; n < c.n; ++n)
      for (int64_t i = 0; i < oh * ow; ++i)
        for (int64_t l = c.k % 8; l < 8; ++l)
          zero = zero && p[((n * ((c.k + 7) / 8) + c.k / 8) * oh * ow + i) * 8 + l] == 0.0f;
    BOOST_TEST(zero);
  }
  std::vector<float> kiln = Plain(got), onednn = Plain(want);
  Reference ref = Compute(c, x, wt, bias, oh, ow);
  const double cp = (c.c + 7) / 8 * 8, a = c.m + 2;
  const double g_wino = Gamma(4 * a + cp + 3), g_direct = Gamma(9 * cp + 3);
  double worst = 0, err64 = 0, err_dnn = 0, dnn64 = 0, scale = 0;
  for (size_t i = 0; i < kiln.size(); ++i) {
    double bound = g_wino * (ref.wino_mag[i] + std::fabs(residual[i]));
    double bound_dnn = g_direct * (ref.direct_mag[i] + std::fabs(residual[i]));
    double exact = Post(ref.y[i], c.post, residual[i], &bound);
    Post(ref.y[i], c.post, residual[i], &bound_dnn);
    worst = std::max(worst, std::fabs(kiln[i] - exact) / bound);
    worst = std::max(worst, std::fabs(kiln[i] - onednn[i]) / (bound + bound_dnn));
    err64 = std::max(err64, std::fabs(kiln[i] - exact));
    err_dnn = std::max(err_dnn, std::fabs(double(kiln[i]) - onednn[i]));
    dnn64 = std::max(dnn64, std::fabs(onednn[i] - exact));
    scale = std::max(scale, std::fabs(exact));
  }
  BOOST_TEST_MESSAGE(c << ": max |kiln - f64| " << err64 << " (" << err64 / scale << " of max |y| "
                       << scale << "), |kiln - oneDNN| " << err_dnn << ", |oneDNN - f64| " << dnn64
                       << "; error / bound " << worst);
  BOOST_TEST(worst <= 1.0);
}

BOOST_AUTO_TEST_CASE(leaves_other_convolutions_to_onednn) {
  auto md = [](memory::dims d, tag t) { return memory::desc(d, memory::data_type::f32, t); };
  std::vector<float> wt(16 * 16 * 25, 0.5f);
  memory::dims in = {1, 16, 8, 8}, out = {1, 16, 8, 8};
  auto make = [&](memory::desc s, memory::desc d, memory::dims w, memory::dims strides,
                  memory::dims dil, int m) {
    return WinogradConv::Make({s, d, wt.data(), w, strides, dil, {1, 1}, {}, 1}, m);
  };
  memory::dims w3 = {16, 16, 3, 3};
  // Stride 2, dilation, a 5x5 kernel, grouped weights ([K, C / 2, 3, 3]), plain and
  // channels-last layouts, 16-channel blocks, tiles other than 2 and 4.
  BOOST_TEST(!make(md(in, tag::aBcd8b), md({1, 16, 4, 4}, tag::aBcd8b), w3, {2, 2}, {0, 0}, 2));
  BOOST_TEST(!make(md(in, tag::aBcd8b), md({1, 16, 6, 6}, tag::aBcd8b), w3, {1, 1}, {1, 1}, 2));
  BOOST_TEST(!make(md(in, tag::aBcd8b), md(out, tag::aBcd8b), {16, 16, 5, 5}, {1, 1}, {0, 0}, 2));
  BOOST_TEST(!make(md(in, tag::aBcd8b), md(out, tag::aBcd8b), {16, 8, 3, 3}, {1, 1}, {0, 0}, 2));
  BOOST_TEST(!make(md(in, tag::abcd), md(out, tag::abcd), w3, {1, 1}, {0, 0}, 2));
  BOOST_TEST(!make(md(in, tag::acdb), md(out, tag::acdb), w3, {1, 1}, {0, 0}, 2));
  BOOST_TEST(!make(md(in, tag::aBcd16b), md(out, tag::aBcd16b), w3, {1, 1}, {0, 0}, 2));
  BOOST_TEST(!make(md(in, tag::aBcd8b), md(out, tag::aBcd8b), w3, {1, 1}, {0, 0}, 3));
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    BOOST_TEST(make(md(in, tag::aBcd8b), md(out, tag::aBcd8b), w3, {1, 1}, {0, 0}, 4) != nullptr);
}

// The result does not depend on the team size: every output is one thread's sum in one order
// (blocks of tiles per thread, or each thread a K slice of shared blocks of tiles), so runs at
// one and at two threads agree bitwise, for both blockings and both tiles.
BOOST_AUTO_TEST_CASE(bitwise_equal_at_one_and_two_threads) {
  struct Shape {
    int64_t c, k, hw;
    bool k_sliced;
    int64_t blocks_f2;  // blocks of tiles of F(2x2) (K-sliced: shared by the threads)
  };
  // Blocks of tiles per thread (100 tiles: two blocks of 30 each); K slices of one block; K
  // slices of two blocks (512 channels' V fills a block at 6 tiles), whose threads' slices
  // cover 16 K blocks in passes of 10 (kgroup).
  const Shape shapes[] = {{32, 24, 20, false, 4}, {256, 256, 7, true, 1}, {512, 512, 5, true, 2}};
  const int before = omp_get_max_threads();
  for (const Shape& s : shapes) {
    for (int m : {2, 4}) {
      memory::dims xd = {1, s.c, s.hw, s.hw}, wd = {s.k, s.c, 3, 3};
      memory::desc src_md(xd, memory::data_type::f32, tag::aBcd8b);
      memory::desc dst_md({1, s.k, s.hw, s.hw}, memory::data_type::f32, tag::aBcd8b);
      std::vector<float> x = Random(s.c * s.hw * s.hw, 5), wt = Random(s.k * s.c * 9, 6);
      std::vector<float> bias = Random(s.k, 7);
      auto conv = WinogradConv::Make(
          {src_md, dst_md, wt.data(), wd, {1, 1}, {0, 0}, {1, 1}, {kRelu}, 2}, m);
      if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
        BOOST_TEST(conv == nullptr);
        continue;
      }
      BOOST_REQUIRE(conv != nullptr);
      const WinogradConv::Geometry& g = conv->geometry();
      BOOST_TEST(g.k_sliced == s.k_sliced);
      if (m == 2) BOOST_TEST((g.tiles + g.block - 1) / g.block == s.blocks_f2);
      memory src = Blocked(x, xd);
      std::vector<float> scratch_v(conv->scratch_bytes() / sizeof(float) + 16);
      void* scratch = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(scratch_v.data()) + 63) &
                                              ~uintptr_t{63});
      std::vector<float> out[2];
      for (int threads : {1, 2}) {
        omp_set_num_threads(threads);
        memory dst(dst_md, Cpu());
        conv->Run(static_cast<const float*>(src.get_data_handle()), bias.data(),
                  static_cast<float*>(dst.get_data_handle()), scratch);
        out[threads - 1] = Plain(dst);
      }
      BOOST_TEST_CONTEXT(s.c << ">" << s.k << "@" << s.hw << " F" << m) {
        BOOST_TEST(std::memcmp(out[0].data(), out[1].data(), out[0].size() * sizeof(float)) == 0);
      }
    }
  }
  omp_set_num_threads(before);
}

}  // namespace
}  // namespace kiln::onednn::internal
