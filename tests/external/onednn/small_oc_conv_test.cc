// kiln's small-output-channel convolution (external/onednn/run/small_oc_conv.h) against a
// float64 direct convolution: 1-4 output channels, 1..64 input channels (partial and several
// 8-channel blocks), kernels 1x1, 3x3, 7x7, 9x9 and non-square ones (1x7: a 1-D layer), strides
// 1 and 2, asymmetric paddings, odd widths and heights (partial column blocks, edge columns,
// rows and columns wholly in the padding), batch 2, bias and every post-op; and the shapes it
// leaves to oneDNN.
//
// The tolerance is a forward error bound. Each output sums C * KH * KW products in float32
// (FMA: one rounding per term, in 8 lane sums then a pairwise sum of the lanes: fewer
// roundings on any path than a plain sum's), then adds the bias and, with a sum post-op, dst's
// old value: n = C * KH * KW + 2 roundings bound it, |kiln - exact| <= gamma_n * (sum |w||x| +
// |bias| + |old|) with gamma_n = n eps / (1 - n eps) (Higham, "Accuracy and Stability of
// Numerical Algorithms", 3.1). The eltwise post-ops carry that through their Lipschitz constant
// (relu, clip, tanh: 1; sigmoid: 1/4; swish: 1.1; hard swish: 1.5; linear: |alpha|) and add
// their own rounding: a few ulp of max(1, |y|) for the exponential-based ones. A wrong tap,
// channel or column misses by O(|y|), far above the bound.
#define BOOST_TEST_MODULE onednn_small_oc_conv_test
#include "external/onednn/run/small_oc_conv.h"

