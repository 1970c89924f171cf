// The Winograd accuracy policy (plan_winograd.cc): a region's error budget decides which 3x3
// convolutions may run as F(4x4), whatever the timed trial or KILN_ONEDNN_WINOGRAD picks, and
// a deep chain of convolutions stays within that budget against a float64 reference.
#define BOOST_TEST_MODULE onednn_winograd_policy_test
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

// The policy's figures (plan_winograd.cc): per-layer worst errors relative to the output's
// scale, direct convolution and F(4x4), and the region's budget.
constexpr double kDirectError = 2e-6, kF4Error = 5e-6, kErrorBudget = 1e-4;

// How many F(4x4) convolutions the budget allows a chain of `convs` 3x3 convolutions.
int F4Allowance(int convs) {
  double left = kErrorBudget - convs * kDirectError;
  return left <= 0 ? 0 : static_cast<int>(left / (kF4Error - kDirectError) + 1e-9);
}

constexpr int64_t kChannels = 16, kSide = 12;

// `depth` 3x3 convolutions (pads 1, bias) of kChannels channels, each followed by a Relu, with
// He-uniform weights so activations keep their scale down the chain.
struct Chain {
  explicit Chain(int depth) : depth(depth) {
    const float a = std::sqrt(6.0f / (9 * kChannels));
    std::string body;
    std::vector<Init> inits;
    std::string in = "X";
    for (int i = 0; i < depth; ++i) {
      const std::string n = std::to_string(i), out = i + 1 == depth ? "Y" : "r" + n;
      body += "  c" + n + " = Conv <pads = [1, 1, 1, 1]> (" + in + ", W" + n + ", B" + n +
              ")\n  " + out + " = Relu(c" + n + ")\n";
      w.push_back(Random(Numel(wd), 100 + i, -a, a));
      b.push_back(Random(kChannels, 200 + i, -0.1f, 0.1f));
      inits.push_back({"W" + n, wd, w.back()});
      inits.push_back({"B" + n, {kChannels}, b.back()});
      in = out;
    }
    graph = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1, 16, 12, 12] X) => (float Y) {\n" +
            body + "}";
    this->inits = inits;
  }

  // The chain in double accumulation per layer (RefConv2d), rounded to float between layers:
  // 6e-8 of the scale per layer, negligible beside the budget.
  Floats Reference(const Floats& x) const {
    Floats y = x;
    Dims yd = xd;
    for (int i = 0; i < depth; ++i) {
      Dims od;
      y = RefConv2d(y, yd, w[i], wd, &b[i], {1, {1, 1}, {1, 1}, {1, 1, 1, 1}}, &od);
      for (float& v : y) v = std::max(v, 0.0f);
      yd = od;
    }
    return y;
  }

  int depth;
  Dims xd = {1, kChannels, kSide, kSide}, wd = {kChannels, kChannels, 3, 3};
  std::vector<Floats> w, b;
  std::string graph;
  std::vector<Init> inits;
};

struct Impls : RegionProfiler {
  std::vector<std::string> names;
  void Record(const RegionStepSample& s) override { names.emplace_back(s.impl); }
  int64_t Count(const char* impl) const { return std::count(names.begin(), names.end(), impl); }
};

// Sets KILN_ONEDNN_WINOGRAD for one scope (null: unset), restoring it after.
class ScopedMode {
 public:
  explicit ScopedMode(const char* mode) {
    const char* env = std::getenv("KILN_ONEDNN_WINOGRAD");
    had_ = env != nullptr;
    if (had_) saved_ = env;
    Set(mode);
  }
  ~ScopedMode() { Set(had_ ? saved_.c_str() : nullptr); }

 private:
  static void Set(const char* v) {
    if (v != nullptr) {
      setenv("KILN_ONEDNN_WINOGRAD", v, 1);
    } else {
      unsetenv("KILN_ONEDNN_WINOGRAD");
    }
  }
  bool had_ = false;
  std::string saved_;
};

bool HasWinograd() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

// Runs `chain` built under `mode`; returns the output and records the implementations run.
Floats RunChain(const Chain& chain, const char* mode, Impls* impls) {
  ScopedMode scoped(mode);  // read when the plan is built: the first run
  CompiledRegion r = Compile(MakeGraph(chain.graph, chain.inits));
  Floats x = Random(Numel(chain.xd), 7);
  std::vector<Floats> got;
  BOOST_REQUIRE(r.TryRun({{chain.xd, x}}, {chain.xd}, &got, impls).ok());
  return got[0];
}

// "force4" takes F(4x4) wherever the budget allows it, untimed: exactly the allowance, on the
// first convolutions of the chain, F(2x2) on the rest.
BOOST_AUTO_TEST_CASE(a_deep_chain_gets_no_f4_beyond_the_budget) {
  const int depth = 30;
  const int allowed = F4Allowance(depth);  // (1e-4 - 30 x 2e-6) / 3e-6: 13
  BOOST_TEST(allowed == 13);
  Impls impls;
  RunChain(Chain(depth), "force4", &impls);
  if (!HasWinograd()) {
    BOOST_TEST(impls.Count("kiln:winograd_f4") + impls.Count("kiln:winograd_f2") == 0);
    return;
  }
  BOOST_TEST(impls.Count("kiln:winograd_f4") == allowed);
  BOOST_TEST(impls.Count("kiln:winograd_f2") == depth - allowed);
  std::vector<std::string> convs;
  for (const std::string& n : impls.names) {
    if (n.rfind("kiln:winograd", 0) == 0) convs.push_back(n);
  }
  BOOST_REQUIRE(convs.size() == static_cast<size_t>(depth));
  for (int i = 0; i < allowed; ++i) BOOST_TEST(convs[i] == "kiln:winograd_f4");
}

BOOST_AUTO_TEST_CASE(a_shallow_chain_may_take_f4_everywhere) {
  const int depth = 3;
  BOOST_TEST(F4Allowance(depth) >= depth);  // 3 x 5e-6 fits in 1e-4
  Impls impls;
  RunChain(Chain(depth), "force4", &impls);
  BOOST_TEST(impls.Count("kiln:winograd_f4") == (HasWinograd() ? depth : 0));
}

// Whatever tiles the mode allows and the timing picks, the deep chain's output is within the
// budget of its scale against the float64 reference, and F(4x4) never exceeds the allowance.
BOOST_AUTO_TEST_CASE(a_deep_chain_stays_within_the_budget_in_every_mode) {
  const int depth = 30;
  const Chain chain(depth);
  const Floats want = chain.Reference(Random(Numel(chain.xd), 7));
  float scale = 0;
  for (float v : want) scale = std::max(scale, std::fabs(v));
  BOOST_REQUIRE(scale > 0.1f);  // the chain kept its activations
  for (const char* mode : {"", "0", "2", "4", "force2", "force4"}) {
    BOOST_TEST_CONTEXT("KILN_ONEDNN_WINOGRAD=" << mode) {
      Impls impls;
      Floats got = RunChain(chain, mode, &impls);
      BOOST_TEST(impls.Count("kiln:winograd_f4") <= F4Allowance(depth));
      double err = 0;
      for (size_t i = 0; i < got.size(); ++i)
        err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
      BOOST_TEST_MESSAGE(mode << ": max error " << err / scale << " of the output's scale");
      BOOST_TEST(Close(got, want, kErrorBudget * scale, 0.0));
    }
  }
}

}  // namespace
}  // namespace kiln::onednn::testing
