// Convolution taps that read only padding (external/onednn/run/plan_conv_prune.cc): which taps
// PadOnlyTaps keeps for a window and input size, and regions whose constant-weight convs are
// pruned per input shape, against the same conv with run-time weights (never pruned) and a
// float64 reference, on sizes where the outer taps fall fully, partly and not at all into
// padding.
#define BOOST_TEST_MODULE onednn_conv_prune_test
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "external/onednn/run/plan_builder.h"
#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

namespace data = boost::unit_test::data;
using internal::PadOnlyTaps;
using internal::PrunedTaps;
using internal::Window;

// A stride-1 window over `in` (square) with dilation `dil`, pads `pl` / `pr` on both dims.
Window MakeWindow(int64_t in, int64_t k, int64_t dil, int64_t pl, int64_t pr, int64_t stride = 1) {
  Window w;
  int64_t out = (in + pl + pr - ((k - 1) * dil + 1)) / stride + 1;
  w.strides = {stride, stride};
  w.dilations = {dil - 1, dil - 1};
  w.pad_l = {pl, pl};
  w.pad_r = {pr, pr};
  w.out = {out, out};
  return w;
}

BOOST_AUTO_TEST_CASE(taps_beyond_the_input_are_dropped) {
  // DeepLab's ASPP: 3x3, dilation 24 and 36 (pads equal) on 16x16 -> the centre tap only.
  for (int64_t dil : {16, 24, 36}) {
    Window w = MakeWindow(16, 3, dil, dil, dil);
    std::optional<PrunedTaps> p = PadOnlyTaps({1, 8, 16, 16}, {4, 8, 3, 3}, &w);
    BOOST_REQUIRE(p.has_value());
    BOOST_TEST(p->wd == (Dims{4, 8, 1, 1}));
    BOOST_TEST(p->first == (Dims{1, 1}));
    BOOST_TEST(w.pad_l == (Dims{0, 0}));
    BOOST_TEST(w.pad_r == (Dims{0, 0}));
    BOOST_TEST(w.dilations == (Dims{0, 0}));
    BOOST_TEST(w.out == (Dims{16, 16}));
  }
  // Dilation 12 on 16x16: the outer taps reach rows 0..3 / 12..15 -> all kept.
  Window w = MakeWindow(16, 3, 12, 12, 12);
  BOOST_TEST(!PadOnlyTaps({1, 8, 16, 16}, {4, 8, 3, 3}, &w).has_value());
  BOOST_TEST(w.pad_l == (Dims{12, 12}));
  // 5 taps at dilation 4, pads 8 on 5x5: taps 0 and 4 read rows -8..-4 and 8..12 -> 1..3 kept.
  Window five = MakeWindow(5, 5, 4, 8, 8);
  std::optional<PrunedTaps> p = PadOnlyTaps({1, 2, 5, 5}, {3, 2, 5, 5}, &five);
  BOOST_REQUIRE(p.has_value());
  BOOST_TEST(p->wd == (Dims{3, 2, 3, 3}));
  BOOST_TEST(p->first == (Dims{1, 1}));
  BOOST_TEST(five.pad_l == (Dims{4, 4}));
  BOOST_TEST(five.pad_r == (Dims{4, 4}));
  BOOST_TEST(five.dilations == (Dims{3, 3}));
  // A plain 3x3 with pad 1: every tap reads input.
  Window dense = MakeWindow(8, 3, 1, 1, 1);
  BOOST_TEST(!PadOnlyTaps({1, 2, 8, 8}, {3, 2, 3, 3}, &dense).has_value());
}

BOOST_AUTO_TEST_CASE(weights_are_sliced_to_the_kept_taps) {
  Dims wd = {2, 1, 3, 3};
  Floats w(18);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  PrunedTaps p{{1, 0}, {2, 1, 2, 3}};  // rows 1..2, all columns
  Floats got = internal::SliceTaps(w.data(), wd, p);
  BOOST_TEST(got == (Floats{3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17}),
             boost::test_tools::per_element());
}

