// The plan's choice of kiln's small-output-channel convolution (plan_small_oc_conv.cc) in a
// region: KILN_ONEDNN_SMALL_OC=force runs it for every convolution of 1-4 output channels it
// applies to (and never for more), "0" never, and the default never for a shape its rule
// excludes (stride 2, few products); the region's output matches a float64 reference in every
// mode, post-ops and padding included.
#define BOOST_TEST_MODULE onednn_small_oc_conv_plan_test
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

// Sets KILN_ONEDNN_SMALL_OC for one scope (null: unset), restoring it after.
struct ScopedMode : ScopedEnv {
  explicit ScopedMode(const char* mode) : ScopedEnv("KILN_ONEDNN_SMALL_OC", mode) {}
};

bool HasAvx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// A 16 -> 12 3x3 conv with a Relu (too many output channels for kiln's) on a batch of 2, then
// an output layer 12 -> 3 (kernel `kernel`, stride `stride`, asymmetric pads when the kernel is
// larger than 1, bias, Tanh).
const Dims kXd = {2, 16, 19, 23}, kW0d = {12, 16, 3, 3};
const ConvParams kP0{1, {1, 1}, {1, 1}, {1, 1, 1, 1}};

struct Net {
  explicit Net(int64_t kernel, int64_t stride = 1)
      : k(kernel), w1d{3, 12, kernel, kernel}, p1{1, {stride, stride}, {1, 1}, {0, 0, 0, 0}} {
    if (k > 1) p1.pads = {k / 2, k / 2 - 1, k / 2, k / 2 + 1};
    yd = {2, 3, (19 + 2 * (k / 2) - k) / stride + 1, (23 + 2 * (k / 2) - k) / stride + 1};
    w1 = Random(Numel(w1d), 13, -0.2f, 0.2f);
    text =
        "<ir_version: 8, opset_import: [\"\" : 17]>\n"
        "g (float[2, 16, 19, 23] X) => (float Y) {\n"
        "  c0 = Conv <pads = [1, 1, 1, 1]> (X, W0, B0)\n"
        "  r0 = Relu(c0)\n"
        "  c1 = Conv <pads = [" +
        std::to_string(p1.pads[0]) + ", " + std::to_string(p1.pads[1]) + ", " +
        std::to_string(p1.pads[2]) + ", " + std::to_string(p1.pads[3]) + "], strides = [" +
        std::to_string(stride) + ", " + std::to_string(stride) +
        "]> (r0, W1, B1)\n"
        "  Y = Tanh(c1)\n"
        "}";
  }
  int64_t k;
  Dims w1d, yd;
  ConvParams p1;
  Floats w0 = Random(Numel(kW0d), 11, -0.2f, 0.2f), b0 = Random(12, 12, -0.1f, 0.1f);
  Floats w1, b1 = Random(3, 14, -0.1f, 0.1f);
  Floats x = Random(Numel(kXd), 15);
  std::string text;

  // Runs the region built under `mode`; returns its output and records the implementations.
  Floats Run(const char* mode, Impls* impls) const {
    ScopedMode scoped(mode);  // read when the plan is built: the first run
    CompiledRegion r = Compile(
        MakeGraph(text, {{"W0", kW0d, w0}, {"B0", {12}, b0}, {"W1", w1d, w1}, {"B1", {3}, b1}}));
    std::vector<Floats> got;
    BOOST_REQUIRE(r.TryRun({{kXd, x}}, {yd}, &got, impls).ok());
    return got[0];
  }

  Floats Reference() const {
    Dims d0, d1;
    Floats y = RefConv2d(x, kXd, w0, kW0d, &b0, kP0, &d0);
    for (float& v : y) v = std::max(v, 0.0f);
    y = RefConv2d(y, d0, w1, w1d, &b1, p1, &d1);
    BOOST_REQUIRE(d1 == yd);
    for (float& v : y) v = std::tanh(v);
    return y;
  }
};

// Layer 0 sums 144 products of |w x| <= 0.2, layer 1 at most 300 of |w| <= 0.2 times layer
// 0's outputs (~1): float32 rounding stays below 1e-5 absolute; a wrong tap misses by ~0.01.
constexpr double kAtol = 2e-5;

BOOST_AUTO_TEST_CASE(ForceRunsItOnTheOutputLayerOnly) {
  for (const Net& net : {Net(1), Net(5), Net(5, 2)}) {
    Impls impls;
    const Floats got = net.Run("force", &impls);
    BOOST_TEST(impls.Count("kiln:small_oc") == (HasAvx2() ? 1 : 0));
    BOOST_TEST(Close(got, net.Reference(), kAtol, 0));
  }
}

BOOST_AUTO_TEST_CASE(OffNeverRunsIt) {
  const Net net(5);
  Impls impls;
  const Floats got = net.Run("0", &impls);
  BOOST_TEST(impls.Count("kiln:small_oc") == 0);
  BOOST_TEST(Close(got, net.Reference(), kAtol, 0));
}

// By default the rule (stride 1, 48 products or more) leaves a strided layer (not measured)
// and one of 12 products (a 1x1 from 12 channels) to oneDNN: no trial, whatever the timing.
BOOST_AUTO_TEST_CASE(DefaultLeavesStridedAndSmallLayersToOneDnn) {
  for (const Net& net : {Net(5, 2), Net(1)}) {
    Impls impls;
    const Floats got = net.Run(nullptr, &impls);
    BOOST_TEST(impls.Count("kiln:small_oc") == 0);
    BOOST_TEST(Close(got, net.Reference(), kAtol, 0));
  }
}

// By default a 5x5 output layer is admitted and timed: either choice computes the same.
BOOST_AUTO_TEST_CASE(DefaultMatchesEitherWay) {
  const Net net(5);
  Impls impls;
  const Floats got = net.Run(nullptr, &impls);
  BOOST_TEST(impls.Count("kiln:small_oc") <= 1);
  BOOST_TEST(Close(got, net.Reference(), kAtol, 0));
}

}  // namespace
}  // namespace kiln::onednn::testing
