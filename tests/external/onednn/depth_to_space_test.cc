// DepthToSpace inside oneDNN regions (region op kDepthToSpace, format 1.6): kiln's kernel
// against a plain reference on plain and channel-blocked (8, 16) layouts in DCR and CRD modes,
// with padding lanes; the layouts it refuses; and Conv -> DepthToSpace -> Relu compiled into
// one region, against a float64 reference, in both modes at channel counts that do and do not
// fill the blocked layout's 8-channel blocks, batch 1 and 2.
#define BOOST_TEST_MODULE onednn_depth_to_space_test
#include "external/onednn/run/depth_to_space.h"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "embed/compile.h"
#include "external/onednn/run/runtime.h"
#include "external/registry/registry.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::onednn::internal {
namespace {

namespace data = boost::unit_test::data;
using dnnl::memory;
using tag = memory::format_tag;
using Ints = std::vector<int64_t>;

struct Case {
  int64_t n, c, h, w, s;  // the output's channels C; the input has C * s * s
  int block;              // 1 (plain), 8, 16
  bool crd;
};
std::ostream& operator<<(std::ostream& os, const Case& k) {
  return os << "n" << k.n << "_c" << k.c << "_" << k.h << "x" << k.w << "_s" << k.s << "_b"
            << k.block << (k.crd ? "_crd" : "_dcr");
}

std::vector<Case> Cases() {
  std::vector<Case> v;
  for (int block : {1, 8, 16}) {
    for (bool crd : {false, true}) {
      v.push_back({2, 8, 3, 5, 2, block, crd});   // whole 8-blocks
      v.push_back({1, 3, 4, 4, 2, block, crd});   // padding lanes
      v.push_back({1, 16, 2, 3, 3, block, crd});  // blocksize 3
      v.push_back({2, 24, 1, 1, 2, block, crd});  // one pixel
    }
  }
  return v;
}

tag TagOf(int block) { return block == 1 ? tag::abcd : block == 8 ? tag::nChw8c : tag::nChw16c; }

// Offset of logical (n, c, h, w) in a [N, C, H, W] tensor of layout `block`.
int64_t At(int block, const Ints& d, int64_t n, int64_t c, int64_t h, int64_t w) {
  if (block == 1) return ((n * d[1] + c) * d[2] + h) * d[3] + w;
  const int64_t cb = (d[1] + block - 1) / block;
  return ((n * cb + c / block) * d[2] + h) * d[3] * block + w * block + c % block;
}

BOOST_DATA_TEST_CASE(kernel_matches_the_onnx_definition, data::make(Cases()), k) {
  const Ints xd = {k.n, k.c * k.s * k.s, k.h, k.w}, yd = {k.n, k.c, k.h * k.s, k.w * k.s};
  memory::desc src(xd, memory::data_type::f32, TagOf(k.block));
  memory::desc dst(yd, memory::data_type::f32, TagOf(k.block));
  std::shared_ptr<const DepthToSpace> d2s = DepthToSpace::Make(src, dst, k.s, k.crd);
  BOOST_REQUIRE(d2s != nullptr);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Padding lanes of src hold NaN (must not reach dst); dst starts as NaN everywhere.
  std::vector<float> x(src.get_size() / sizeof(float), nan), y(dst.get_size() / sizeof(float), nan);
  for (int64_t n = 0; n < xd[0]; ++n)
    for (int64_t c = 0; c < xd[1]; ++c)
      for (int64_t h = 0; h < xd[2]; ++h)
        for (int64_t w = 0; w < xd[3]; ++w)
          x[At(k.block, xd, n, c, h, w)] = static_cast<float>(((n * 1000 + c) * 100 + h) * 100 + w);
  d2s->Run(x.data(), y.data());
  int bad = 0;
  for (int64_t n = 0; n < yd[0]; ++n)
    for (int64_t c = 0; c < yd[1]; ++c)
      for (int64_t oh = 0; oh < yd[2]; ++oh)
        for (int64_t ow = 0; ow < yd[3]; ++ow) {
          const int64_t i = oh % k.s, j = ow % k.s;
          const int64_t ic = k.crd ? c * k.s * k.s + i * k.s + j : (i * k.s + j) * k.c + c;
          const float want = x[At(k.block, xd, n, ic, oh / k.s, ow / k.s)];
          const float got = y[At(k.block, yd, n, c, oh, ow)];
          if (!(got == want) && ++bad <= 5)
            BOOST_ERROR("y[" << n << ", " << c << ", " << oh << ", " << ow << "] = " << got
                             << ", want " << want);
        }
  BOOST_TEST(bad == 0);
  // Padding lanes of a blocked dst are zeros.
  if (k.block > 1) {
    const int64_t padded = (k.c + k.block - 1) / k.block * k.block;
    for (int64_t n = 0; n < yd[0]; ++n)
      for (int64_t c = k.c; c < padded; ++c)
        for (int64_t oh = 0; oh < yd[2]; ++oh)
          for (int64_t ow = 0; ow < yd[3]; ++ow)
            BOOST_TEST(y[At(k.block, yd, n, c, oh, ow)] == 0.0f);
  }
}

BOOST_AUTO_TEST_CASE(kernel_refuses_what_it_cannot_copy) {
  const memory::dims xd = {1, 32, 4, 4}, yd = {1, 8, 8, 8};
  auto md = [](const memory::dims& d, tag t) { return memory::desc(d, memory::data_type::f32, t); };
  BOOST_TEST((DepthToSpace::Make(md(xd, tag::abcd), md(yd, tag::abcd), 2, false) != nullptr));
  // Mixed layouts, blocks that differ, a layout that is neither, wrong dims or blocksize.
  BOOST_TEST((DepthToSpace::Make(md(xd, tag::abcd), md(yd, tag::nChw8c), 2, false) == nullptr));
  BOOST_TEST((DepthToSpace::Make(md(xd, tag::nChw8c), md(yd, tag::nChw16c), 2, false) == nullptr));
  BOOST_TEST((DepthToSpace::Make(md(xd, tag::acdb), md(yd, tag::acdb), 2, false) == nullptr));
  BOOST_TEST((DepthToSpace::Make(md(xd, tag::abcd), md({1, 8, 8, 7}, tag::abcd), 2, false) ==
              nullptr));
  BOOST_TEST((DepthToSpace::Make(md(xd, tag::abcd), md(yd, tag::abcd), 3, false) == nullptr));
  BOOST_TEST((DepthToSpace::Make(md(xd, tag::abcd), md(yd, tag::abcd), 0, false) == nullptr));
  memory::desc s8({1, 32, 4, 4}, memory::data_type::s8, tag::abcd);
  memory::desc d8({1, 8, 8, 8}, memory::data_type::s8, tag::abcd);
  BOOST_TEST((DepthToSpace::Make(s8, d8, 2, false) == nullptr));
}

// ---- In a region ----

struct Model {
  int64_t c;  // output channels of the DepthToSpace
  bool crd;
};
std::ostream& operator<<(std::ostream& os, const Model& m) {
  return os << "c" << m.c << (m.crd ? "_crd" : "_dcr");
}

constexpr int64_t kIn = 5, kS = 2, kH = 4, kW = 6;

std::vector<float> Values(int64_t n, double scale, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(scale * std::sin(0.41 * static_cast<double>(i) + seed));
  return v;
}

std::string Floats(const std::vector<float>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s%.9g", i ? ", " : "", v[i]);
    s += buf;
  }
  return s;
}

