// ConvTransposeToPhaseConvs (compiler/passes/conv_transpose_phases.h): which ConvTranspose
// layers become per-phase Convs + Concat + DepthToSpace (or one Conv at stride 1, or a Gemm on
// a one-pixel input) and which stay, the BatchNormalization folded into them and the
// activation each phase applies, and the rewritten models, compiled with oneDNN (one region,
// DepthToSpace in it) and with the JIT alone, against a float64 ConvTranspose written as a
// scatter (ONNX's definition), at batch 2 and, with symbolic H / W, at two image sizes.
#define BOOST_TEST_MODULE conv_transpose_phases_test
#include "compiler/passes/conv_transpose_phases.h"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "compiler/passes/shape_inference.h"
#include "embed/compile.h"
#include "external/onednn/run/runtime.h"
#include "external/registry/registry.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

namespace data = boost::unit_test::data;
using Ints = std::vector<int64_t>;

struct Case {
  const char* name;
  int64_t cin = 6, cout_g = 5, group = 1;
  Ints kernel = {4, 4}, strides = {2, 2}, pads = {1, 1, 1, 1}, output_padding = {0, 0};
  int64_t dilation = 1;
  bool bias = true;
  bool dynamic = false;    // symbolic H and W
  bool runtime_w = false;  // the weights are a graph input
  int phases = 4;          // Convs after the rewrite; 0: the ConvTranspose stays
  Ints image = {7, 6};     // H, W (static)
  bool bn = false;         // BatchNormalization between the ConvTranspose and the activation
  const char* act = "Relu";
  bool gemm = false;       // a one-pixel input: Reshape + Gemm + Reshape
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

std::vector<Case> Cases() {
  std::vector<Case> v;
  v.push_back({"dcgan_4x4_stride2_pad1"});
  Case up{"unet_2x2_stride2"};
  up.kernel = {2, 2}, up.pads = {0, 0, 0, 0};
  v.push_back(up);
  Case op{"3x3_stride2_pad1_output_padding1"};
  op.kernel = {3, 3}, op.output_padding = {1, 1};
  v.push_back(op);
  Case s1{"4x4_stride1_one_conv"};
  s1.strides = {1, 1}, s1.pads = {0, 0, 0, 0}, s1.phases = 1;
  v.push_back(s1);
  Case s3{"5x5_stride3_pad1_asymmetric"};
  s3.kernel = {5, 5}, s3.strides = {3, 3}, s3.pads = {1, 0, 1, 2}, s3.phases = 9;
  v.push_back(s3);
  Case grouped{"grouped_4x4_stride2"};
  grouped.cin = 6, grouped.cout_g = 3, grouped.group = 2;
  v.push_back(grouped);
  Case nobias{"dynamic_hw_no_bias"};
  nobias.bias = false, nobias.dynamic = true;
  v.push_back(nobias);
  // DCGAN's layers: BatchNormalization folded into the weights, the activation per phase.
  Case bn{"batch_norm_folded_relu_per_phase"};
  bn.bn = true, bn.cin = 16, bn.cout_g = 16;
  v.push_back(bn);
  Case bn_nobias{"batch_norm_folded_without_bias_tanh"};
  bn_nobias.bn = true, bn_nobias.bias = false, bn_nobias.act = "Tanh";
  v.push_back(bn_nobias);
  Case bn_grouped{"batch_norm_folded_grouped_stride3"};
  bn_grouped.bn = true, bn_grouped.cin = 6, bn_grouped.cout_g = 3, bn_grouped.group = 2;
  bn_grouped.kernel = {3, 3}, bn_grouped.strides = {3, 3}, bn_grouped.pads = {0, 0, 0, 0};
  bn_grouped.phases = 9, bn_grouped.act = "LeakyRelu";
  v.push_back(bn_grouped);
  Case bn_s1{"batch_norm_folded_stride1"};
  bn_s1.bn = true, bn_s1.strides = {1, 1}, bn_s1.pads = {1, 1, 1, 1}, bn_s1.phases = 1;
  v.push_back(bn_s1);
  // A generator's first layer: latent [n, c, 1, 1] -> k x k, one GEMM.
  Case latent{"one_pixel_input_gemm"};
  latent.image = {1, 1}, latent.pads = {0, 0, 0, 0}, latent.strides = {1, 1}, latent.bn = true;
  latent.phases = 0, latent.gemm = true;
  v.push_back(latent);
  Case latent2{"one_pixel_input_stride2_gemm_sigmoid"};
  latent2.image = {1, 1}, latent2.pads = {0, 0, 0, 0}, latent2.act = "Sigmoid";
  latent2.phases = 0, latent2.gemm = true;
  v.push_back(latent2);
  // Stay: an odd output (2H - 1), dilation, unequal strides, weights known only at run time,
  // a stride past the kernel (phases with no tap).
  Case odd{"odd_output_stays"};
  odd.kernel = {3, 3}, odd.phases = 0;
  v.push_back(odd);
  Case dil{"dilated_stays"};
  dil.dilation = 2, dil.pads = {0, 0, 0, 0}, dil.kernel = {2, 2}, dil.phases = 0;
  v.push_back(dil);
  Case uneq{"unequal_strides_stay"};
  uneq.strides = {2, 1}, uneq.kernel = {2, 3}, uneq.pads = {0, 1, 0, 1}, uneq.phases = 0;
  v.push_back(uneq);
  Case rt{"runtime_weights_stay"};
  rt.runtime_w = true, rt.phases = 0;
  v.push_back(rt);
  Case gap{"stride_past_kernel_stays"};
  gap.kernel = {2, 2}, gap.strides = {3, 3}, gap.pads = {0, 0, 0, 0}, gap.output_padding = {1, 1};
  gap.phases = 0;
  v.push_back(gap);
  return v;
}

// The cases compiled end to end: every one with constant weights (those that stay run the
// JIT's ConvTranspose kernel, whose short-row grids take its flattened GEMM).
std::vector<Case> Compiled() {
  std::vector<Case> v;
  for (const Case& c : Cases()) {
    if (!c.runtime_w) v.push_back(c);
  }
  return v;
}

std::string Ints2(const Ints& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

Ints WDims(const Case& c) { return {c.cin, c.cout_g, c.kernel[0], c.kernel[1]}; }

int64_t OutSize(const Case& c, int d, int64_t in) {
  return c.strides[d] * (in - 1) + c.output_padding[d] + (c.kernel[d] - 1) * c.dilation + 1 -
         c.pads[d] - c.pads[d + 2];
}

std::vector<float> Values(int64_t n, double scale, int seed) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(scale * std::sin(0.37 * static_cast<double>(i) + seed));
  return v;
}

std::string Floats(const std::vector<float>& v) {
  std::string s;
  char buf[32];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof(buf), "%s%.9g", i ? ", " : "", v[i]);
    s += buf;
  }
  return s;
}