#include <algorithm>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::internal {
namespace {

namespace data = boost::unit_test::data;
using dnnl::memory;
using tag = memory::format_tag;
using Kind = WinogradPostOp::Kind;

bool HasAvx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

struct Case {
  int64_t n, c, k, h, w, kh, kw, sh, sw, pt, pl, pb, pr;
  bool blocked_src, bias;
  std::vector<WinogradPostOp> post;
  std::string name;
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

const WinogradPostOp kRelu{Kind::kRelu}, kLeaky{Kind::kRelu, 0.1f}, kClip{Kind::kClip, -0.5f, 1};
const WinogradPostOp kSum{Kind::kSum}, kSigmoid{Kind::kSigmoid}, kTanh{Kind::kTanh};
const WinogradPostOp kSwish{Kind::kSwish, 1.0f}, kHardSwish{Kind::kHardSwish};
const WinogradPostOp kLinear{Kind::kLinear, -1.5f, 0.25f};

// OC 1..4 x kernel 1x1, 3x3, 7x7, 9x9, 1x7 x stride 1, 2, with the input channels, padding,
// sizes, batch, bias and post-op list varied across them (each comes up several times).
std::vector<Case> Cases() {
  const std::vector<std::vector<WinogradPostOp>> posts = {
      {},      {kRelu},  {kLeaky},     {kClip},   {kSum},        {kSigmoid},
      {kTanh}, {kSwish}, {kHardSwish}, {kLinear}, {kSum, kRelu}, {kLinear, kTanh}};
  const int64_t cs[] = {16, 3, 32, 8, 64, 1, 13, 24, 5, 40, 17};
  const int64_t kernels[][2] = {{1, 1}, {3, 3}, {7, 7}, {9, 9}, {1, 7}, {3, 5}};
  std::vector<Case> cases;
  int i = 0;
  for (int64_t k = 1; k <= 4; ++k) {
    for (const auto& kernel : kernels) {
      for (int64_t stride : {1, 2}) {
        Case t;
        t.n = i % 3 == 0 ? 2 : 1, t.c = cs[i % 11], t.k = k;
        t.kh = kernel[0], t.kw = kernel[1];
        t.sh = stride, t.sw = i % 4 == 3 ? 3 - stride : stride;  // mixed strides
        t.h = t.kh == 1 && i % 2 ? 1 : 5 + 2 * (i % 5) + t.kh;   // 1-row images (a 1-D conv)
        t.w = 13 + 3 * (i % 7) + t.kw;                           // odd, partial column blocks
        t.pt = t.kh / 2, t.pl = (t.kw - 1) / 2 + i % 2, t.pb = i % 3, t.pr = t.kw / 2 + 1;
        if (i % 6 == 5) t.pt = t.pl = t.pb = t.pr = 0;  // valid (fast_style's output layer)
        t.pt = std::min(t.pt, t.kh - 1), t.pb = std::min(t.pb, t.kh - 1);
        t.pl = std::min(t.pl, t.kw - 1), t.pr = std::min(t.pr, t.kw - 1);
        t.blocked_src = true, t.bias = i % 5 != 4;
        t.post = posts[i % posts.size()];
        t.name = "oc" + std::to_string(k) + "_c" + std::to_string(t.c) + "_k" +
                 std::to_string(t.kh) + "x" + std::to_string(t.kw) + "_s" + std::to_string(t.sh) +
                 std::to_string(t.sw) + "_" + std::to_string(t.h) + "x" + std::to_string(t.w) +
                 "_n" + std::to_string(t.n) + "_post" + std::to_string(t.post.size());
        cases.push_back(t);
        ++i;
      }
    }
  }
  return cases;
}

float Value(uint64_t i, uint64_t seed, float scale) {  // deterministic, in [-scale, scale)
  uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>(((z >> 40) * (1.0 / (1 << 24)) * 2.0 - 1.0) * scale);
}

// y after the post-ops in double; `old` is dst's value before the run.
double RefPostOps(double y, const std::vector<WinogradPostOp>& ops, double old) {
  for (const WinogradPostOp& p : ops) {
    switch (p.kind) {
      case Kind::kRelu:
        y = y > 0 ? y : p.alpha * y;
        break;
      case Kind::kClip:
        y = std::min<double>(p.beta, std::max<double>(p.alpha, y));
        break;
      case Kind::kSum:
        y += old;
        break;
      case Kind::kSigmoid:
        y = 1 / (1 + std::exp(-y));
        break;
      case Kind::kTanh:
        y = std::tanh(y);
        break;
      case Kind::kSwish:
        y = y / (1 + std::exp(-p.alpha * y));
        break;
      case Kind::kHardSwish:
        y = y * std::min(std::max(y + 3, 0.0), 6.0) / 6;
        break;
      case Kind::kLinear:
        y = p.alpha * y + p.beta;
        break;
    }
  }
  return y;
}

// The post-ops' Lipschitz constant (how much an error in y grows) and whether they round
// beyond a few ulp (the exponential-based ones).
double Lipschitz(const std::vector<WinogradPostOp>& ops, bool* transcendental) {
  double l = 1;
  *transcendental = false;
  for (const WinogradPostOp& p : ops) {
    if (p.kind == Kind::kSigmoid) l *= 0.25, *transcendental = true;
    if (p.kind == Kind::kTanh) *transcendental = true;
    if (p.kind == Kind::kSwish)
      l *= 1.1 * std::max(1.0f, std::fabs(p.alpha)), *transcendental = true;
    if (p.kind == Kind::kHardSwish) l *= 1.5, *transcendental = true;
    if (p.kind == Kind::kLinear) l *= std::fabs(p.alpha);
  }
  return l;
}

BOOST_DATA_TEST_CASE(MatchesFloat64, data::make(Cases()), param) {
  const Case& t = param;
  if (!HasAvx2()) return;  // Make declines (tested below); oneDNN runs these convolutions
  const int64_t oh = (t.h + t.pt + t.pb - t.kh) / t.sh + 1;
  const int64_t ow = (t.w + t.pl + t.pr - t.kw) / t.sw + 1;
  const int64_t kb = 1, cb = (t.c + 7) / 8;  // src's channel blocks; padded channels zero
  std::vector<float> x(t.n * cb * 8 * t.h * t.w, 0.0f), wts(t.k * t.c * t.kh * t.kw), bias(t.k);
  auto xat = [&](int64_t n, int64_t c, int64_t y, int64_t xx) -> float& {
    return x[(((n * cb + c / 8) * t.h + y) * t.w + xx) * 8 + c % 8];
  };
  for (int64_t n = 0; n < t.n; ++n) {
    for (int64_t c = 0; c < t.c; ++c) {
      for (int64_t y = 0; y < t.h; ++y) {
        for (int64_t xx = 0; xx < t.w; ++xx)
          xat(n, c, y, xx) = Value(((n * t.c + c) * t.h + y) * t.w + xx, 1, 1.0f);
      }
    }
  }
  for (size_t i = 0; i < wts.size(); ++i) wts[i] = Value(i, 2, 0.5f);
  for (size_t i = 0; i < bias.size(); ++i) bias[i] = Value(i, 3, 0.5f);
  std::vector<float> dst(t.n * kb * oh * ow * 8);
  for (size_t i = 0; i < dst.size(); ++i) dst[i] = Value(i, 4, 1.0f);  // the sum's old values
  const std::vector<float> old = dst;

  const memory::desc src_md({t.n, t.c, t.h, t.w}, memory::data_type::f32, tag::aBcd8b);
  const memory::desc dst_md({t.n, t.k, oh, ow}, memory::data_type::f32, tag::aBcd8b);
  auto conv = SmallOcConv::Make({src_md,
                                 dst_md,
                                 wts.data(),
                                 {t.k, t.c, t.kh, t.kw},
                                 {t.sh, t.sw},
                                 {0, 0},
                                 {t.pt, t.pl},
                                 t.post,
                                 2});
  BOOST_REQUIRE(conv != nullptr);
  conv->Run(x.data(), t.bias ? bias.data() : nullptr, dst.data());

  bool transcendental = false;
  const double lip = Lipschitz(t.post, &transcendental);
  const bool sum = std::any_of(t.post.begin(), t.post.end(),
                               [](const WinogradPostOp& p) { return p.kind == Kind::kSum; });
  const double eps = std::ldexp(1.0, -24), terms = t.c * t.kh * t.kw + 2;
  const double gamma = terms * eps / (1 - terms * eps);
  int64_t bad = 0;
  double worst = 0;
  for (int64_t n = 0; n < t.n; ++n) {
    for (int64_t k = 0; k < kb * 8; ++k) {
      for (int64_t y = 0; y < oh; ++y) {
        for (int64_t xx = 0; xx < ow; ++xx) {
          const size_t at = (((n * kb + k / 8) * oh + y) * ow + xx) * 8 + k % 8;
          if (k >= t.k) {  // padded channels: zeros
            bad += dst[at] != 0.0f;
            continue;
          }
          double s = t.bias ? bias[k] : 0.0, mag = std::fabs(s) + (sum ? std::fabs(old[at]) : 0);
          for (int64_t c = 0; c < t.c; ++c) {
            for (int64_t i = 0; i < t.kh; ++i) {
              for (int64_t j = 0; j < t.kw; ++j) {
                const int64_t iy = y * t.sh - t.pt + i, ix = xx * t.sw - t.pl + j;
                if (iy < 0 || iy >= t.h || ix < 0 || ix >= t.w) continue;
                const double p = static_cast<double>(wts[((k * t.c + c) * t.kh + i) * t.kw + j]) *
                                 xat(n, c, iy, ix);
                s += p, mag += std::fabs(p);
              }
            }
          }
          const double want = RefPostOps(s, t.post, old[at]);
          const double tol =
              lip * gamma * mag + (transcendental ? 8 : 2) * eps * std::max(1.0, std::fabs(want));
          const double err = std::fabs(dst[at] - want);
          worst = std::max(worst, err / tol);
          if (!(err <= tol) && bad++ < 3) {
            BOOST_TEST_MESSAGE("n " << n << " k " << k << " y " << y << " x " << xx << ": "
                                    << dst[at] << " vs " << want << " (tol " << tol << ")");
          }
        }
      }
    }
  }
  BOOST_TEST(bad == 0, "mismatches: " << bad << ", worst error / tolerance " << worst);
}

// Results do not depend on the team size (each output is one thread's sum in one order).
BOOST_AUTO_TEST_CASE(SameOnAnyTeam) {
  if (!HasAvx2()) return;
  const memory::desc src_md({2, 20, 29, 31}, memory::data_type::f32, tag::aBcd8b);
  const memory::desc dst_md({2, 3, 15, 16}, memory::data_type::f32, tag::aBcd8b);
  std::vector<float> x(2 * 24 * 29 * 31, 0.0f), w(3 * 20 * 5 * 5);
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    if ((i / 8 / (29 * 31)) % 3 != 2 || i % 8 < 4) x[i] = Value(i, 5, 1.0f);  // channels < 20
  }
  for (size_t i = 0; i < w.size(); ++i) w[i] = Value(i, 6, 0.5f);
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2, 3}) {
    auto conv = SmallOcConv::Make(
        {src_md, dst_md, w.data(), {3, 20, 5, 5}, {2, 2}, {0, 0}, {2, 1}, {kTanh}, threads});
    BOOST_REQUIRE(conv != nullptr);
    outs.emplace_back(2 * 15 * 16 * 8);
    conv->Run(x.data(), nullptr, outs.back().data());
  }
  BOOST_TEST(outs[0] == outs[1]);
  BOOST_TEST(outs[0] == outs[2]);
}

