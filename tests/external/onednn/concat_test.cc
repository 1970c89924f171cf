// Concats written in place (Builder::ConcatInPlace): producers write their outputs at their
// place inside the concat's output, so the concat runs no copy (fire modules, inception and
// dense blocks), and where that cannot hold (batch 2, an offset inside a channel block, one
// tensor twice, a region input) the results are the same; concats that copy do it by one reorder
// per input. Results against plain reference loops.
#define BOOST_TEST_MODULE onednn_concat_test
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <string>

#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

double DotTolerance(int64_t k) { return 1e-5 * std::max<double>(1.0, std::sqrt(k)) * 4; }

const ConvParams kSame3x3{1, {1, 1}, {1, 1}, {1, 1, 1, 1}};

Floats Relu(Floats v) {
  for (float& x : v) x = std::max(x, 0.0f);
  return v;
}

// Concatenates NCHW tensors along C.
Floats ConcatC(const std::vector<std::pair<Dims, Floats>>& parts) {
  Floats out;
  int64_t n = parts[0].first[0];
  for (int64_t b = 0; b < n; ++b) {
    for (const auto& [d, v] : parts) {
      int64_t per = Numel(d) / n;
      out.insert(out.end(), v.begin() + b * per, v.begin() + (b + 1) * per);
    }
  }
  return out;
}

// A squeezenet fire module: a squeeze conv, two expand convs concatenated, then a max pool (the
// concat's output is an intermediate). At batch 1 both expand convs write into the concat's
// output; at batch 2 their places are not dense in the blocked layout and the concat copies.
BOOST_AUTO_TEST_CASE(fire_module_concat_in_place_at_batch_1) {
  Dims sd = {8, 16, 1, 1}, ad = {16, 8, 1, 1}, bd = {16, 8, 3, 3};
  Floats ws = Random(Numel(sd), 1), wa = Random(Numel(ad), 2), wb = Random(Numel(bd), 3);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 16, 6, 6] X) => (float Y) {
      s0 = Conv(X, Ws)
      s = Relu(s0)
      a0 = Conv(s, Wa)
      a = Relu(a0)
      b0 = Conv <pads = [1, 1, 1, 1]> (s, Wb)
      b = Relu(b0)
      c = Concat <axis = 1> (a, b)
      Y = MaxPool <kernel_shape = [2, 2], strides = [2, 2]> (c)
    })",
                                       {{"Ws", sd, ws}, {"Wa", ad, wa}, {"Wb", bd, wb}}));
  BOOST_TEST(r.region().stats().concats_in_place == 1);  // the batch-1 plan, built at creation
  for (int64_t n : {1, 2}) {
    Dims xd = {n, 16, 6, 6}, hd, ed;
    Floats x = Random(Numel(xd), 10 + n);
    Floats s = Relu(RefConv2d(x, xd, ws, sd, nullptr, {}, &hd));
    Floats a = Relu(RefConv2d(s, hd, wa, ad, nullptr, {}, &ed));
    Floats b = Relu(RefConv2d(s, hd, wb, bd, nullptr, kSame3x3, &ed));
    Dims cd = {n, 32, 6, 6}, yd;
    Floats want =
        RefPool2d(ConcatC({{ed, a}, {ed, b}}), cd, true, {2, 2}, {2, 2}, {0, 0, 0, 0}, false, &yd);
    BOOST_TEST(Close(r.Run({{xd, x}}, {yd})[0], want, DotTolerance(16 * 8 * 9), 1e-4));
  }
  RegionStats st = r.region().stats();
  BOOST_TEST(st.cached_plans == 2);
  BOOST_TEST(st.concats_in_place == 1);
}

