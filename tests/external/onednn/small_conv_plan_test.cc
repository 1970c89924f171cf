// The plan's choice of kiln's small-input-channel convolution (plan_small_conv.cc) in a region:
// KILN_ONEDNN_SMALL_IC=force runs it for every convolution of 1-4 input channels it applies
// to (and never for more), "0" never, and the default never for a shape its rule excludes; the
// region's output matches a float64 reference in every mode, post-ops and padding included.
#define BOOST_TEST_MODULE onednn_small_conv_plan_test
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

struct Impls : RegionProfiler {
  std::vector<std::string> names;
  void Record(const RegionStepSample& s) override { names.emplace_back(s.impl); }
  int64_t Count(const char* impl) const { return std::count(names.begin(), names.end(), impl); }
};

// Sets KILN_ONEDNN_SMALL_IC for one scope (null: unset), restoring it after.
struct ScopedMode : ScopedEnv {
  explicit ScopedMode(const char* mode) : ScopedEnv("KILN_ONEDNN_SMALL_IC", mode) {}
};

bool HasAvx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// A first layer 3 -> 20 (7x7, stride 2, asymmetric pads, bias, Relu) on a batch of 2, then a
// 20 -> 12 3x3 conv (too many input channels for kiln's) with a Clip.
const Dims kXd = {2, 3, 23, 19}, kW0d = {20, 3, 7, 7}, kW1d = {12, 20, 3, 3};
const ConvParams kP0{1, {2, 2}, {1, 1}, {3, 2, 1, 3}}, kP1{1, {1, 1}, {1, 1}, {1, 1, 1, 1}};

struct Net {
  Floats w0 = Random(Numel(kW0d), 11, -0.2f, 0.2f), b0 = Random(20, 12, -0.1f, 0.1f);
  Floats w1 = Random(Numel(kW1d), 13, -0.2f, 0.2f), b1 = Random(12, 14, -0.1f, 0.1f);
  Floats x = Random(Numel(kXd), 15);
  std::string text =
      "<ir_version: 8, opset_import: [\"\" : 17]>\n"
      "g (float[2, 3, 23, 19] X) => (float Y) {\n"
      "  c0 = Conv <pads = [3, 2, 1, 3], strides = [2, 2]> (X, W0, B0)\n"
      "  r0 = Relu(c0)\n"
      "  c1 = Conv <pads = [1, 1, 1, 1]> (r0, W1, B1)\n"
      "  Y = Clip(c1, lo, hi)\n"
      "}";

  // Runs the region built under `mode`; returns its output and records the implementations.
  Floats Run(const char* mode, Impls* impls) const {
    ScopedMode scoped(mode);  // read when the plan is built: the first run
    CompiledRegion r = Compile(MakeGraph(text, {{"W0", kW0d, w0},
                                                {"B0", {20}, b0},
                                                {"W1", kW1d, w1},
                                                {"B1", {12}, b1},
                                                {"lo", {}, {-0.25f}},
                                                {"hi", {}, {0.5f}}}));
    std::vector<Floats> got;
    Dims yd = {2, 12, 11, 9};
    BOOST_REQUIRE(r.TryRun({{kXd, x}}, {yd}, &got, impls).ok());
    return got[0];
  }

  Floats Reference() const {
    Dims d0, d1;
    Floats y = RefConv2d(x, kXd, w0, kW0d, &b0, kP0, &d0);
    for (float& v : y) v = std::max(v, 0.0f);
    y = RefConv2d(y, d0, w1, kW1d, &b1, kP1, &d1);
    BOOST_REQUIRE((d1 == Dims{2, 12, 11, 9}));
    for (float& v : y) v = std::min(std::max(v, -0.25f), 0.5f);
    return y;
  }
};

// Layer 0 sums 147 products of |w x| <= 0.2, layer 1 180 of |w| <= 0.2 times layer 0's
// outputs (~1): float32 rounding stays below 1e-5 absolute; a wrong tap misses by ~0.01.
constexpr double kAtol = 2e-5;

BOOST_AUTO_TEST_CASE(ForceRunsItOnTheFirstLayerOnly) {
  const Net net;
  Impls impls;
  const Floats got = net.Run("force", &impls);
  BOOST_TEST(impls.Count("kiln:small_ic") == (HasAvx2() ? 1 : 0));
  BOOST_TEST(Close(got, net.Reference(), kAtol, 0));
}

BOOST_AUTO_TEST_CASE(OffNeverRunsIt) {
  const Net net;
  Impls impls;
  const Floats got = net.Run("0", &impls);
  BOOST_TEST(impls.Count("kiln:small_ic") == 0);
  BOOST_TEST(Close(got, net.Reference(), kAtol, 0));
}

// By default the rule (stride 1, 25 taps or more) leaves a 7x7 stride-2 stem to oneDNN, whose
// jit:avx2 runs it near the FMA peak: no trial, whatever the timing.
BOOST_AUTO_TEST_CASE(DefaultLeavesStridedStemsToOneDnn) {
  const Net net;
  Impls impls;
  const Floats got = net.Run(nullptr, &impls);
  BOOST_TEST(impls.Count("kiln:small_ic") == 0);
  BOOST_TEST(Close(got, net.Reference(), kAtol, 0));
}

}  // namespace
}  // namespace kiln::onednn::testing