// A 1-D convolution (aBc8b, a vocoder's 16 -> 1 k7 with pads 3, wide enough that each row is
// split in column ranges over the team) against float64, the same at 1, 2 and 3 threads, and
// bit for bit what the same convolution as 2-D on one row computes.
BOOST_AUTO_TEST_CASE(OneDimensional) {
  if (!HasAvx2()) return;
  const int64_t c = 13, cb = 2, w = 601, ow = 601;
  std::vector<float> x(2 * cb * 8 * w, 0.0f), wts(c * 7), bias = {0.25f};
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t i = 0; i < w; ++i)
        x[((n * cb + ch / 8) * w + i) * 8 + ch % 8] = Value((n * c + ch) * w + i, 7, 1.0f);
    }
  }
  for (size_t i = 0; i < wts.size(); ++i) wts[i] = Value(i, 8, 0.5f);
  auto md = [](std::vector<int64_t> dims, tag t) {
    return memory::desc(dims, memory::data_type::f32, t);
  };
  std::vector<std::vector<float>> outs;
  for (int threads : {1, 2, 3}) {
    auto conv = SmallOcConv::Make({md({2, c, w}, tag::aBc8b),
                                   md({2, 1, ow}, tag::aBc8b),
                                   wts.data(),
                                   {1, c, 7},
                                   {1},
                                   {0},
                                   {3},
                                   {kTanh},
                                   threads});
    BOOST_REQUIRE(conv != nullptr);
    outs.emplace_back(2 * ow * 8, -1.0f);
    conv->Run(x.data(), bias.data(), outs.back().data());
  }
  BOOST_TEST(outs[0] == outs[1]);
  BOOST_TEST(outs[0] == outs[2]);
  auto two_d = SmallOcConv::Make({md({2, c, 1, w}, tag::aBcd8b),
                                  md({2, 1, 1, ow}, tag::aBcd8b),
                                  wts.data(),
                                  {1, c, 1, 7},
                                  {1, 1},
                                  {0, 0},
                                  {0, 3},
                                  {kTanh},
                                  2});
  BOOST_REQUIRE(two_d != nullptr);
  std::vector<float> want(2 * ow * 8, -2.0f);
  two_d->Run(x.data(), bias.data(), want.data());
  BOOST_TEST(outs[0] == want);
  // Against float64: 91 products + bias, tanh's Lipschitz constant 1 (the header's bound).
  const double eps = std::ldexp(1.0, -24), gamma = 93 * eps / (1 - 93 * eps);
  int64_t bad = 0;
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t o = 0; o < ow; ++o) {
      double s = bias[0], mag = std::fabs(bias[0]);
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t j = 0; j < 7; ++j) {
          const int64_t i = o - 3 + j;
          if (i < 0 || i >= w) continue;
          const double p =
              static_cast<double>(wts[ch * 7 + j]) * x[((n * cb + ch / 8) * w + i) * 8 + ch % 8];
          s += p, mag += std::fabs(p);
        }
      }
      const double want_o = std::tanh(s), tol = gamma * mag + 8 * eps;
      bad += !(std::fabs(outs[0][(n * ow + o) * 8] - want_o) <= tol);
      for (int l = 1; l < 8; ++l) bad += outs[0][(n * ow + o) * 8 + l] != 0.0f;
    }
  }
  BOOST_TEST(bad == 0);
  // Ranks that disagree.
  BOOST_TEST(SmallOcConv::Make({md({2, c, w}, tag::aBc8b),
                                md({2, 1, 1, ow}, tag::aBcd8b),
                                nullptr,
                                {1, c, 7},
                                {1},
                                {0},
                                {3},
                                {},
                                1}) == nullptr);
}