// A dense block: every concat takes the block's input (a region input, copied into place once)
// and every earlier output again; the first concat's buffer grows to hold them all, each conv
// writes its output at its place, and each concat is a view.
BOOST_AUTO_TEST_CASE(dense_block_concats_share_one_buffer) {
  Dims w1d = {8, 8, 3, 3}, w2d = {8, 16, 3, 3}, w3d = {8, 24, 1, 1};
  Floats w1 = Random(Numel(w1d), 4), w2 = Random(Numel(w2d), 5), w3 = Random(Numel(w3d), 6);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 8, 5, 5] X) => (float Y) {
      y1 = Conv <pads = [1, 1, 1, 1]> (X, W1)
      c1 = Concat <axis = 1> (X, y1)
      h1 = Relu(c1)
      y2 = Conv <pads = [1, 1, 1, 1]> (h1, W2)
      c2 = Concat <axis = 1> (X, y1, y2)
      y3 = Conv(c2, W3)
      c3 = Concat <axis = 1> (X, y1, y2, y3)
      Y = Relu(c3)
    })",
                                       {{"W1", w1d, w1}, {"W2", w2d, w2}, {"W3", w3d, w3}}));
  Dims xd = {1, 8, 5, 5}, od;
  Floats x = Random(Numel(xd), 20);
  Floats y1 = RefConv2d(x, xd, w1, w1d, nullptr, kSame3x3, &od);
  Floats c1 = ConcatC({{xd, x}, {od, y1}});
  Floats y2 = RefConv2d(Relu(c1), {1, 16, 5, 5}, w2, w2d, nullptr, kSame3x3, &od);
  Floats c2 = ConcatC({{xd, x}, {od, y1}, {od, y2}});
  Floats y3 = RefConv2d(c2, {1, 24, 5, 5}, w3, w3d, nullptr, {}, &od);
  Floats want = Relu(ConcatC({{xd, x}, {od, y1}, {od, y2}, {od, y3}}));
  BOOST_TEST(Close(r.Run({{xd, x}}, {{1, 32, 5, 5}})[0], want, DotTolerance(16 * 9) * 4, 1e-4));
  BOOST_TEST(r.region().stats().concats_in_place == 3);
}

// Concats that cannot (an input at an offset inside a channel block) or can only partly (one
// tensor twice: written in place once, copied once) be written in place give the same values.
BOOST_AUTO_TEST_CASE(tensor_twice_and_offsets_inside_a_block) {
  for (int64_t c : {4, 8}) {
    Dims wd = {c, 8, 1, 1};
    Floats w = Random(Numel(wd), 30 + c);
    CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
      g (float[1, 8, 4, 4] X) => (float Y) {
        a0 = Conv(X, W)
        a = Relu(a0)
        t = Concat <axis = 1> (a, a)
        Y = Sigmoid(t)
      })",
                                         {{"W", wd, w}}));
    Dims xd = {1, 8, 4, 4}, ad;
    Floats x = Random(Numel(xd), 40 + c);
    Floats a = Relu(RefConv2d(x, xd, w, wd, nullptr, {}, &ad));
    Floats want = ConcatC({{ad, a}, {ad, a}});
    for (float& v : want) v = 1.0f / (1.0f + std::exp(-v));
    BOOST_TEST(Close(r.Run({{xd, x}}, {{1, 2 * c, 4, 4}})[0], want, DotTolerance(8), 1e-4),
               "C = " << c);
    BOOST_TEST(r.region().stats().concats_in_place == (c == 8 ? 1 : 0), "C = " << c);
  }
}

// Records the kind and implementation of every step of a profiled region call.
class StepKinds : public RegionProfiler {
 public:
  void Record(const RegionStepSample& s) override {
    steps.push_back(std::string(s.kind) + "(" + std::string(s.impl) + ")");
    reference = reference || s.reference;
  }
  std::vector<std::string> steps;
  bool reference = false;
};

