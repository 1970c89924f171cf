// Nearest upsampling by whole factors inside a oneDNN region (region op kResize): which ONNX
// Resize / Upsample forms the codegen claims (only those that repeat each pixel exactly), a
// YOLO-like neck (conv, Upsample, concat, conv) compiled end to end as one region against the
// JIT (--external=none) with dynamic N, H, W, and the region's resampling step on the blocked
// layout its conv wrote, against a plain reference, bit for bit.
#define BOOST_TEST_MODULE onednn_resize_test
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "compiler/compile.h"
#include "embed/compile.h"
#include "external/onednn/compile/codegen.h"
#include "external/onednn/run/runtime.h"
#include "external/registry/registry.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"
#include "tests/external/onednn/test_util.h"

namespace kiln::compiler {
namespace {

namespace data = boost::unit_test::data;

// A Resize (or Upsample) form: the opset, the node's attributes and operands, and whether
// oneDNN repeats pixels exactly there (claimed).
struct ResizeCase {
  const char* name;
  int opset;
  const char* node;  // "u = ..." reading `a` and the constants roi, scales, sizes
  bool claimed;
};
std::ostream& operator<<(std::ostream& os, const ResizeCase& c) { return os << c.name; }

#define NEAREST(coord, nearest)                                                         \
  "u = Resize <mode = \"nearest\", coordinate_transformation_mode = \"" coord           \
  "\", nearest_mode = \"" nearest "\"> (a, roi, scales)"

const ResizeCase kCases[] = {
    // torch's F.interpolate(scale_factor=2, mode="nearest") (yolo_like's Upsample).
    {"asymmetric_floor", 17, NEAREST("asymmetric", "floor"), true},
    {"tf_half_pixel_for_nn_floor", 17, NEAREST("tf_half_pixel_for_nn", "floor"), true},
    {"half_pixel_round_prefer_floor", 17, NEAREST("half_pixel", "round_prefer_floor"), true},
    {"half_pixel_round_prefer_ceil", 17, NEAREST("half_pixel", "round_prefer_ceil"), true},
    {"pytorch_half_pixel", 17, NEAREST("pytorch_half_pixel", "round_prefer_floor"), true},
    {"half_pixel_symmetric", 19, NEAREST("half_pixel_symmetric", "round_prefer_ceil"), true},
    {"defaults", 13, "u = Resize(a, roi, scales)", true},  // half_pixel, round_prefer_floor
    {"opset_18_axes", 18,
     "u = Resize <mode = \"nearest\", axes = [2, 3], coordinate_transformation_mode = "
     "\"asymmetric\", nearest_mode = \"floor\"> (a, roi, scales_hw)",
     true},
    {"resize_10", 10, "u = Resize <mode = \"nearest\"> (a, scales)", true},
    {"upsample_9", 9, "u = Upsample <mode = \"nearest\"> (a, scales)", true},
    // Other pixels for some output positions: the JIT runs them.
    {"asymmetric_round", 17, NEAREST("asymmetric", "round_prefer_floor"), false},
    {"half_pixel_floor", 17, NEAREST("half_pixel", "floor"), false},
    {"half_pixel_ceil", 17, NEAREST("half_pixel", "ceil"), false},
    {"align_corners", 17, NEAREST("align_corners", "floor"), false},
    {"tf_half_pixel_for_nn_round", 17, NEAREST("tf_half_pixel_for_nn", "round_prefer_ceil"),
     false},
    {"linear", 17,
     "u = Resize <mode = \"linear\", coordinate_transformation_mode = \"half_pixel\"> (a, roi, "
     "scales)",
     false},
    {"fractional_scale", 17,
     "u = Resize <mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", "
     "nearest_mode = \"floor\"> (a, roi, scales_frac)",
     false},
    {"downscale", 17,
     "u = Resize <mode = \"nearest\", coordinate_transformation_mode = \"asymmetric\", "
     "nearest_mode = \"floor\"> (a, roi, scales_down)",
     false},
};

// YOLO's top-down step: a = Relu(Conv stride 2 (x)), u = the upsampling of a (x2 rows, x3
// columns), then Concat(u, Conv(u)) -> Conv. Weights are graph inputs; the Resize's operands
// constants.
std::string Neck(const ResizeCase& c) {
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(c.opset) + R"(]>
    g (float[N, 8, H, W] x, float[16, 8, 3, 3] wa, float[8, 16, 1, 1] wb,
       float[16, 24, 3, 3] wc) => (float[N, 16, HO, WO] y) {
      a0 = Conv <pads = [1, 1, 1, 1], strides = [2, 2]> (x, wa)
      a = Relu(a0)
      roi = Constant <value = float[8] {0, 0, 0, 0, 1, 1, 1, 1}> ()
      scales = Constant <value = float[4] {1, 1, 2, 3}> ()
      scales_hw = Constant <value = float[2] {2, 3}> ()
      scales_frac = Constant <value = float[4] {1, 1, 2, 2.5}> ()
      scales_down = Constant <value = float[4] {1, 1, 1, 0.5}> ()
      )" + c.node + R"(
      b0 = Conv(u, wb)
      b = Relu(b0)
      cat = Concat <axis = 1> (u, b)
      y = Conv <pads = [1, 1, 1, 1]> (cat, wc)
    })";
}

std::vector<uint8_t> CompileText(const std::string& text, const std::string& external,
                                 CompileStats* stats) {
  std::string bytes = testing::ModelBytes(text);
  CompileOptions o;
  o.external = external;
  auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, stats);
  if (!kiln.ok()) BOOST_FAIL(kiln.status().message());
  return *kiln;
}

