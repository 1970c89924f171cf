// A 1x1 convolution and the 3x3 depthwise convolution after it run as one oneDNN primitive
// (plan_dw_fuse.cc): wherever oneDNN offers the fusion as a JIT kernel, KILN_ONEDNN_DW_FUSE=force
// runs one step named "conv 1x1 + dw 3x3" instead of two, "0" never does, and every mode
// matches a float64 reference within a forward error bound, at one and two threads, with the
// activations inverted residual blocks use around it. The shapes the fusion must not take
// (another reader of the intermediate, the intermediate a region output, a depthwise without
// padding, 5x5 or dilated) keep two steps, even when forced.
//
// Error bound. Each output sums 9 taps of the activated 1x1 outputs, each of which sums Cin
// products and a bias: with unit roundoff u = 2^-24 and FMA accumulation, the 1x1's value at a
// position is off by at most (Cin + 1) u A, A = sum |w0 x| + |b0| there; the activations are
// 1.5-Lipschitz at most (hardswish's slope peaks at 1.5; swish's at 1.1) and add u |act| <=
// 1.5 u A; the depthwise adds 10 u S', S' = sum of |w1| |a| over its taps, plus |b1|. So
// |error| <= u (1.5 (Cin + 2) S + 10 (1.5 S + |b1|)), S = sum over taps of |w1| A, and the
// final activation multiplies it by 1.5 at most. The test allows twice that (oneDNN's
// polynomial exp in swish adds an ulp or two); a tap read from the wrong place misses by
// ~|w1| |a| ~ 0.05, three orders above the bound.
#define BOOST_TEST_MODULE onednn_dw_fuse_test
#include <omp.h>

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"
#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

constexpr const char* kFusedKind = "conv 1x1 + dw 3x3";

// Sets OpenMP's team size for the scope (plans are built for the team of their first run).
struct Threads {
  explicit Threads(int n) : before(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(before); }
  int before;
};

// Sets KILN_ONEDNN_DW_FUSE for one scope (null: unset), restoring it after.
struct ScopedMode : ScopedEnv {
  explicit ScopedMode(const char* mode) : ScopedEnv("KILN_ONEDNN_DW_FUSE", mode) {}
};

struct Kinds : RegionProfiler {
  std::vector<std::string> kinds;
  void Record(const RegionStepSample& s) override { kinds.emplace_back(s.kind); }
  int64_t Count(const std::string& kind) const {
    return std::count(kinds.begin(), kinds.end(), kind);
  }
};

enum class Act { kNone, kRelu, kRelu6, kClip, kSwish, kHardSwish };

// ONNX text applying `act` to `in`, naming the result `out`.
std::string ActText(Act act, const std::string& in, const std::string& out) {
  switch (act) {
    case Act::kNone:
      return "";  // the producer writes `out` itself (Block::Text)
    case Act::kRelu:
      return "  " + out + " = Relu(" + in + ")\n";
    case Act::kRelu6:
      return "  " + out + " = Clip(" + in + ", zero, six)\n";
    case Act::kClip:
      return "  " + out + " = Clip(" + in + ", lo, hi)\n";
    case Act::kSwish:
      return "  " + out + "_s = Sigmoid(" + in + ")\n  " + out + " = Mul(" + in + ", " + out +
             "_s)\n";
    case Act::kHardSwish:
      return "  " + out + " = HardSwish(" + in + ")\n";
  }
  return "";
}

double Apply(Act act, double v) {
  switch (act) {
    case Act::kNone:
      return v;
    case Act::kRelu:
      return std::max(v, 0.0);
    case Act::kRelu6:
      return std::min(std::max(v, 0.0), 6.0);
    case Act::kClip:
      return std::min(std::max(v, -0.5), 0.75);
    case Act::kSwish:
      return v / (1.0 + std::exp(-v));
    case Act::kHardSwish:
      return v * std::min(std::max(v / 6.0 + 0.5, 0.0), 1.0);
  }
  return v;
}

// One block: X [1, cin, h, w] -> 1x1 to c channels (+ B0) -> act0 -> depthwise k x k over c
// channels (stride, pads, dilation; + B1 when `dw_bias`) -> act1 -> Y.
struct Block {
  int64_t cin = 16, c = 64, h = 96, w = 96;
  int64_t k = 3, stride = 1, pad = 1, dilation = 1;
  bool dw_bias = true;
  Act act0 = Act::kRelu6, act1 = Act::kNone;
  // The intermediate is also read by another op (a global pool, output P) or is itself a
  // region output (M).
  bool second_reader = false, intermediate_output = false;