// gamma, beta, mean, var of a BatchNormalization over `c` channels (var > 0, scales of both
// signs and sizes).
std::vector<std::vector<float>> BnParams(int64_t c) {
  std::vector<float> gamma = Values(c, 1.5, 3), beta = Values(c, 0.4, 4), mean = Values(c, 0.2, 5),
                     var = Values(c, 0.5, 6);
  for (float& v : var) v = 0.6f + v;
  return {gamma, beta, mean, var};
}

std::string ModelText(const Case& c) {
  const int64_t cout = c.cout_g * c.group;
  const std::string h = c.dynamic ? "h" : std::to_string(c.image[0]),
                    w = c.dynamic ? "w" : std::to_string(c.image[1]);
  std::string inputs = "float[n, " + std::to_string(c.cin) + ", " + h + ", " + w + "] x";
  std::string inits;
  const Ints wd = WDims(c);
  const std::string wtype = "float" + Ints2(wd) + " W";
  if (c.runtime_w) {
    inputs += ", " + wtype;
  } else {
    inits = wtype + " = {" + Floats(Values(wd[0] * wd[1] * wd[2] * wd[3], 0.5, 1)) + "}";
  }
  if (c.bias) {
    inits += std::string(inits.empty() ? "" : ", ") + "float[" + std::to_string(cout) + "] B = {" +
             Floats(Values(cout, 0.3, 2)) + "}";
  }
  if (c.bn) {
    const std::vector<std::vector<float>> p = BnParams(cout);
    const char* names[] = {"gamma", "beta", "mean", "var"};
    for (int i = 0; i < 4; ++i)
      inits += std::string(inits.empty() ? "" : ", ") + "float[" + std::to_string(cout) + "] " +
               names[i] + " = {" + Floats(p[i]) + "}";
  }
  std::string attrs = "kernel_shape = " + Ints2(c.kernel) + ", strides = " + Ints2(c.strides) +
                      ", pads = " + Ints2(c.pads) +
                      ", output_padding = " + Ints2(c.output_padding) +
                      ", group = " + std::to_string(c.group);
  if (c.dilation != 1)
    attrs +=
        ", dilations = [" + std::to_string(c.dilation) + ", " + std::to_string(c.dilation) + "]";
  const std::string out = c.dynamic ? "float[n, " + std::to_string(cout) + ", oh, ow] y"
                                    : "float[n, " + std::to_string(cout) + ", " +
                                          std::to_string(OutSize(c, 0, c.image[0])) + ", " +
                                          std::to_string(OutSize(c, 1, c.image[1])) + "] y";
  const std::string act = std::string(c.act) == "LeakyRelu"
                              ? "LeakyRelu <alpha = 0.2>"
                              : std::string(c.act);
  const std::string tail =
      c.bn ? "  u = BatchNormalization <epsilon = 0.001> (t, gamma, beta, mean, var)\n  y = " +
                 act + "(u)\n"
           : "  y = " + act + "(t)\n";
  return "<ir_version: 8, opset_import: [\"\" : 17]>\n g (" + inputs + ") => (" + out + ") " +
         (inits.empty() ? "" : "<" + inits + "> ") + "{\n  t = ConvTranspose <" + attrs +
         "> (x, W" + (c.bias ? ", B" : "") + ")\n" + tail + "}";
}

