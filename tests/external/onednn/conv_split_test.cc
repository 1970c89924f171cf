// 1x1 convolutions on small images split over output channels, one primitive per thread
// (external/onednn/run/plan_conv_split.cc): when the split applies and how channels are
// divided, and regions run at 2 threads (split, uneven parts, a residual sum post-op) and at
// 1 thread (not split) against a float64 reference.
#define BOOST_TEST_MODULE onednn_conv_split_test
#include <omp.h>

#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>
#include <vector>

#include "external/onednn/run/plan_builder.h"
#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

using internal::ChannelSplit;
using internal::SplitOverChannelsPays;

Op PointwiseConv() {
  Op op;
  op.kind = OpKind::kConv;
  op.kernel = {1, 1};
  op.strides = {1, 1};
  op.dilations = {1, 1};
  op.pads = {0, 0, 0, 0};
  return op;
}

BOOST_AUTO_TEST_CASE(split_applies_to_wide_1x1_convs_on_small_images_with_threads) {
  const Op op = PointwiseConv();
  BOOST_TEST(SplitOverChannelsPays(op, {1, 400, 7, 7}, {400, 400, 1, 1}, 2));
  BOOST_TEST(SplitOverChannelsPays(op, {1, 1536, 6, 6}, {256, 1536, 1, 1}, 2));
  BOOST_TEST(!SplitOverChannelsPays(op, {1, 400, 7, 7}, {400, 400, 1, 1}, 1));   // one thread
  BOOST_TEST(!SplitOverChannelsPays(op, {1, 400, 14, 14}, {400, 400, 1, 1}, 2));  // 196 positions
  BOOST_TEST(!SplitOverChannelsPays(op, {2, 400, 7, 7}, {400, 400, 1, 1}, 2));    // two images
  BOOST_TEST(!SplitOverChannelsPays(op, {1, 224, 7, 7}, {224, 224, 1, 1}, 2));    // few weights
  BOOST_TEST(!SplitOverChannelsPays(op, {1, 4096, 7, 7}, {12, 4096, 1, 1}, 2));   // 12 channels
  BOOST_TEST(!SplitOverChannelsPays(op, {1, 4096, 7, 7}, {8, 4096, 1, 1}, 2));    // one block
  BOOST_TEST(!SplitOverChannelsPays(op, {1, 400, 7, 7}, {400, 400, 3, 3}, 2));    // 3x3
  Op strided = PointwiseConv();
  strided.strides = {2, 2};
  BOOST_TEST(!SplitOverChannelsPays(strided, {1, 400, 7, 7}, {400, 400, 1, 1}, 2));
  Op padded = PointwiseConv();
  padded.pads = {1, 1, 1, 1};
  BOOST_TEST(!SplitOverChannelsPays(padded, {1, 400, 7, 7}, {400, 400, 1, 1}, 2));
  Op grouped = PointwiseConv();
  grouped.group = 2;
  BOOST_TEST(!SplitOverChannelsPays(grouped, {1, 400, 7, 7}, {400, 200, 1, 1}, 2));
}

BOOST_AUTO_TEST_CASE(channels_are_split_in_whole_blocks) {
  BOOST_TEST(ChannelSplit(400, 2) == (std::vector<int64_t>{0, 200, 400}),
             boost::test_tools::per_element());
  BOOST_TEST(ChannelSplit(408, 2) == (std::vector<int64_t>{0, 200, 408}),
             boost::test_tools::per_element());
  BOOST_TEST(ChannelSplit(24, 3) == (std::vector<int64_t>{0, 8, 16, 24}),
             boost::test_tools::per_element());
  BOOST_TEST(ChannelSplit(40, 4) == (std::vector<int64_t>{0, 8, 16, 24, 40}),
             boost::test_tools::per_element());
}

// The impl of every conv step a profiled run reports.
struct ConvImpls : RegionProfiler {
  std::vector<std::string> impls;
  void Record(const RegionStepSample& s) override {
    if (std::string(s.kind) == "conv") impls.emplace_back(s.impl);
  }
};

constexpr int64_t kIn = 392, kOut = 408;  // 49 and 51 blocks: uneven parts

// Conv 392 -> 408 (+ bias) -> Relu, then Conv 408 -> 408 (+ bias) + the first's output (a
// sum post-op on a copy: the residual is also its src) -> Relu, on [1, 392, h, h].
CompiledRegion TwoConvs(const Floats& w1, const Floats& b1, const Floats& w2, const Floats& b2) {
  std::string text =
      "<ir_version: 8, opset_import: [\"\" : 17]>\n g (float[1, 392, H, H] X) => (float Y) {\n"
      "  c = Conv (X, W1, B1)\n  r = Relu(c)\n  d = Conv (r, W2, B2)\n  s = Add(d, r)\n"
      "  Y = Relu(s)\n}";
  return Compile(MakeGraph(text, {{"W1", {kOut, kIn, 1, 1}, w1},
                                  {"B1", {kOut}, b1},
                                  {"W2", {kOut, kOut, 1, 1}, w2},
                                  {"B2", {kOut}, b2}}));
}

void CheckAtThreads(int threads, int64_t h, int want_team_steps) {
  Floats w1 = Random(kOut * kIn, 80, -0.05f, 0.05f), b1 = Random(kOut, 81);
  Floats w2 = Random(kOut * kOut, 82, -0.05f, 0.05f), b2 = Random(kOut, 83);
  Dims xd = {1, kIn, h, h}, yd, rd;
  Floats x = Random(Numel(xd), 84);
  Floats r = RefConv2d(x, xd, w1, {kOut, kIn, 1, 1}, &b1, ConvParams{}, &rd);
  for (float& v : r) v = std::max(v, 0.0f);
  Floats want = RefConv2d(r, rd, w2, {kOut, kOut, 1, 1}, &b2, ConvParams{}, &yd);
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(want[i] + r[i], 0.0f);
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);  // plans are built for the team of their first run
  CompiledRegion region = TwoConvs(w1, b1, w2, b2);
  std::vector<Floats> got;
  ConvImpls steps;
  Status status = region.TryRun({{xd, x}}, {yd}, &got, &steps);
  omp_set_num_threads(before);
  BOOST_REQUIRE_MESSAGE(status.ok(), status.ToString());
  int team_steps = 0;
  for (const std::string& impl : steps.impls)
    team_steps += impl.find("jit_1x1") == 0 && impl.find(" team of 2") != std::string::npos;
  BOOST_TEST(team_steps == want_team_steps);
  // f32 sums of ~400 products of magnitude <= 0.05, values of magnitude ~1.
  BOOST_TEST(Close(got[0], want, 2e-5 * std::sqrt(2.0 * kIn), 1e-4));
}

BOOST_AUTO_TEST_CASE(split_convs_match_the_reference_at_two_threads) {
  CheckAtThreads(2, 7, 4);  // both convs, two parts each
  CheckAtThreads(2, 5, 4);
}

BOOST_AUTO_TEST_CASE(convs_are_not_split_at_one_thread_or_on_larger_images) {
  CheckAtThreads(1, 7, 0);
  CheckAtThreads(2, 12, 0);  // 144 positions
}

}  // namespace
}  // namespace kiln::onednn::testing