// A ShuffleNetV2 unit's concat, returned by the region: the plain half the unit passes through
// (a region input) and the blocked output of its convolution (58 channels: not whole blocks of
// 8) are reordered straight into their places in the caller's tensor, at batch 1 and 2,
// instead of oneDNN's reference concat of mixed layouts.
BOOST_AUTO_TEST_CASE(returned_concat_reorders_each_input_into_place) {
  Dims wd = {58, 58, 1, 1};
  Floats w = Random(Numel(wd), 50);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 58, 5, 5] X, float[N, 58, 5, 5] P) => (float Y) {
      a0 = Conv(X, W)
      a = Relu(a0)
      Y = Concat <axis = 1> (P, a)
    })",
                                       {{"W", wd, w}}));
  for (int64_t n : {1, 2}) {
    Dims xd = {n, 58, 5, 5}, ad;
    Floats x = Random(Numel(xd), 60 + n), p = Random(Numel(xd), 70 + n);
    Floats want = ConcatC({{xd, p}, {xd, Relu(RefConv2d(x, xd, w, wd, nullptr, {}, &ad))}});
    std::vector<Floats> got;
    StepKinds profile;
    Status s = r.TryRun({{xd, x}, {xd, p}}, {{n, 116, 5, 5}}, &got, &profile);
    BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
    BOOST_TEST(Close(got[0], want, DotTolerance(58), 1e-4), "N = " << n);
    std::string steps;
    for (const std::string& k : profile.steps) steps += k + " ";
    BOOST_TEST(steps.find("concat") == std::string::npos, steps);
    BOOST_TEST(!profile.reference, steps);
  }
}

// U-Net's decoder: the upsampled tensor and the skip connection, both row-major region inputs,
// concatenated ahead of a 3x3 conv. Each input is reordered once into its place in the
// channel-blocked layout the conv takes (whole blocks: 16 + 16 channels), so there is neither
// a concat primitive (oneDNN 2.6's copies 7-15x slower than its reorders) nor a second reorder
// of the whole result. With 12 + 4 channels (not whole blocks) the places are row-major ones,
// still copied by reorders. Batch 1 and 2.
BOOST_AUTO_TEST_CASE(concat_of_row_major_inputs_reorders_each_into_place) {
  for (int64_t c0 : {16, 12}) {
    const int64_t c1 = c0 == 16 ? 16 : 4;  // 16 + 16, or 12 + 4
    Dims wd = {8, c0 + c1, 3, 3};
    Floats w = Random(Numel(wd), 80 + c0);
    const std::string shape0 = "float[N, " + std::to_string(c0) + ", 6, 6]";
    const std::string shape1 = "float[N, " + std::to_string(c1) + ", 6, 6]";
    CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
      g ()" + shape0 + R"( U, )" + shape1 + R"( S) => (float Y) {
        c = Concat <axis = 1> (U, S)
        y0 = Conv <pads = [1, 1, 1, 1]> (c, W)
        Y = Relu(y0)
      })",
                                         {{"W", wd, w}}));
    for (int64_t n : {1, 2}) {
      Dims ud = {n, c0, 6, 6}, sd = {n, c1, 6, 6}, cd = {n, c0 + c1, 6, 6}, yd;
      Floats u = Random(Numel(ud), 90 + n), sk = Random(Numel(sd), 95 + n);
      Floats want = Relu(RefConv2d(ConcatC({{ud, u}, {sd, sk}}), cd, w, wd, nullptr, kSame3x3, &yd));
      std::vector<Floats> got;
      StepKinds profile;
      Status st = r.TryRun({{ud, u}, {sd, sk}}, {yd}, &got, &profile);
      BOOST_REQUIRE_MESSAGE(st.ok(), st.ToString());
      BOOST_TEST(Close(got[0], want, DotTolerance((c0 + c1) * 9), 1e-4), "C0 = " << c0 << " N = " << n);
      std::string steps;
      int reorders = 0;
      for (const std::string& k : profile.steps) {
        steps += k + " ";
        reorders += k.rfind("reorder", 0) == 0;
      }
      BOOST_TEST(steps.find("concat") == std::string::npos, steps);
      BOOST_TEST(!profile.reference, steps);
      // Whole blocks: one reorder per input into the blocked layout, the conv, and the result's
      // reorder back to the caller's row-major tensor; nothing reorders the concat itself.
      if (c0 == 16) BOOST_TEST(reorders == 3, steps);
    }
  }
}

}  // namespace
}  // namespace kiln::onednn::testing