// y = Relu(DepthToSpace(Conv3x3(x, W, B))), x [N, 5, 4, 6], conv to C * 4 channels.
std::string ModelText(const Model& m) {
  const int64_t co = m.c * kS * kS;
  const std::string wd = "float[" + std::to_string(co) + ", 5, 3, 3] W = {" +
                         Floats(Values(co * kIn * 9, 0.5, 1)) + "}";
  const std::string bd = "float[" + std::to_string(co) + "] B = {" + Floats(Values(co, 0.3, 2)) + "}";
  return std::string("<ir_version: 8, opset_import: [\"\" : 17]>\n g (float[n, 5, 4, 6] x) => ") +
         "(float[n, " + std::to_string(m.c) + ", 8, 12] y) <" + wd + ", " + bd +
         "> {\n  t = Conv <pads = [1, 1, 1, 1]> (x, W, B)\n  u = DepthToSpace <blocksize = 2, " +
         "mode = \"" + (m.crd ? "CRD" : "DCR") + "\"> (t)\n  y = Relu(u)\n}";
}

BOOST_DATA_TEST_CASE(conv_depth_to_space_relu_is_one_region,
                     data::make(std::vector<Model>{{8, false}, {8, true}, {3, false}, {3, true}}),
                     m) {
  const std::string bytes = compiler::testing::ModelBytes(ModelText(m));
  compiler::CompileOptions o;
  o.external = "onednn";
  compiler::CompileStats stats;
  StatusOr<std::vector<uint8_t>> kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, &stats);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  BOOST_TEST(stats.external_regions == 1);
  BOOST_TEST(stats.external_nodes == 3);
  auto reg = std::make_shared<ExternalRegistry>();
  BOOST_REQUIRE(RegisterOneDnn(*reg).ok());
  LoadOptions lo;
  lo.externals = reg;
  auto exe = compiler::testing::LoadWithJit(*kiln, std::move(lo));
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  const int64_t co = m.c * kS * kS;
  const std::vector<float> w = Values(co * kIn * 9, 0.5, 1), b = Values(co, 0.3, 2);
  const double eps = std::numeric_limits<float>::epsilon();
  for (int64_t batch : {1, 2}) {
    compiler::TensorDataRef x =
        compiler::testing::RandomTensor(DType::kF32, {batch, kIn, kH, kW}, -1, 1, 11);
    const std::vector<double> xv = x->ToDoubles();
    auto out = compiler::testing::RunExecutable(*exe, {x});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    BOOST_TEST((*out)[0]->dims() == (Ints{batch, m.c, kH * kS, kW * kS}),
               boost::test_tools::per_element());
    const std::vector<double> got = (*out)[0]->ToDoubles();
    int bad = 0;
    for (int64_t n = 0; n < batch; ++n)
      for (int64_t c = 0; c < m.c; ++c)
        for (int64_t oh = 0; oh < kH * kS; ++oh)
          for (int64_t ow = 0; ow < kW * kS; ++ow) {
            const int64_t i = oh % kS, j = ow % kS, h = oh / kS, q = ow / kS;
            const int64_t k = m.crd ? c * kS * kS + i * kS + j : (i * kS + j) * m.c + c;
            // The conv's output channel k at (h, q) in float64; bound: (terms + 2) float32
            // epsilons of the sum of |products| and |bias| (45 terms; Relu is exact).
            double sum = b[k], mag = std::abs(b[k]);
            for (int64_t ci = 0; ci < kIn; ++ci)
              for (int64_t r = 0; r < 3; ++r)
                for (int64_t t = 0; t < 3; ++t) {
                  const int64_t yy = h + r - 1, xx = q + t - 1;
                  if (yy < 0 || yy >= kH || xx < 0 || xx >= kW) continue;
                  const double p = xv[((n * kIn + ci) * kH + yy) * kW + xx] *
                                   w[((k * kIn + ci) * 3 + r) * 3 + t];
                  sum += p, mag += std::abs(p);
                }
            const double want = std::max(sum, 0.0), bound = (kIn * 9 + 2) * eps * mag + 1e-30;
            const double g = got[((n * m.c + c) * kH * kS + oh) * kW * kS + ow];
            if (!(std::abs(g - want) <= bound) && ++bad <= 5)
              BOOST_ERROR("y[" << n << ", " << c << ", " << oh << ", " << ow << "] = " << g
                               << ", want " << want << " +- " << bound);
          }
    BOOST_TEST(bad == 0);
  }
}

}  // namespace
}  // namespace kiln::onednn::internal