  Dims Xd() const { return {1, cin, h, w}; }
  int64_t Oh() const { return (h + 2 * pad - (dilation * (k - 1) + 1)) / stride + 1; }
  int64_t Ow() const { return (w + 2 * pad - (dilation * (k - 1) + 1)) / stride + 1; }
  Dims Yd() const { return {1, c, Oh(), Ow()}; }

  Floats x() const { return Random(Numel(Xd()), 21); }
  Floats w0() const { return Random(c * cin, 22, -0.25f, 0.25f); }
  Floats b0() const { return Random(c, 23, -0.5f, 0.5f); }
  Floats w1() const { return Random(c * k * k, 24, -0.5f, 0.5f); }
  Floats b1() const { return Random(c, 25, -0.25f, 0.25f); }

  std::string Text() const {
    std::string outs = "float Y";
    if (second_reader) outs += ", float P";
    if (intermediate_output) outs += ", float M";
    std::string t = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1, " +
                    std::to_string(cin) + ", " + std::to_string(h) + ", " + std::to_string(w) +
                    "] X) => (" + outs + ") {\n";
    const std::string mid = intermediate_output ? "M" : "a";
    const std::string e = act0 == Act::kNone ? mid : "e", d = act1 == Act::kNone ? "Y" : "d";
    t += "  " + e + " = Conv (X, W0, B0)\n" + ActText(act0, e, mid);
    const std::string p = std::to_string(pad), s = std::to_string(stride);
    t += "  " + d + " = Conv <group = " + std::to_string(c) + ", kernel_shape = [" + std::to_string(k) +
         ", " + std::to_string(k) + "], pads = [" + p + ", " + p + ", " + p + ", " + p +
         "], strides = [" + s + ", " + s + "], dilations = [" + std::to_string(dilation) + ", " +
         std::to_string(dilation) + "]> (" + mid + ", W1" + (dw_bias ? ", B1" : "") + ")\n";
    t += ActText(act1, d, "Y");
    if (second_reader) t += "  P = GlobalAveragePool(" + mid + ")\n";
    return t + "}";
  }

  std::vector<Dims> OutputDims() const {
    std::vector<Dims> d = {Yd()};
    if (second_reader) d.push_back({1, c, 1, 1});
    if (intermediate_output) d.push_back({1, c, h, w});
    return d;
  }

  // Runs the region built under `mode` at `threads`; returns its outputs, records step kinds.
  std::vector<Floats> Run(const char* mode, int threads, Kinds* kinds) const {
    ScopedMode scoped(mode);  // read when the plan is built: the first run
    Threads team(threads);
    std::vector<Init> inits = {{"W0", {c, cin, 1, 1}, w0()},
                               {"B0", {c}, b0()},
                               {"W1", {c, 1, k, k}, w1()},
                               {"zero", {}, {0.0f}},
                               {"six", {}, {6.0f}},
                               {"lo", {}, {-0.5f}},
                               {"hi", {}, {0.75f}}};
    if (dw_bias) inits.push_back({"B1", {c}, b1()});
    CompiledRegion r = Compile(MakeGraph(Text(), inits));
    std::vector<Floats> got;
    Status s = r.TryRun({{Xd(), x()}}, OutputDims(), &got, kinds);
    BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
    return got;
  }