int CountOps(const Graph& g, const std::string& op) {
  int k = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) k += g.node(n).op_type == op;
  return k;
}

BOOST_DATA_TEST_CASE(which_conv_transposes_become_phase_convs, data::make(Cases()), c) {
  StatusOr<Graph> g = testing::InferText(ModelText(c));
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
  const std::string before = testing::TypeOf(*g, "y");
  StatusOr<int> n = ConvTransposeToPhaseConvs(*g);
  BOOST_REQUIRE_MESSAGE(n.ok(), n.status().ToString());
  const bool rewritten = c.phases > 0 || c.gemm;
  BOOST_TEST(*n == (rewritten ? 1 : 0));
  BOOST_TEST(CountOps(*g, "ConvTranspose") == (rewritten ? 0 : 1));
  BOOST_TEST(CountOps(*g, "Conv") == c.phases);
  BOOST_TEST(CountOps(*g, "DepthToSpace") == (c.phases > 1 ? 1 : 0));
  BOOST_TEST(CountOps(*g, "Concat") == (c.phases > 1 ? 1 : 0));
  BOOST_TEST(CountOps(*g, "Gemm") == (c.gemm ? 1 : 0));
  BOOST_TEST(CountOps(*g, "Reshape") == (c.gemm ? 2 : 0));
  // A rewritten layer folds its BatchNormalization; several phases (or the Gemm) each apply
  // the activation, one Conv or a layer that stays keeps the one node.
  BOOST_TEST(CountOps(*g, "BatchNormalization") == (c.bn && !rewritten ? 1 : 0));
  BOOST_TEST(CountOps(*g, c.act) == (c.phases > 1 ? c.phases : 1));
  BOOST_TEST(g->Verify().ok());
  BOOST_TEST(testing::TypeOf(*g, "y") == before);  // the output keeps its value and type
  // Shape inference over the rewritten graph agrees with the shapes the pass wrote.
  if (rewritten) {
    Status again = InferShapes(*g, {});
    BOOST_TEST(again.ok(), again.ToString());
    BOOST_TEST(testing::TypeOf(*g, "y") == before);
  }
}

// y = relu(ConvTranspose(x)) in float64, x [n, cin, h, w]: every input scattered into its
// window; `bound` per output: (K + 2) float32 epsilons of the sum of |products| (K terms).
struct Reference {
  std::vector<double> value, bound;
  Ints dims;
};

