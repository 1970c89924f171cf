// Fallback functions (compiler/emit/fallback.cc) end to end: every oneDNN region gets one; a
// region oneDNN declines at load (a reference primitive) and the regions of an absent vendor
// run it with one notice and give --external=none's answer; require_vendor makes both errors
// naming vendor and region; without fallbacks oneDNN runs what it would decline, and an absent
// vendor is the error it always was; regions whose inputs have computed dims (a strided conv of
// a dynamic image) get fallbacks too.
#define BOOST_TEST_MODULE fallback_test
#include <boost/test/unit_test.hpp>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "embed/compile.h"
#include "external/onednn/run/runtime.h"
#include "external/registry/registry.h"
#include "tests/compiler/conv_net.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::Compare;
using testing::kConvNet;

// A convolution whose region ends in a softmax over the batch: in oneDNN 2.6 that softmax
// (the outermost axis) is a reference implementation ('ref:any'), so the runtime declines.
const char* kConvSoftmax = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[N, 3, 8, 8] x, float[8, 3, 3, 3] w, float[8] b) => (float[N, 8, 8, 8] y) {
    c = Conv <pads = [1, 1, 1, 1]> (x, w, b)
    r = Relu(c)
    y = Softmax <axis = 0> (r)
  }
)";

std::vector<uint8_t> CompileText(const std::string& text, const std::string& external,
                                 bool fallbacks = true, CompileStats* stats = nullptr) {
  std::string bytes = testing::ModelBytes(text);
  CompileOptions o;
  o.external = external;
  o.external_fallbacks = fallbacks;
  auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, stats);
  if (!kiln.ok()) BOOST_FAIL(kiln.status().message());
  return *kiln;
}

std::shared_ptr<ExternalRegistry> WithOneDnn() {
  auto reg = std::make_shared<ExternalRegistry>();
  Status s = onednn::RegisterOneDnn(*reg);
  if (!s.ok()) BOOST_FAIL(s.message());
  return reg;
}

struct Load {
  std::vector<std::string> notices;
  StatusOr<std::shared_ptr<const Executable>> exe = Status(Internal("not loaded"));

  Load(const std::vector<uint8_t>& bytes, std::shared_ptr<ExternalRegistry> vendors,
       bool require_vendor = false) {
    LoadOptions options;
    options.externals = std::move(vendors);
    options.require_vendor = require_vendor;
    options.notice = [this](const std::string& line) { notices.push_back(line); };
    exe = testing::LoadWithJit(bytes, std::move(options));
  }
};

std::vector<TensorDataRef> Run(const StatusOr<std::shared_ptr<const Executable>>& exe,
                               const std::vector<TensorDataRef>& in) {
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  auto out = testing::RunExecutable(*exe, in);
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  return *out;
}

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The fallback lowers the region's nodes as --external=none does; fusion across the region's
// edge may differ, so f32 rounding may too (a few ulps of values near 1).
constexpr double kRtol = 1e-5, kAtol = 1e-6;