  // Y in float64 and its error bound per element (the file's header).
  void Reference(std::vector<double>* y, std::vector<double>* bound) const {
    const Floats xv = x(), w0v = w0(), b0v = b0(), w1v = w1(), b1v = b1();
    const int64_t hw = h * w;
    std::vector<double> a(c * hw), mag(c * hw);
    for (int64_t o = 0; o < c; ++o) {
      for (int64_t p = 0; p < hw; ++p) {
        double acc = b0v[o], m = std::fabs(b0v[o]);
        for (int64_t i = 0; i < cin; ++i) {
          acc += static_cast<double>(w0v[o * cin + i]) * xv[i * hw + p];
          m += std::fabs(static_cast<double>(w0v[o * cin + i]) * xv[i * hw + p]);
        }
        a[o * hw + p] = Apply(act0, acc);
        mag[o * hw + p] = m;
      }
    }
    const double u = std::ldexp(1.0, -24);
    const int64_t oh = Oh(), ow = Ow();
    y->assign(c * oh * ow, 0.0);
    bound->assign(c * oh * ow, 0.0);
    for (int64_t o = 0; o < c; ++o) {
      for (int64_t i = 0; i < oh; ++i) {
        for (int64_t j = 0; j < ow; ++j) {
          double acc = dw_bias ? b1v[o] : 0.0, s = 0;
          for (int64_t r = 0; r < k; ++r) {
            for (int64_t q = 0; q < k; ++q) {
              const int64_t yy = i * stride - pad + r * dilation, xx = j * stride - pad + q * dilation;
              if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
              const double wt = w1v[(o * k + r) * k + q];
              acc += wt * a[o * hw + yy * w + xx];
              s += std::fabs(wt) * mag[o * hw + yy * w + xx];
            }
          }
          const size_t at = (o * oh + i) * ow + j;
          (*y)[at] = Apply(act1, acc);
          const double b = dw_bias ? std::fabs(b1v[o]) : 0.0;
          (*bound)[at] = 2 * 1.5 * u * (1.5 * (cin + 2) * s + 10 * (1.5 * s + b)) + 1e-30;
        }
      }
    }
  }

  // Whether oneDNN offers this block's fusion as a JIT kernel at `threads` (it declines below
  // twice the team's L2, on AVX-512 hosts, for channels not a multiple of 8, ...): the fused
  // step count a forced plan must show.
  bool OneDnnFuses(int threads) const {
    using dnnl::memory;
    using dt = memory::data_type;
    Threads team(threads);
    try {
      dnnl::engine engine(dnnl::engine::kind::cpu, 0);
      dnnl::post_ops po;
      po.append_dw(dt::f32, dw_bias ? dt::f32 : dt::undef, dt::f32, 3, stride, 1, 0, {});
      dnnl::primitive_attr attr;
      attr.set_post_ops(po);
      dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
          memory::desc(Xd(), dt::f32, memory::format_tag::any),
          memory::desc({c, cin, 1, 1}, dt::f32, memory::format_tag::any),
          memory::desc({c}, dt::f32, memory::format_tag::a),
          memory::desc({1, c, h, w}, dt::f32, memory::format_tag::any), {1, 1}, {0, 0}, {0, 0},
          {0, 0});
      dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
      return std::string(pd.impl_info_str()).rfind("jit_1x1", 0) == 0;
    } catch (const dnnl::error&) {
      return false;
    }
  }
};

// Y in float64 with its bound per element.
struct Want {
  explicit Want(const Block& b) { b.Reference(&y, &bound); }
  std::vector<double> y, bound;
};

void CheckY(const Want& ref, const Floats& got, const char* what) {
  const std::vector<double>& want = ref.y;
  const std::vector<double>& bound = ref.bound;
  BOOST_REQUIRE(got.size() == want.size());
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= bound[i])) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  }
  BOOST_TEST(bad == 0, what << ": " << bad << " outputs off, first at " << first << ": "
                            << (first >= 0 ? got[first] : 0) << " vs "
                            << (first >= 0 ? want[first] : 0) << " (bound "
                            << (first >= 0 ? bound[first] : 0) << ")");
}

// Forced, off and by trial: fused exactly where oneDNN offers it when forced, never when off,
// and Y within the bound in every mode.
void CheckModes(const Block& b, int threads) {
  const bool offered = b.OneDnnFuses(threads);
  const Want want(b);
  Kinds forced, off, trial;
  CheckY(want, b.Run("force", threads, &forced)[0], "force");
  BOOST_TEST(forced.Count(kFusedKind) == (offered ? 1 : 0));
  CheckY(want, b.Run("0", threads, &off)[0], "off");
  BOOST_TEST(off.Count(kFusedKind) == 0);
  CheckY(want, b.Run(nullptr, threads, &trial)[0], "trial");
  BOOST_TEST(trial.Count(kFusedKind) <= (offered ? 1 : 0));
}

bool NoAvx512() { return !__builtin_cpu_supports("avx512f"); }