// What Make leaves to oneDNN (nullptr), each next to an accepted twin.
BOOST_AUTO_TEST_CASE(DeclinesWhatItDoesNotRun) {
  const memory::desc blocked({1, 16, 16, 16}, memory::data_type::f32, tag::aBcd8b);
  const memory::desc out({1, 3, 16, 16}, memory::data_type::f32, tag::aBcd8b);
  const std::vector<int64_t> wd = {3, 16, 3, 3}, one = {1, 1}, dense = {0, 0}, pad = {1, 1};
  auto make = [&](const memory::desc& s, const memory::desc& d, const std::vector<int64_t>& w,
                  const std::vector<int64_t>& st, const std::vector<int64_t>& dil) {
    return SmallOcConv::Make({s, d, nullptr, w, st, dil, pad, {}, 1}) != nullptr;
  };
  BOOST_TEST(make(blocked, out, wd, one, dense) == HasAvx2());
  // Five output channels.
  BOOST_TEST(!make(blocked, memory::desc({1, 5, 16, 16}, memory::data_type::f32, tag::aBcd8b),
                   {5, 16, 3, 3}, one, dense));
  // Dilation, stride 3.
  BOOST_TEST(!make(blocked, memory::desc({1, 3, 14, 14}, memory::data_type::f32, tag::aBcd8b), wd,
                   one, {1, 1}));
  BOOST_TEST(!make(blocked, memory::desc({1, 3, 6, 6}, memory::data_type::f32, tag::aBcd8b), wd,
                   {3, 3}, dense));
  // A plain or 16-blocked dst; a plain, nhwc or 16-blocked src; bf16.
  BOOST_TEST(!make(blocked, memory::desc({1, 3, 16, 16}, memory::data_type::f32, tag::abcd), wd,
                   one, dense));
  BOOST_TEST(!make(blocked, memory::desc({1, 3, 16, 16}, memory::data_type::f32, tag::aBcd16b), wd,
                   one, dense));
  BOOST_TEST(
      !make(memory::desc({1, 16, 16, 16}, memory::data_type::f32, tag::abcd), out, wd, one, dense));
  BOOST_TEST(
      !make(memory::desc({1, 16, 16, 16}, memory::data_type::f32, tag::acdb), out, wd, one, dense));
  BOOST_TEST(!make(memory::desc({1, 16, 16, 16}, memory::data_type::f32, tag::aBcd16b), out, wd,
                   one, dense));
  BOOST_TEST(!make(memory::desc({1, 16, 16, 16}, memory::data_type::bf16, tag::aBcd8b), out, wd,
                   one, dense));
  // Weights that disagree with src or dst.
  BOOST_TEST(!make(blocked, out, {3, 8, 3, 3}, one, dense));
  BOOST_TEST(!make(blocked, out, {2, 16, 3, 3}, one, dense));
}

}  // namespace
}  // namespace kiln::onednn::internal