Reference Expected(const Case& c, const std::vector<double>& x, const Ints& xd) {
  const int64_t cout = c.cout_g * c.group, cin_g = c.cin / c.group;
  const int64_t oh = OutSize(c, 0, xd[2]), ow = OutSize(c, 1, xd[3]);
  const Ints wd = WDims(c);
  std::vector<float> w = Values(wd[0] * wd[1] * wd[2] * wd[3], 0.5, 1);
  std::vector<float> b = c.bias ? Values(cout, 0.3, 2) : std::vector<float>(cout, 0.0f);
  Reference r;
  r.dims = {xd[0], cout, oh, ow};
  const size_t total = static_cast<size_t>(xd[0] * cout * oh * ow);
  std::vector<double> sum(total, 0.0), mag(total, 0.0);
  for (int64_t n = 0; n < xd[0]; ++n)
    for (int64_t ci = 0; ci < c.cin; ++ci)
      for (int64_t ih = 0; ih < xd[2]; ++ih)
        for (int64_t iw = 0; iw < xd[3]; ++iw) {
          const double xv = x[((n * c.cin + ci) * xd[2] + ih) * xd[3] + iw];
          const int64_t grp = ci / cin_g;
          for (int64_t col = 0; col < c.cout_g; ++col)
            for (int64_t kh = 0; kh < c.kernel[0]; ++kh)
              for (int64_t kw = 0; kw < c.kernel[1]; ++kw) {
                const int64_t y = ih * c.strides[0] - c.pads[0] + kh * c.dilation;
                const int64_t z = iw * c.strides[1] - c.pads[1] + kw * c.dilation;
                if (y < 0 || y >= oh || z < 0 || z >= ow) continue;
                const int64_t co = grp * c.cout_g + col;
                const double p =
                    xv * w[((ci * c.cout_g + col) * c.kernel[0] + kh) * c.kernel[1] + kw];
                const size_t at = static_cast<size_t>(((n * cout + co) * oh + y) * ow + z);
                sum[at] += p;
                mag[at] += std::abs(p);
              }
        }
  const double terms = static_cast<double>(cin_g * c.kernel[0] * c.kernel[1]);
  const double eps = std::numeric_limits<float>::epsilon();
  // BatchNormalization as y = v * scale + shift (1 and 0 without one); folded, the weights and
  // bias round once more (one more epsilon of each term).
  std::vector<double> scale(static_cast<size_t>(cout), 1.0), shift(static_cast<size_t>(cout), 0.0);
  if (c.bn) {
    const std::vector<std::vector<float>> p = BnParams(cout);
    for (int64_t k = 0; k < cout; ++k) {
      scale[k] = p[0][k] / std::sqrt(static_cast<double>(p[3][k]) + 0.001);
      shift[k] = p[1][k] - p[2][k] * scale[k];
    }
  }
  const std::string act = c.act;
  for (size_t i = 0; i < total; ++i) {
    const int64_t co = static_cast<int64_t>(i / static_cast<size_t>(oh * ow)) % cout;
    const double v = (sum[i] + b[co]) * scale[co] + shift[co];
    const double conv_bound =
        (terms + 3) * eps * (std::abs(scale[co]) * (mag[i] + std::abs(b[co])) + std::abs(shift[co]));
    // The activation: its slope (at most 1) times the conv's bound, plus its own error (a
    // multiply's rounding; a few float32 ulps of tanh / sigmoid, absolute near 0).
    double y = 0, own = 0;
    if (act == "Relu") {
      y = std::max(v, 0.0);
    } else if (act == "LeakyRelu") {
      y = v >= 0 ? v : 0.2 * v, own = eps * std::abs(y);
    } else if (act == "Tanh") {
      y = std::tanh(v), own = 4 * eps * std::max(std::abs(y), 0.5);
    } else if (act == "Sigmoid") {
      y = 1 / (1 + std::exp(-v)), own = 4 * eps * std::max(std::abs(y), 0.5);
    } else {
      BOOST_FAIL("no reference for " << act);
    }
    r.value.push_back(y);
    r.bound.push_back(conv_bound + own + 1e-30);
  }
  return r;
}

std::shared_ptr<ExternalRegistry> WithOneDnn() {
  auto reg = std::make_shared<ExternalRegistry>();
  Status s = onednn::RegisterOneDnn(*reg);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  return reg;
}

BOOST_DATA_TEST_CASE(compiled_models_give_the_conv_transpose_answer,
                     data::make(Compiled()) * data::make({"onednn", "none"}), c, external) {
  const std::string bytes = testing::ModelBytes(ModelText(c));
  CompileOptions o;
  o.external = external;
  CompileStats stats;
  StatusOr<std::vector<uint8_t>> kiln =
      kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, &stats);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  if (std::string(external) == "onednn" && c.phases > 0) BOOST_TEST(stats.external_nodes > 0);
  LoadOptions lo;
  lo.externals = WithOneDnn();
  auto exe = testing::LoadWithJit(*kiln, std::move(lo));
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  // Phase convolutions, their activations, Concat and DepthToSpace form one region.
  if (std::string(external) == "onednn" && c.phases > 1)
    BOOST_TEST(stats.external_nodes == 2 * c.phases + 2);
  std::vector<Ints> shapes = {{2, c.cin, c.image[0], c.image[1]}};
  if (c.dynamic) shapes.push_back({1, c.cin, 4, 9});
  for (const Ints& xd : shapes) {
    TensorDataRef x = testing::RandomTensor(DType::kF32, xd, -1, 1, 7);
    auto out = testing::RunExecutable(*exe, {x});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    Reference want = Expected(c, x->ToDoubles(), xd);
    BOOST_TEST((*out)[0]->dims() == want.dims, boost::test_tools::per_element());
    std::vector<double> got = (*out)[0]->ToDoubles();
    BOOST_REQUIRE(got.size() == want.value.size());
    int bad = 0;
    for (size_t k = 0; k < got.size(); ++k) {
      if (!(std::abs(got[k] - want.value[k]) <= want.bound[k]) && ++bad <= 5) {
        BOOST_ERROR("y[" << k << "] = " << got[k] << ", want " << want.value[k] << " +- "
                         << want.bound[k]);
      }
    }
    BOOST_TEST(bad == 0);
  }
}

}  // namespace
}  // namespace kiln::compiler
