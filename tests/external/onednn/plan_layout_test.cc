// Layout choices of the oneDNN plan builder that save work rather than change results:
// a wide padded convolution (and a causal Conv1d's left-only pads) run as a direct JIT
// convolution on an explicitly padded copy of its input (plan_conv_pool.cc, PadExplicitly)
// instead of gemm, and a squeeze-excite scale read in its producer's channel blocking
// (plan_eltwise_binary.cc) instead of reordered to row-major and back. Each is asserted on the
// steps a profiled run reports, and checked against a float64 reference at one and two
// threads and across repeated calls (the padded copy's border must stay zero while the
// workspace is reused).
#define BOOST_TEST_MODULE onednn_plan_layout_test
#include <omp.h>

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tests/external/onednn/test_util.h"

namespace kiln::onednn::testing {
namespace {

namespace data = boost::unit_test::data;

// The kind, implementation and operand shapes of every step of a profiled run.
struct Steps : RegionProfiler {
  struct Step {
    std::string kind, impl, shapes;
  };
  std::vector<Step> steps;
  void Record(const RegionStepSample& s) override {
    steps.push_back({std::string(s.kind), std::string(s.impl), std::string(s.shapes)});
  }
  const Step* Find(const std::string& kind) const {
    for (const Step& s : steps) {
      if (s.kind == kind) return &s;
    }
    return nullptr;
  }
};

std::string List(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

std::string Shape(const Dims& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "x" : "") + std::to_string(d[i]);
  return s;
}

// Runs `r` on `inputs` at one and two threads, three calls each (the workspace is reused),
// and checks every output against `want` (|err| <= tol + 1e-4 |want|). The last call at two
// threads is profiled into *steps.
void RunAndCheck(const CompiledRegion& r, const std::vector<std::pair<Dims, Floats>>& inputs,
                 const Dims& out, const Floats& want, double tol, Steps* steps) {
  const int before = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (int call = 0; call < 3; ++call) {
      std::vector<Floats> got;
      Status s = r.TryRun(inputs, {out}, &got, threads == 2 && call == 2 ? steps : nullptr);
      BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
      BOOST_TEST_CONTEXT("threads " << threads << ", call " << call) {
        BOOST_TEST(Close(got[0], want, tol, 1e-4));
      }
    }
  }
  omp_set_num_threads(before);
}

// ---- Explicit padding --------------------------------------------------------------------------

struct PadCase {
  const char* name;
  int64_t c, h, k, stride;
  Dims pads;           // top, left, bottom, right
  bool blocked_input;  // the conv reads a blocked intermediate (a 1x1 conv before it)
  bool padded;         // expected: the conv runs on a padded copy as jit
};
std::ostream& operator<<(std::ostream& os, const PadCase& c) { return os << c.name; }

const PadCase kPadCases[] = {
    // AlexNet's first layer, scaled down: gemm with its pads, jit:avx2 on a padded copy.
    {"alexnet_stem", 3, 35, 11, 4, {2, 2, 2, 2}, false, true},
    {"asymmetric_pads", 3, 30, 9, 2, {3, 1, 0, 2}, false, true},
    {"blocked_input", 8, 26, 9, 2, {2, 2, 2, 2}, true, true},
    // The padded copy would be over twice the input: left to oneDNN's gemm.
    {"padding_outweighs_input", 3, 8, 9, 2, {4, 4, 4, 4}, false, false},
};

BOOST_DATA_TEST_CASE(wide_padded_conv_runs_direct_on_a_padded_copy, data::make(kPadCases), c) {
  const int64_t oc = 16;
  Dims xd = {1, c.c, c.h, c.h}, wd = {oc, c.c, c.k, c.k}, w0d = {c.c, c.c, 1, 1};
  Floats w = Random(Numel(wd), 90), b = Random(oc, 91), w0 = Random(Numel(w0d), 92);
  Floats x = Random(Numel(xd), 93);
  std::string conv = "Conv <strides = [" + std::to_string(c.stride) + ", " +
                     std::to_string(c.stride) + "], pads = " + List(c.pads) + ">";
  std::string body = c.blocked_input ? "  z = Conv(X, W0)\n  c = " + conv + " (z, W, B)\n"
                                     : "  c = " + conv + " (X, W, B)\n";
  CompiledRegion r = Compile(MakeGraph(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n g (float" + List(xd) + " X) => (float Y) {\n" +
          body + "  Y = Relu(c)\n}",
      {{"W", wd, w}, {"B", {oc}, b}, {"W0", w0d, w0}}));
  Floats in = x;
  Dims ind = xd, yd;
  if (c.blocked_input) in = RefConv2d(x, xd, w0, w0d, nullptr, ConvParams{}, &ind);
  ConvParams cp{1, {c.stride, c.stride}, {1, 1}, c.pads};
  Floats want = RefConv2d(in, ind, w, wd, &b, cp, &yd);
  for (float& v : want) v = std::max(v, 0.0f);
  Steps steps;
  // f32 sums of c * k * k products of values in [-1, 1] (twice that through the 1x1 conv).
  double tol = 1e-5 * std::sqrt(static_cast<double>(c.c * c.k * c.k)) * (c.blocked_input ? 8 : 4);
  RunAndCheck(r, {{xd, x}}, yd, want, tol, &steps);
  const Steps::Step* wide = nullptr;
  for (const Steps::Step& s : steps.steps) {
    if (s.kind == "conv" && s.shapes.find(Shape(wd)) != std::string::npos) wide = &s;
  }
  BOOST_REQUIRE(wide != nullptr);
  Dims padded = {1, c.c, c.h + c.pads[0] + c.pads[2], c.h + c.pads[1] + c.pads[3]};
  BOOST_TEST_CONTEXT(wide->impl << " " << wide->shapes) {
    BOOST_TEST((wide->impl.rfind("jit", 0) == 0) == c.padded);
    BOOST_TEST((wide->shapes.rfind(Shape(padded) + ":", 0) == 0) == c.padded);
  }
}

// A causal TCN block: dilated Conv1d with left-only pads (folded from its Pad by Simplify)
// -> Relu -> the same again -> + the block's input (a binary post-op after the Relu) -> Relu.
// oneDNN 2.6 runs such pads only as gemm on plain layouts; both convs must run as direct JIT
// ones on padded copies, the residual in the second's layout.
BOOST_AUTO_TEST_CASE(causal_conv1d_runs_direct_on_a_padded_copy) {
  const int64_t c = 16, t = 50, dil = 4;
  Dims xd = {1, c, t}, wd = {c, c, 3};
  Floats w1 = Random(Numel(wd), 94), w2 = Random(Numel(wd), 95), b = Random(c, 96);
  Floats x = Random(Numel(xd), 97);
  std::string conv = "Conv <dilations = [4], pads = [8, 0]>";
  CompiledRegion r = Compile(MakeGraph(
      "<ir_version: 8, opset_import: [\"\" : 17]>\n g (float" + List(xd) +
          " X) => (float Y) {\n  a = " + conv + " (X, W1, B)\n  ra = Relu(a)\n  d = " + conv +
          " (ra, W2, B)\n  rd = Relu(d)\n  s = Add(rd, X)\n  Y = Relu(s)\n}",
      {{"W1", wd, w1}, {"W2", wd, w2}, {"B", {c}, b}}));
  // The reference as 2-D convolutions over [1, C, 1, T].
  ConvParams cp{1, {1, 1}, {1, dil}, {0, 2 * dil, 0, 0}};
  Dims x2 = {1, c, 1, t}, w2d = {c, c, 1, 3}, yd;
  Floats ra = RefConv2d(x, x2, w1, w2d, &b, cp, &yd);
  for (float& v : ra) v = std::max(v, 0.0f);
  Floats want = RefConv2d(ra, x2, w2, w2d, &b, cp, &yd);
  for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(std::max(want[i], 0.0f) + x[i], 0.0f);
  Steps steps;
  // f32 sums of c * 3 products of values in [-1, 1], twice.
  RunAndCheck(r, {{xd, x}}, xd, want, 1e-5 * std::sqrt(3.0 * c) * 8, &steps);
  int convs = 0;
  for (const Steps::Step& s : steps.steps) {
    if (s.kind != "conv") continue;
    ++convs;
    BOOST_TEST_CONTEXT(s.impl << " " << s.shapes) {
      BOOST_TEST(s.impl.rfind("jit", 0) == 0);
      BOOST_TEST(s.shapes.rfind(Shape({1, c, t + 2 * dil}) + ":", 0) == 0);
    }
  }
  BOOST_TEST(convs == 2);
}

// ---- Squeeze-excite scale ----------------------------------------------------------------------

// EfficientNet's squeeze-excite block: the gate, made by a blocked 1x1 conv on the pooled
// channels, multiplies the blocked feature map. No step reorders the [1, C, 1, 1] gate.
BOOST_AUTO_TEST_CASE(squeeze_excite_scale_is_read_in_its_blocking) {
  const int64_t c = 16, s = 8, hw = 10;
  Dims xd = {1, c, hw, hw}, wd = {c, c, 1, 1}, w1d = {s, c, 1, 1}, w2d = {c, s, 1, 1};
  Floats x = Random(Numel(xd), 94), w = Random(Numel(wd), 95), w1 = Random(Numel(w1d), 96),
         w2 = Random(Numel(w2d), 97);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 16, 10, 10] X) => (float Y) {
      f = Conv(X, W)
      p = GlobalAveragePool(f)
      q = Conv(p, W1)
      t = Relu(q)
      u = Conv(t, W2)
      g = Sigmoid(u)
      Y = Mul(f, g)
    })",
                                       {{"W", wd, w}, {"W1", w1d, w1}, {"W2", w2d, w2}}));
  Dims fd;
  Floats f = RefConv2d(x, xd, w, wd, nullptr, ConvParams{}, &fd);
  std::vector<double> pooled(c, 0.0), hidden(s, 0.0), gate(c, 0.0);
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t p = 0; p < hw * hw; ++p) pooled[i] += f[i * hw * hw + p];
    pooled[i] /= hw * hw;
  }
  for (int64_t j = 0; j < s; ++j) {
    for (int64_t i = 0; i < c; ++i) hidden[j] += w1[j * c + i] * pooled[i];
    hidden[j] = std::max(hidden[j], 0.0);
  }
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t j = 0; j < s; ++j) gate[i] += w2[i * s + j] * hidden[j];
    gate[i] = 1.0 / (1.0 + std::exp(-gate[i]));
  }
  Floats want(f.size());
  for (size_t k = 0; k < f.size(); ++k) want[k] = static_cast<float>(f[k] * gate[k / (hw * hw)]);
  Steps steps;
  RunAndCheck(r, {{xd, x}}, xd, want, 1e-5, &steps);
  const Steps::Step* mul = steps.Find("binary");
  BOOST_REQUIRE(mul != nullptr);
  BOOST_TEST(mul->impl.rfind("ref", 0) != 0, mul->impl);
  for (const Steps::Step& st : steps.steps) {
    BOOST_TEST_CONTEXT(st.kind << " " << st.shapes) {
      BOOST_TEST(!(st.kind == "reorder" && st.shapes.rfind("1x16x1x1:", 0) == 0));
    }
  }
}

