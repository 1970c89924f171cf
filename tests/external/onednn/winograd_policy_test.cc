// The Winograd accuracy policy (plan_winograd.cc): a probe at plan build decides which 3x3
// convolutions may run as F(4x4), whatever the timed trial or KILN_ONEDNN_WINOGRAD picks: a
// chain that does not amplify rounding errors keeps F(4x4) everywhere, one whose first layers
// cancel (amplifying their errors) loses it there and only there, the decision is the same
// on every load, and every mode stays within the zoo's budget against a float64 reference.
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

// The zoo's tolerance, relative to the output's scale, against float64.
constexpr double kErrorBudget = 1e-4;

constexpr int64_t kChannels = 16, kSide = 12;

// `depth` 3x3 convolutions (pads 1, bias) of kChannels channels, each followed by a Relu, with
// He-uniform weights so activations keep their scale down the chain. With `eps` > 0 the
// first two layers cancel: layer 0's channels c + 8 are (1 + eps) times its channels c, and
// layer 1 reads (x[c + 8] - x[c]) / eps, so both layers' rounding errors reach its output
// 1 / eps larger (relative to its scale) while the layers after pass errors on unamplified.
struct Chain {
  Chain(int depth, float eps = 0) : depth(depth) {
    const float a = std::sqrt(6.0f / (9 * kChannels));
    std::string body;
    std::string in = "X";
    const int64_t half = kChannels / 2, taps = kChannels * 9;
    for (int i = 0; i < depth; ++i) {
      const std::string n = std::to_string(i), out = i + 1 == depth ? "Y" : "r" + n;
      body += "  c" + n + " = Conv <pads = [1, 1, 1, 1]> (" + in + ", W" + n + ", B" + n + ")\n  " +
              out + " = Relu(c" + n + ")\n";
      w.push_back(Random(Numel(wd), 100 + i, -a, a));
      b.push_back(Random(kChannels, 200 + i, -0.1f, 0.1f));
      if (eps > 0 && i == 0) {  // channels c + 8 = (1 + eps) x channels c
        for (int64_t k = half; k < kChannels; ++k) {
          for (int64_t j = 0; j < taps; ++j)
            w[0][k * taps + j] = (1 + eps) * w[0][(k - half) * taps + j];
          b[0][k] = (1 + eps) * b[0][k - half];
        }
      }
      if (eps > 0 && i == 1) {  // (x[c + 8] - x[c]) / eps: as large as x[c]
        for (int64_t k = 0; k < kChannels; ++k) {
          for (int64_t c = 0; c < half; ++c) {
            for (int64_t t = 0; t < 9; ++t) {
              float& lo = w[1][(k * kChannels + c) * 9 + t];
              float& hi = w[1][(k * kChannels + c + half) * 9 + t];
              hi = lo / eps, lo = -hi;
            }
          }
        }
      }
      inits.push_back({"W" + n, wd, w.back()});
      inits.push_back({"B" + n, {kChannels}, b.back()});
      in = out;
    }
    graph =
        "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[1, 16, 12, 12] X) => (float Y) {\n" +
        body + "}";
  }

  // The chain in double accumulation per layer (RefConv2d), rounded to float between layers:
  // 6e-8 of the scale per layer (eps: 1 / eps times that at layer 1), negligible beside the
  // budget.
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
struct ScopedMode : ScopedEnv {
  explicit ScopedMode(const char* mode) : ScopedEnv("KILN_ONEDNN_WINOGRAD", mode) {}
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

// The convolutions' implementations, in op order.
std::vector<std::string> Convs(const Impls& impls) {
  std::vector<std::string> convs;
  for (const std::string& n : impls.names) {
    if (n.rfind("kiln:winograd", 0) == 0) convs.push_back(n);
  }
  return convs;
}

// Max |got - want| over the largest |want|.
double RelativeError(const Floats& got, const Floats& want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
  }
  return err / scale;
}

constexpr float kEps = 0.05f;

// He-initialized convolutions and Relus keep an error's relative size: the probe finds F(4x4)
// within its share on all 30 layers ("force4" takes it wherever allowed, untimed), where a
// count of layers would have denied it to 17 of them.
BOOST_AUTO_TEST_CASE(a_deep_chain_that_does_not_amplify_keeps_f4_everywhere) {
  const int depth = 30;
  Impls impls;
  RunChain(Chain(depth), "force4", &impls);
  BOOST_TEST(impls.Count("kiln:winograd_f4") == (HasWinograd() ? depth : 0));
}

// The first two layers cancel (1 / kEps = 20x amplification): F(4x4) there would cost up to
// 20 x 4.2e-6 of the scale, beyond the probe's share, so it goes from the earliest layers
// (exactly those two, as the bisection finds the fewest) and stays on the rest.
BOOST_AUTO_TEST_CASE(a_chain_that_amplifies_loses_f4_on_its_earliest_layers) {
  const int depth = 8;
  Impls impls;
  RunChain(Chain(depth, kEps), "force4", &impls);
  if (!HasWinograd()) {
    BOOST_TEST(Convs(impls).empty());
    return;
  }
  const std::vector<std::string> convs = Convs(impls);
  BOOST_REQUIRE(convs.size() == static_cast<size_t>(depth));
  BOOST_TEST(convs[0] == "kiln:winograd_f2");
  BOOST_TEST(convs[1] == "kiln:winograd_f2");
  for (int i = 2; i < depth; ++i) BOOST_TEST(convs[i] == "kiln:winograd_f4");
}

// Two loads build the same plan (the probe's input and bisection are fixed) and compute the
// same bits.
BOOST_AUTO_TEST_CASE(the_decision_is_the_same_on_every_load) {
  const Chain chain(8, kEps);
  Impls first, second;
  const Floats a = RunChain(chain, "force4", &first);
  const Floats b = RunChain(chain, "force4", &second);
  BOOST_TEST(first.names == second.names, boost::test_tools::per_element());
  BOOST_TEST(a == b, boost::test_tools::per_element());
}

// Whatever tiles the mode allows and the timing picks, both chains' outputs are within the
// budget of their scale against the float64 reference.
BOOST_AUTO_TEST_CASE(every_mode_stays_within_the_budget) {
  for (float eps : {0.0f, kEps}) {
    const Chain chain(eps > 0 ? 8 : 30, eps);
    const Floats want = chain.Reference(Random(Numel(chain.xd), 7));
    float scale = 0;
    for (float v : want) scale = std::max(scale, std::fabs(v));
    BOOST_REQUIRE(scale > 0.1f);  // the chain kept its activations
    for (const char* mode : {"", "0", "2", "4", "force2", "force4"}) {
      BOOST_TEST_CONTEXT("eps " << eps << ", KILN_ONEDNN_WINOGRAD=" << mode) {
        Impls impls;
        Floats got = RunChain(chain, mode, &impls);
        BOOST_TEST_MESSAGE("eps " << eps << ", " << mode << ": max error "
                                  << RelativeError(got, want) << " of the output's scale");
        BOOST_TEST(Close(got, want, kErrorBudget * scale, 0.0));
      }
    }
  }
}

}  // namespace
}  // namespace kiln::onednn::testing