std::shared_ptr<const Executable> LoadRequiringOneDnn(const std::vector<uint8_t>& bytes) {
  auto reg = std::make_shared<ExternalRegistry>();
  Status s = onednn::RegisterOneDnn(*reg);
  if (!s.ok()) BOOST_FAIL(s.message());
  LoadOptions options;
  options.externals = reg;
  options.require_vendor = true;  // a declined region (its fallback) would prove nothing
  auto exe = testing::LoadWithJit(bytes, std::move(options));
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  return *exe;
}

std::vector<TensorDataRef> Run(const std::shared_ptr<const Executable>& exe,
                               const std::vector<TensorDataRef>& in) {
  auto out = testing::RunExecutable(exe, in);
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  return *out;
}

// The claim follows the table, for every form.
BOOST_DATA_TEST_CASE(claims_only_forms_that_repeat_pixels, data::make(kCases), c) {
  compiler::Graph g = onednn::testing::MakeGraph(Neck(c));
  compiler::NodeId resize = g.value(*g.FindValue("u")).producer;
  BOOST_TEST(onednn::IsSupported(g, resize) == c.claimed);
}

// Claimed, the neck is one region (before kResize the Resize split it in two, with the
// blocked activations copied out to the JIT and back); declined, two. Either way the result is
// the JIT's: the copies are exact, the convolutions' sums (at most 216 products) may round
// differently. (A few forms: each compiles twice through LLVM.)
BOOST_DATA_TEST_CASE(a_neck_is_one_region_when_the_resize_repeats_pixels,
                     data::make({0, 3, 9, 11}), index) {
  const ResizeCase& c = kCases[index];
  BOOST_TEST_CONTEXT(c.name) {
    CompileStats dnn_stats, none_stats;
    std::string text = Neck(c);
    auto dnn = LoadRequiringOneDnn(CompileText(text, "onednn", &dnn_stats));
    auto none = LoadRequiringOneDnn(CompileText(text, "none", &none_stats));
    BOOST_TEST(dnn_stats.external_regions == (c.claimed ? 1 : 2));
    BOOST_TEST(none_stats.external_regions == 0);
    auto wa = testing::RandomTensor(DType::kF32, {16, 8, 3, 3}, -0.5, 0.5, 1);
    auto wb = testing::RandomTensor(DType::kF32, {8, 16, 1, 1}, -0.5, 0.5, 2);
    auto wc = testing::RandomTensor(DType::kF32, {16, 24, 3, 3}, -0.5, 0.5, 3);
    for (auto [n, h, w] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
             {1, 8, 10}, {2, 7, 5}, {1, 1, 1}}) {
      auto x = testing::RandomTensor(DType::kF32, {n, 8, h, w}, -1, 1, 10 + n + h);
      auto got = Run(dnn, {x, wa, wb, wc});
      auto want = Run(none, {x, wa, wb, wc});
      BOOST_REQUIRE(got[0]->dims() == want[0]->dims());
      std::string diff = testing::Compare(*got[0], *want[0], 1e-5, 1e-5);
      BOOST_TEST(diff.empty(), "N=" << n << " H=" << h << " W=" << w << ": " << diff);
    }
  }
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::onednn::testing {
namespace {

struct StepsOf : RegionProfiler {
  explicit StepsOf(std::string k) : kind(std::move(k)) {}
  std::string kind;
  std::vector<std::string> impls, shapes;
  void Record(const RegionStepSample& s) override {
    if (s.kind != kind) return;
    impls.emplace_back(s.impl);
    shapes.emplace_back(s.shapes);
  }
};

// sizes: whole multiples of constant input dims are factors too; sizes that are not, or
// keep_aspect_ratio_policy (a scale of its own), are not claimed.
BOOST_AUTO_TEST_CASE(sizes_that_multiply_constant_dims_are_claimed) {
  for (auto [sizes, policy, claimed] : std::vector<std::tuple<const char*, const char*, bool>>{
           {"2, 8, 8, 15", "stretch", true},
           {"2, 8, 8, 14", "stretch", false},
           {"2, 8, 8, 15", "not_larger", false},
           {"2, 16, 8, 15", "stretch", false}}) {
    BOOST_TEST_CONTEXT(sizes << " " << policy) {
      compiler::Graph g = MakeGraph(std::string(R"(<ir_version: 8, opset_import: ["" : 18]>
        g (float[2, 8, 4, 5] X) => (float Y) {
          sizes = Constant <value = int64[4] {)") + sizes + R"(}> ()
          Y = Resize <mode = "nearest", keep_aspect_ratio_policy = ")" + policy +
                                    R"(", coordinate_transformation_mode = "asymmetric",
                      nearest_mode = "floor"> (X, , , sizes)
        })");
      compiler::NodeId resize = g.value(*g.FindValue("Y")).producer;
      BOOST_TEST(IsSupported(g, resize) == claimed);
    }
  }
}

// After a convolution (12 channels: one block of 8 half padded) the resampling runs on the
// blocked layout the conv wrote, and repeats its pixels bit for bit (checked against the
// region's own conv output, a second region output).
BOOST_AUTO_TEST_CASE(resampling_runs_on_the_blocked_layout_and_repeats_pixels) {
  Dims wd = {12, 3, 3, 3};
  Floats w = Random(Numel(wd), 70);
  CompiledRegion r = Compile(MakeGraph(R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 3, H, W] X) => (float C, float U) {
      c0 = Conv <pads = [1, 1, 1, 1]> (X, W)
      C = Relu(c0)
      U = Resize <mode = "nearest", coordinate_transformation_mode = "asymmetric",
                  nearest_mode = "floor"> (C, , scales)
    })",
                                       {{"W", wd, w}, {"scales", {4}, {1, 1, 3, 2}}}));
  for (Dims xd : {Dims{1, 3, 5, 7}, Dims{2, 3, 4, 4}}) {
    Dims cd = {xd[0], 12, xd[2], xd[3]}, ud = {xd[0], 12, 3 * xd[2], 2 * xd[3]};
    Floats x = Random(Numel(xd), 71);
    std::vector<Floats> got;
    StepsOf profiler("resampling");
    BOOST_REQUIRE(r.TryRun({{xd, x}}, {cd, ud}, &got, &profiler).ok());
    const Floats &c = got[0], &u = got[1];
    int64_t mismatches = 0;
    for (int64_t i = 0; i < Numel(ud); ++i) {
      int64_t ox = i % ud[3], oy = i / ud[3] % ud[2], nc = i / (ud[2] * ud[3]);
      float want = c[(nc * cd[2] + oy / 3) * cd[3] + ox / 2];
      mismatches += u[i] != want;
    }
    BOOST_TEST(mismatches == 0);
    BOOST_REQUIRE(profiler.impls.size() == 1u);
    BOOST_TEST(profiler.impls[0].find("ref") == std::string::npos, profiler.impls[0]);
    // "2x12x4x4:aBcd8b -> 2x12x12x8:aBcd8b": no reorder to a plain layout around it.
    BOOST_TEST(profiler.shapes[0].find("aBcd8b ->") != std::string::npos, profiler.shapes[0]);
  }
}

}  // namespace
}  // namespace kiln::onednn::testing
