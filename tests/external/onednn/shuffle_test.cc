// ShuffleNet's channel split and channel shuffle inside one oneDNN region (region op
// kChannels): end to end against the JIT (--external=none) with the exporter's run-time reshape
// targets and a dynamic batch, at channel offsets that are and are not multiples of the
// blocked layout's 8; and kiln's ChannelGather against a plain reference on blocked layouts.
#define BOOST_TEST_MODULE onednn_shuffle_test
#include <boost/test/unit_test.hpp>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/compile.h"
#include "embed/compile.h"
#include "external/onednn/run/channel_gather.h"
#include "external/onednn/run/runtime.h"
#include "external/registry/registry.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"
#include "vm/disassembler.h"

namespace kiln::compiler {
namespace {

// A ShuffleNetV2 unit as torchvision exports it: split a conv's output into halves of h
// channels (Slice, its bounds computed from Shape: folded, yet nodes reading the region's
// value), convolve the second, concatenate, shuffle 2 groups with targets computed from Shape
// (Reshape [N, 2, h, H, W], Transpose, Reshape [N, -1, H, W]), then a 1x1 conv.
// With `split`, one Split <axis = 1> of constant sizes takes the place of the Slices.
std::string Unit(int64_t h, bool split) {
  std::string c = std::to_string(2 * h), hs = std::to_string(h);
  std::string halves = split ? R"(
      sizes = Constant <value = int64[2] {)" + hs + ", " + hs + R"(}> ()
      s1, s2 = Split <axis = 1> (a, sizes))"
                             : R"(
      s1 = Slice(a, zero, half, one)
      s2 = Slice(a, half, full, one))";
  return R"(<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 8, 6, 6] x, float[)" + c + R"(, 8, 1, 1] wa, float[)" + hs + ", " + hs +
         R"(, 3, 3] wb, float[16, )" + c + R"(, 1, 1] wc) => (float[N, 16, 6, 6] y) {
      a0 = Conv(x, wa)
      a = Relu(a0)
      zero = Constant <value = int64[1] {0}> ()
      two = Constant <value = int64[1] {2}> ()
      full = Shape <start = 1, end = 2> (a)
      half = Div(full, two)
      one = Constant <value = int64[1] {1}> ())" +
         halves + R"(
      b0 = Conv <pads = [1, 1, 1, 1]> (s2, wb)
      b = Relu(b0)
      cat = Concat <axis = 1> (s1, b)
      n = Shape <start = 0, end = 1> (cat)
      hw = Shape <start = 2> (cat)
      minus = Constant <value = int64[1] {-1}> ()
      t1 = Concat <axis = 0> (n, two, half, hw)
      t2 = Concat <axis = 0> (n, minus, hw)
      r1 = Reshape(cat, t1)
      tr = Transpose <perm = [0, 2, 1, 3, 4]> (r1)
      sh = Reshape(tr, t2)
      y0 = Conv(sh, wc)
      y = Relu(y0)
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