BOOST_AUTO_TEST_CASE(a_declined_region_runs_its_fallback_and_matches_none) {
  CompileStats stats;
  std::vector<uint8_t> dnn = CompileText(kConvSoftmax, "onednn", true, &stats);
  BOOST_TEST(stats.external_regions == 1);
  BOOST_TEST(stats.fallback_functions == 1);
  Load fell_back(dnn, WithOneDnn());
  BOOST_REQUIRE_MESSAGE(fell_back.exe.ok(), fell_back.exe.status().ToString());
  BOOST_TEST((*fell_back.exe)->external_region(0) == nullptr);
  BOOST_TEST((*fell_back.exe)->external_fallback(0) >= 0);
  BOOST_REQUIRE(fell_back.notices.size() == 1u);
  BOOST_TEST(Contains(fell_back.notices[0], "vendor 'onednn' declined 1 of 1 regions"));
  BOOST_TEST(Contains(fell_back.notices[0], "region 'onednn_0'"));
  BOOST_TEST(Contains(fell_back.notices[0], "(Softmax) would run oneDNN's reference "
                                            "implementation 'ref:any'"));
  Load none(CompileText(kConvSoftmax, "none"), WithOneDnn());
  auto w = testing::RandomTensor(DType::kF32, {8, 3, 3, 3}, -0.5, 0.5, 1);
  auto b = testing::RandomTensor(DType::kF32, {8}, -0.5, 0.5, 2);
  for (int64_t n : {2, 3}) {
    auto x = testing::RandomTensor(DType::kF32, {n, 3, 8, 8}, -1, 1, 10 + n);
    auto got = Run(fell_back.exe, {x, w, b});
    auto want = Run(none.exe, {x, w, b});
    std::string diff = Compare(*got[0], *want[0], kRtol, kAtol);
    BOOST_TEST(diff.empty(), "N=" << n << ": " << diff);
  }
  Load required(dnn, WithOneDnn(), true);
  BOOST_REQUIRE(!required.exe.ok());
  BOOST_TEST(required.exe.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(Contains(required.exe.status().message(),
                      "external_regions[0] 'onednn_0' (vendor 'onednn'): the vendor declined "
                      "the region: region 'onednn_0': "));
  BOOST_TEST(Contains(required.exe.status().message(), "--require-vendor"));
  // Without a fallback oneDNN may not decline: it runs the region as it did before.
  Load bare(CompileText(kConvSoftmax, "onednn", false), WithOneDnn());
  BOOST_REQUIRE_MESSAGE(bare.exe.ok(), bare.exe.status().ToString());
  BOOST_TEST((*bare.exe)->external_region(0) != nullptr);
  BOOST_TEST(bare.notices.empty());
  auto x = testing::RandomTensor(DType::kF32, {2, 3, 8, 8}, -1, 1, 20);
  std::string diff = Compare(*Run(bare.exe, {x, w, b})[0], *Run(none.exe, {x, w, b})[0], 1e-4, 1e-5);
  BOOST_TEST(diff.empty(), diff);
}

BOOST_AUTO_TEST_CASE(an_absent_vendors_regions_run_their_fallbacks_and_match_none) {
  CompileStats stats;
  std::vector<uint8_t> dnn = CompileText(kConvNet, "onednn", true, &stats);
  BOOST_TEST(stats.external_regions >= 1);
  BOOST_TEST(stats.fallback_functions == stats.external_regions);
  Load with_vendor(dnn, WithOneDnn());
  BOOST_TEST(with_vendor.notices.empty());
  Load absent(dnn, std::make_shared<ExternalRegistry>());
  BOOST_REQUIRE(absent.notices.size() == 1u);
  BOOST_TEST(Contains(absent.notices[0], "no runtime is registered for vendor 'onednn': its "
                                         "regions onednn_0"));
  Load none(CompileText(kConvNet, "none"), WithOneDnn());
  for (int64_t n : {1, 3}) {
    std::vector<TensorDataRef> in = testing::ConvNetInputs(n);
    auto want = Run(none.exe, in);
    std::string diff = Compare(*Run(absent.exe, in)[0], *want[0], kRtol, kAtol);
    BOOST_TEST(diff.empty(), "absent, N=" << n << ": " << diff);
    // oneDNN sums in another order: f32 rounding over 27-term dot products (compile_test).
    diff = Compare(*Run(with_vendor.exe, in)[0], *want[0], 1e-4, 1e-5);
    BOOST_TEST(diff.empty(), "oneDNN, N=" << n << ": " << diff);
  }
  Load required(dnn, std::make_shared<ExternalRegistry>(), true);
  BOOST_REQUIRE(!required.exe.ok());
  BOOST_TEST(required.exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(required.exe.status().message() ==
             "external_regions[0] 'onednn_0' (vendor 'onednn'): no runtime is registered for "
             "vendor 'onednn'; the vendor is required (--require-vendor)");
  // Compiled without fallbacks, an absent vendor fails the load as it always did.
  Load bare(CompileText(kConvNet, "onednn", false), std::make_shared<ExternalRegistry>());
  BOOST_REQUIRE(!bare.exe.ok());
  BOOST_TEST(bare.exe.status().code() == StatusCode::kNotFound);
  BOOST_TEST(Contains(bare.exe.status().message(), "no runtime is registered for vendor 'onednn'"));
}

// A dynamic image through a strided conv, then a squeeze-excite block in a region of its own
// (Cos, which oneDNN does not run, splits them): that region's input is [N, 8,
// floordiv(H + 1, 2), ...], an expression no tensor dim binds, and its broadcasting Mul needs
// a shape function. The fallback gets a symbol of its own for such dims
// (lraspp_mobilenet_v3_large's regions had no fallback without it).
const char* kStridedSqueezeExcite = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[N, 3, H, W] x, float[8, 3, 3, 3] w, float[8, 8, 3, 3] w2, float[8, 8, 1, 1] w3) => (float[N, 8, ?, ?] y) {
    c = Conv <pads = [1, 1, 1, 1], strides = [2, 2]> (x, w)
    r = Relu(c)
    k = Cos(r)
    c2 = Conv <pads = [1, 1, 1, 1]> (k, w2)
    p = GlobalAveragePool(c2)
    e = Conv(p, w3)
    s = Sigmoid(e)
    y = Mul(c2, s)
  }
)";

BOOST_AUTO_TEST_CASE(regions_after_a_strided_conv_of_a_dynamic_image_get_fallbacks) {
  CompileStats stats;
  std::vector<uint8_t> dnn = CompileText(kStridedSqueezeExcite, "onednn", true, &stats);
  BOOST_TEST(stats.external_regions == 2);
  BOOST_TEST(stats.fallback_functions == 2);
  Load absent(dnn, std::make_shared<ExternalRegistry>());
  BOOST_REQUIRE_MESSAGE(absent.exe.ok(), absent.exe.status().ToString());
  Load with_vendor(dnn, WithOneDnn());
  Load none(CompileText(kStridedSqueezeExcite, "none"), WithOneDnn());
  auto w = testing::RandomTensor(DType::kF32, {8, 3, 3, 3}, -0.5, 0.5, 1);
  auto w2 = testing::RandomTensor(DType::kF32, {8, 8, 3, 3}, -0.5, 0.5, 2);
  auto w3 = testing::RandomTensor(DType::kF32, {8, 8, 1, 1}, -0.5, 0.5, 3);
  for (int64_t h : {9, 12}) {
    auto x = testing::RandomTensor(DType::kF32, {1, 3, h, h + 3}, -1, 1, 10 + h);
    auto want = Run(none.exe, {x, w, w2, w3});
    std::string diff = Compare(*Run(absent.exe, {x, w, w2, w3})[0], *want[0], kRtol, kAtol);
    BOOST_TEST(diff.empty(), "fallback, H=" << h << ": " << diff);
    diff = Compare(*Run(with_vendor.exe, {x, w, w2, w3})[0], *want[0], 1e-4, 1e-5);
    BOOST_TEST(diff.empty(), "oneDNN, H=" << h << ": " << diff);
  }
}

}  // namespace
}  // namespace kiln::compiler