// This host (AVX2, 512 KiB of L2 per core) gets the fusion for the blocks below; a test of the
// fusion that never fused would pass for nothing.
BOOST_AUTO_TEST_CASE(onednn_offers_the_fusion_on_this_host) {
  if (!__builtin_cpu_supports("avx2") || !NoAvx512()) return;
  Block b;
  BOOST_TEST(b.OneDnnFuses(1));
  BOOST_TEST(b.OneDnnFuses(2));
}

BOOST_AUTO_TEST_CASE(stride_one_relu6_around_none) {
  Block b;
  for (int t : {1, 2}) CheckModes(b, t);
}

BOOST_AUTO_TEST_CASE(stride_two_odd_sizes_swish_both) {
  Block b;
  b.h = 97, b.w = 95, b.stride = 2, b.act0 = Act::kSwish, b.act1 = Act::kSwish;
  for (int t : {1, 2}) CheckModes(b, t);
}

BOOST_AUTO_TEST_CASE(stride_one_odd_sizes_hardswish_relu_no_dw_bias) {
  Block b;
  b.h = 95, b.w = 101, b.act0 = Act::kHardSwish, b.act1 = Act::kRelu, b.dw_bias = false;
  for (int t : {1, 2}) CheckModes(b, t);
}

BOOST_AUTO_TEST_CASE(stride_two_clip_none_wide_input) {
  Block b;
  b.cin = 24, b.c = 48, b.h = 128, b.w = 130, b.stride = 2, b.act0 = Act::kClip;
  for (int t : {1, 2}) CheckModes(b, t);
}

BOOST_AUTO_TEST_CASE(no_activation_before_relu6_after) {
  Block b;
  b.act0 = Act::kNone, b.act1 = Act::kRelu6;
  CheckModes(b, 1);
}

// oneDNN's fused kernel takes whole 8-channel blocks only: 60 channels run as two steps.
BOOST_AUTO_TEST_CASE(channels_not_a_multiple_of_eight) {
  Block b;
  b.c = 60, b.h = 120, b.w = 120;
  BOOST_TEST(!b.OneDnnFuses(1));
  CheckModes(b, 1);
}

// Forced, the shapes the fusion must not take still run as two steps, right.
void CheckKeepsTwoSteps(const Block& b) {
  const Want want(b);
  for (int t : {1, 2}) {
    Kinds kinds;
    std::vector<Floats> got = b.Run("force", t, &kinds);
    BOOST_TEST(kinds.Count(kFusedKind) == 0);
    CheckY(want, got[0], "two steps");
  }
}

BOOST_AUTO_TEST_CASE(a_second_reader_of_the_intermediate_keeps_two_steps) {
  Block b;
  b.second_reader = true;
  CheckKeepsTwoSteps(b);
  Kinds kinds;
  std::vector<Floats> got = b.Run("force", 1, &kinds);
  // P: the mean of the activated intermediate per channel.
  const Floats xv = b.x(), w0v = b.w0(), b0v = b.b0();
  for (int64_t o = 0; o < b.c; ++o) {
    double sum = 0;
    for (int64_t p = 0; p < b.h * b.w; ++p) {
      double acc = b0v[o];
      for (int64_t i = 0; i < b.cin; ++i)
        acc += static_cast<double>(w0v[o * b.cin + i]) * xv[i * b.h * b.w + p];
      sum += Apply(b.act0, acc);
    }
    BOOST_TEST(std::fabs(got[1][o] - sum / (b.h * b.w)) <= 1e-4);
  }
}

BOOST_AUTO_TEST_CASE(an_intermediate_that_is_a_region_output_keeps_two_steps) {
  Block b;
  b.intermediate_output = true;
  CheckKeepsTwoSteps(b);
}

BOOST_AUTO_TEST_CASE(a_depthwise_without_padding_keeps_two_steps) {
  Block b;
  b.pad = 0;
  CheckKeepsTwoSteps(b);
}

BOOST_AUTO_TEST_CASE(a_five_by_five_depthwise_keeps_two_steps) {
  Block b;
  b.k = 5, b.pad = 2;
  CheckKeepsTwoSteps(b);
}

BOOST_AUTO_TEST_CASE(a_dilated_depthwise_keeps_two_steps) {
  Block b;
  b.dilation = 2, b.pad = 2;
  CheckKeepsTwoSteps(b);
}

}  // namespace
}  // namespace kiln::onednn::testing