// ---- Mixed-layout operands ---------------------------------------------------------------------

// A BiFPN's fusion: a row-major tensor (here the region input) and a blocked conv output of the
// same shape, subtracted in either order. oneDNN 2.6 gives mixed layouts its reference kernel
// (10 ms for 1x64x16x16); the plan reorders one operand so that the JIT kernel runs.
BOOST_AUTO_TEST_CASE(full_shape_operands_in_mixed_layouts_get_the_jit_binary) {
  const int64_t c = 16, hw = 10;
  Dims xd = {1, c, hw, hw}, wd = {c, c, 1, 1};
  Floats x = Random(Numel(xd), 98), w = Random(Numel(wd), 99);
  Dims fd;
  Floats f = RefConv2d(x, xd, w, wd, nullptr, ConvParams{}, &fd);
  for (bool plain_first : {true, false}) {
    BOOST_TEST_CONTEXT("plain operand first: " << plain_first) {
      CompiledRegion r = Compile(MakeGraph(
          std::string(R"(<ir_version: 8, opset_import: ["" : 17]>
        g (float[1, 16, 10, 10] X) => (float Y) {
          f = Conv(X, W)
          Y = )") + (plain_first ? "Sub(X, f)" : "Sub(f, X)") + "\n        }",
          {{"W", wd, w}}));
      Floats want(f.size());
      for (size_t k = 0; k < f.size(); ++k)
        want[k] = plain_first ? static_cast<float>(x[k] - f[k]) : static_cast<float>(f[k] - x[k]);
      Steps steps;
      RunAndCheck(r, {{xd, x}}, xd, want, 1e-5, &steps);
      // (The subtraction may also be fused into the conv as a post-op; no step is ref.)
      BOOST_TEST(!steps.steps.empty());
      for (const Steps::Step& st : steps.steps)
        BOOST_TEST(st.impl.rfind("ref", 0) != 0, st.kind + " " + st.impl + " " + st.shapes);
    }
  }
}

}  // namespace
}  // namespace kiln::onednn::testing