// h = 8: the split and the concat fall on block boundaries; h = 5 (ShuffleNet x1.0's 58 is
// not a multiple of 8 either): every output block mixes channels of two input blocks.
BOOST_AUTO_TEST_CASE(a_shuffle_unit_is_one_region_and_matches_the_jit) {
  for (auto [h, split] : std::vector<std::pair<int64_t, bool>>{
           {8, false}, {5, false}, {8, true}, {5, true}}) {
    BOOST_TEST_CONTEXT("h=" << h << (split ? " (Split)" : " (Slice)")) {
      CompileStats dnn_stats, none_stats;
      std::string text = Unit(h, split);
      auto dnn = LoadRequiringOneDnn(CompileText(text, "onednn", &dnn_stats));
      auto none = LoadRequiringOneDnn(CompileText(text, "none", &none_stats));
      // Before kChannels the slices cut the convs into three regions; now every node but the
      // constants and the Shape / Concat arithmetic of the targets is in one.
      BOOST_TEST(dnn_stats.external_regions == 1);
      BOOST_TEST(dnn_stats.external_nodes == (split ? 11 : 12));
      BOOST_TEST(none_stats.external_regions == 0);
      // Its one output is y: the Shape nodes whose results were folded read the conv and the
      // concat, yet run nothing, so those values are no region outputs (copied out each call).
      std::string code = DisassembleFunction(*dnn, 0);
      size_t at = code.find("invoke_external");
      BOOST_REQUIRE(at != std::string::npos);
      std::string call = code.substr(at, code.find('\n', at) - at);
      std::string results = call.substr(call.find("->"));
      BOOST_TEST(results.find(',') == std::string::npos, call);
      auto wa = testing::RandomTensor(DType::kF32, {2 * h, 8, 1, 1}, -0.5, 0.5, 1);
      auto wb = testing::RandomTensor(DType::kF32, {h, h, 3, 3}, -0.5, 0.5, 2);
      auto wc = testing::RandomTensor(DType::kF32, {16, 2 * h, 1, 1}, -0.5, 0.5, 3);
      for (int64_t n : {1, 2}) {
        auto x = testing::RandomTensor(DType::kF32, {n, 8, 6, 6}, -1, 1, 10 + n);
        auto got = Run(dnn, {x, wa, wb, wc});
        auto want = Run(none, {x, wa, wb, wc});
        // Copies are exact; the three convolutions' sums (at most 45 products) may round
        // differently in oneDNN's and the JIT's order.
        std::string diff = testing::Compare(*got[0], *want[0], 1e-5, 1e-5);
        BOOST_TEST(diff.empty(), "N=" << n << ": " << diff);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;

// The index of (n, c, s) in an [N, C, S] tensor channel-blocked by b (b = 1: row-major).
int64_t At(int64_t n, int64_t c, int64_t s, int64_t channels, int64_t pixels, int64_t b) {
  int64_t padded = (channels + b - 1) / b * b;
  return n * padded * pixels + (c / b) * b * pixels + s * b + c % b;
}

memory::desc Desc(int64_t n, int64_t c, int64_t b) {
  memory::format_tag t = b == 1   ? memory::format_tag::nchw
                         : b == 8 ? memory::format_tag::nChw8c
                                  : memory::format_tag::nChw16c;
  return memory::desc({n, c, 3, 5}, memory::data_type::f32, t);
}

// Every combination of layout, inputs, groups and offsets against y[c] = x[p(start + c)].
BOOST_AUTO_TEST_CASE(channel_gather_matches_a_plain_reference) {
  const int64_t n = 2, pixels = 15;
  for (int64_t b : {1, 8, 16}) {
    for (std::vector<int64_t> parts : std::vector<std::vector<int64_t>>{{12}, {5, 7}, {8, 8, 4}}) {
      int64_t c = 0;
      for (int64_t k : parts) c += k;
      for (int64_t group : {1, 2, 4}) {
        if (c % group != 0) continue;
        for (auto [start, count] : std::vector<std::pair<int64_t, int64_t>>{
                 {0, c}, {0, c / 2}, {c / 2, c - c / 2}, {3, c - 5}, {8, c - 8}}) {
          BOOST_TEST_CONTEXT("b=" << b << " inputs=" << parts.size() << " c=" << c
                                  << " group=" << group << " [" << start << ", +" << count
                                  << ")") {
            std::vector<memory::desc> srcs;
            std::vector<std::vector<float>> data;
            for (size_t k = 0; k < parts.size(); ++k) {
              srcs.push_back(Desc(n, parts[k], b));
              data.emplace_back(srcs.back().get_size() / sizeof(float), -7.0f);
              for (int64_t i = 0; i < n; ++i)
                for (int64_t ch = 0; ch < parts[k]; ++ch)
                  for (int64_t s = 0; s < pixels; ++s)
                    data[k][At(i, ch, s, parts[k], pixels, b)] =
                        static_cast<float>(1000 * k + 100 * i + 10 * ch) + 0.01f * s;
            }
            memory::desc dst = Desc(n, count, b);
            auto g = ChannelGather::Make(srcs, dst, group, start);
            BOOST_REQUIRE(g != nullptr);
            std::vector<float> out(dst.get_size() / sizeof(float), 99.0f);
            std::vector<const float*> ptrs;
            for (auto& d : data) ptrs.push_back(d.data());
            g->Run(ptrs.data(), out.data());
            // The concatenation's channel j: (input, channel).
            std::vector<std::pair<int64_t, int64_t>> cat;
            for (size_t k = 0; k < parts.size(); ++k)
              for (int64_t ch = 0; ch < parts[k]; ++ch) cat.push_back({k, ch});
            int64_t per = c / group, bad = 0;
            int64_t padded = (count + b - 1) / b * b;
            for (int64_t i = 0; i < n; ++i) {
              for (int64_t oc = 0; oc < padded; ++oc) {
                for (int64_t s = 0; s < pixels; ++s) {
                  float want = 0.0f;  // padding lanes are zero
                  if (oc < count) {
                    int64_t q = start + oc;
                    auto [k, ch] = cat[(q % group) * per + q / group];
                    want = data[k][At(i, ch, s, parts[k], pixels, b)];
                  }
                  bad += out[At(i, oc, s, count, pixels, b)] != want;
                }
              }
            }
            BOOST_TEST(bad == 0);
          }
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(channel_gather_refuses_what_it_cannot_copy) {
  // Mixed layouts, a group that does not divide C, channels beyond C.
  BOOST_TEST(ChannelGather::Make({Desc(1, 8, 8)}, Desc(1, 8, 1), 1, 0) == nullptr);
  BOOST_TEST(ChannelGather::Make({Desc(1, 9, 8)}, Desc(1, 9, 8), 2, 0) == nullptr);
  BOOST_TEST(ChannelGather::Make({Desc(1, 8, 8)}, Desc(1, 4, 8), 1, 5) == nullptr);
  BOOST_TEST(ChannelGather::Make({Desc(1, 8, 8)}, Desc(1, 4, 8), 1, 4) != nullptr);
}

}  // namespace
}  // namespace kiln::onednn::internal