// Records the weights operand of every conv step a profiled run reports.
struct ConvShapes : RegionProfiler {
  std::vector<std::string> shapes;
  void Record(const RegionStepSample& s) override {
    if (std::string(s.kind) == "conv") shapes.emplace_back(s.shapes);
  }
};

struct PruneCase {
  const char* name;
  int64_t dil, pad_begin, pad_end, stride, h;
  const char* weights;  // the conv step's weight dims when pruned ("" when not)
};
std::ostream& operator<<(std::ostream& os, const PruneCase& c) { return os << c.name; }

const PruneCase kPruneCases[] = {
    {"all_but_centre_in_padding", 24, 24, 24, 1, 16, "16x24x1x1"},
    {"outer_taps_partly_inside", 12, 12, 12, 1, 16, ""},
    {"no_padding_taps", 2, 2, 2, 1, 16, ""},
    {"asymmetric_pads", 6, 9, 3, 1, 5, "16x24x2x2"},
    {"strided", 8, 8, 8, 2, 7, "16x24x1x1"},
    {"input_larger_than_dilation", 24, 24, 24, 1, 40, ""},
};

// One dynamic-H/W model run at the case's size, constant weights (pruned) against run-time
// weights (the full primitive) and the float64 reference: the same sums but for exact zeros.
BOOST_DATA_TEST_CASE(pruned_conv_matches_full_conv_and_reference, data::make(kPruneCases), c) {
  Dims wd = {16, 24, 3, 3};
  Floats w = Random(Numel(wd), 70), b = Random(16, 71);
  std::string attrs = "<dilations = [" + std::to_string(c.dil) + ", " + std::to_string(c.dil) +
                      "], strides = [" + std::to_string(c.stride) + ", " +
                      std::to_string(c.stride) + "], pads = [" + std::to_string(c.pad_begin) +
                      ", " + std::to_string(c.pad_begin) + ", " + std::to_string(c.pad_end) + ", " +
                      std::to_string(c.pad_end) + "]>";
  std::string head = "<ir_version: 8, opset_import: [\"\" : 17]>\n g (float[N, 24, H, H] X";
  CompiledRegion constant = Compile(
      MakeGraph(head + ") => (float Y) {\n  c = Conv " + attrs + " (X, W, B)\n  Y = Relu(c)\n}",
                {{"W", wd, w}, {"B", {16}, b}}));
  CompiledRegion runtime =
      Compile(MakeGraph(head + ", float[16, 24, 3, 3] W) => (float Y) {\n  c = Conv " + attrs +
                            " (X, W, B)\n  Y = Relu(c)\n}",
                        {{"B", {16}, b}}));
  Dims xd = {2, 24, c.h, c.h}, yd;
  Floats x = Random(Numel(xd), 72);
  ConvParams cp{
      1, {c.stride, c.stride}, {c.dil, c.dil}, {c.pad_begin, c.pad_begin, c.pad_end, c.pad_end}};
  Floats want = RefConv2d(x, xd, w, wd, &b, cp, &yd);
  for (float& v : want) v = std::max(v, 0.0f);
  std::vector<Floats> pruned, full;
  ConvShapes steps;
  BOOST_REQUIRE(constant.TryRun({{xd, x}}, {yd}, &pruned, &steps).ok());
  BOOST_REQUIRE(runtime.TryRun({{xd, x}, {wd, w}}, {yd}, &full).ok());
  // f32 sums of 24 * 9 products of values in [-1, 1].
  double tol = 1e-5 * std::sqrt(24.0 * 9) * 4;
  BOOST_TEST(Close(pruned[0], want, tol, 1e-4));
  BOOST_TEST(Close(pruned[0], full[0], tol, 1e-4));
  BOOST_REQUIRE(steps.shapes.size() == 1u);
  std::string weights = std::string(", ") + (*c.weights ? c.weights : "16x24x3x3") + ":";
  BOOST_TEST(steps.shapes[0].find(weights) != std::string::npos, steps.shapes[0]);
}

}  // namespace
}  // namespace kiln::onednn::testing
