// PointwiseConvsOverRows (compiler/passes/pointwise_conv_rows.h): which Transpose -> 1 x 1
// Conv -> [activation] -> reduction-over-the-last-dim chains (DGCNN's EdgeConv) become a
// MatMul over the unpermuted rows with the Transpose after the reduction, which stay, and
// the rewritten models, compiled with oneDNN and with the JIT alone, against a float64
// reference, at two batch / point counts when the points are symbolic.
#define BOOST_TEST_MODULE pointwise_conv_rows_test
#include "compiler/passes/pointwise_conv_rows.h"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <algorithm>
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

constexpr int64_t kC = 6, kO = 5, kK = 4;  // channels in, out, neighbours

struct Case {
  const char* name;
  bool rewritten = true;
  const char* reduce = "ReduceMax";
  const char* act = "LeakyRelu";  // "" for none
  bool bias = true;
  int keepdims = 0;
  bool axes_input = false;  // opset 18: the axes as an input
  int64_t axis = -1;        // the reduction's axis (3 or -1 for the rewrite)
  Ints perm = {0, 3, 1, 2};
  int64_t stride = 1, group = 1;
  bool transposed_is_output = false;  // the permuted tensor is also a graph output
  bool dynamic = false;               // symbolic point count
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

std::vector<Case> Cases() {
  std::vector<Case> v;
  v.push_back({"edgeconv_leaky_relu_max"});
  Case mean{"keepdims_mean_no_bias_no_activation"};
  mean.reduce = "ReduceMean", mean.act = "", mean.bias = false, mean.keepdims = 1;
  mean.axis = 3;
  v.push_back(mean);
  Case opset18{"opset18_axes_input_relu_min"};
  opset18.reduce = "ReduceMin", opset18.act = "Relu", opset18.axes_input = true;
  v.push_back(opset18);
  Case sum{"dynamic_points_sum_sigmoid"};
  sum.reduce = "ReduceSum", sum.act = "Sigmoid", sum.dynamic = true, sum.axes_input = true;
  v.push_back(sum);
  Case other{"other_permutation_stays"};
  other.perm = {0, 3, 2, 1}, other.rewritten = false;
  v.push_back(other);
  Case axis2{"reduction_over_points_stays"};
  axis2.axis = 2, axis2.rewritten = false;
  v.push_back(axis2);
  Case strided{"strided_conv_stays"};
  strided.stride = 2, strided.rewritten = false;
  v.push_back(strided);
  Case grouped{"grouped_conv_stays"};
  grouped.group = 2, grouped.rewritten = false;
  v.push_back(grouped);
  Case shared{"permuted_tensor_also_an_output_stays"};
  shared.transposed_is_output = true, shared.rewritten = false;
  v.push_back(shared);
  return v;
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

std::string IntList(const Ints& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Dims of the Transpose's output for input [n, p, kK, kC].
std::string Dim(const Case& c, int64_t i) {
  const std::string in[] = {"n", c.dynamic ? "p" : "7", std::to_string(kK), std::to_string(kC)};
  return in[c.perm[i]];
}

std::string ModelText(const Case& c) {
  const std::string p = c.dynamic ? "p" : "7";
  std::string inits = "float[" + std::to_string(kO) + ", " + std::to_string(kC / c.group) +
                      ", 1, 1] W = {" + Floats(Values(kO * kC / c.group, 0.5, 1)) + "}";
  if (c.bias) inits += ", float[" + std::to_string(kO) + "] B = {" + Floats(Values(kO, 0.3, 2)) + "}";
  if (c.axes_input) inits += ", int64[1] axes = {" + std::to_string(c.axis) + "}";
  std::string body = "  t = Transpose <perm = " + IntList(c.perm) + "> (x)\n";
  body += "  u = Conv <kernel_shape = [1, 1], strides = [" + std::to_string(c.stride) + ", " +
          std::to_string(c.stride) + "], group = " + std::to_string(c.group) + "> (t, W" +
          (c.bias ? ", B" : "") + ")\n";
  std::string a = "u";
  if (*c.act) {
    const std::string act = std::string(c.act) == "LeakyRelu" ? "LeakyRelu <alpha = 0.2>" : c.act;
    body += "  a = " + act + " (u)\n";
    a = "a";
  }
  const std::string keep = "keepdims = " + std::to_string(c.keepdims);
  if (c.axes_input) {
    body += "  y = " + std::string(c.reduce) + " <" + keep + "> (" + a + ", axes)\n";
  } else {
    body += "  y = " + std::string(c.reduce) + " <axes = [" + std::to_string(c.axis) + "], " +
            keep + "> (" + a + ")\n";
  }
  // The Conv's output [n, O, a, b] (a, b the permuted dims, halved by a stride 2), reduced.
  std::vector<std::string> y = {"n", std::to_string(kO), Dim(c, 2), Dim(c, 3)};
  if (c.stride == 2) {
    for (int i = 2; i < 4; ++i) y[i] = std::to_string((std::stoll(y[i]) - 1) / 2 + 1);
  }
  const size_t axis = c.axis < 0 ? 3 : static_cast<size_t>(c.axis);
  if (c.keepdims) {
    y[axis] = "1";
  } else {
    y.erase(y.begin() + static_cast<std::ptrdiff_t>(axis));
  }
  auto type = [](const std::vector<std::string>& dims, const std::string& name) {
    std::string s = "float[";
    for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i];
    return s + "] " + name;
  };
  std::string outputs = type(y, "y");
  if (c.transposed_is_output)
    outputs += ", " + type({Dim(c, 0), Dim(c, 1), Dim(c, 2), Dim(c, 3)}, "t");
  return std::string("<ir_version: 8, opset_import: [\"\" : ") + (c.axes_input ? "18" : "17") +
         "]>\n g (float[n, " + p + ", " + std::to_string(kK) + ", " + std::to_string(kC) +
         "] x) => (" + outputs + ") <" + inits + "> {\n" + body + "}";
}

int CountOps(const Graph& g, const std::string& op) {
  int k = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) k += g.node(n).op_type == op;
  return k;
}

BOOST_DATA_TEST_CASE(which_chains_become_matmuls_over_rows, data::make(Cases()), c) {
  StatusOr<Graph> g = testing::InferText(ModelText(c));
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
  const std::string before = testing::TypeOf(*g, "y");
  StatusOr<int> n = PointwiseConvsOverRows(*g);
  BOOST_REQUIRE_MESSAGE(n.ok(), n.status().ToString());
  BOOST_TEST(*n == (c.rewritten ? 1 : 0));
  BOOST_TEST(CountOps(*g, "Conv") == (c.rewritten ? 0 : 1));
  BOOST_TEST(CountOps(*g, "MatMul") == (c.rewritten ? 1 : 0));
  BOOST_TEST(CountOps(*g, "Add") == (c.rewritten && c.bias ? 1 : 0));
  BOOST_TEST(CountOps(*g, "Transpose") == 1);
  BOOST_TEST(CountOps(*g, c.reduce) == 1);
  if (*c.act) BOOST_TEST(CountOps(*g, c.act) == 1);
  BOOST_TEST(g->Verify().ok());
  BOOST_TEST(testing::TypeOf(*g, "y") == before);  // the output keeps its value and type
  if (c.rewritten) {
    // The Transpose writes y, after the reduction, and reads a rank-(3 or 4) value.
    const NodeId t = *g->FindValue("y") == kNoValue ? kNoNode : g->value(*g->FindValue("y")).producer;
    BOOST_REQUIRE(t != kNoNode);
    BOOST_TEST(g->node(t).op_type == "Transpose");
    BOOST_TEST(g->node(g->value(g->node(t).inputs[0]).producer).op_type == c.reduce);
    Status again = InferShapes(*g, {});
    BOOST_TEST(again.ok(), again.ToString());
    BOOST_TEST(testing::TypeOf(*g, "y") == before);
  }
}

// y[n, o, p] = reduce_k act(sum_c x[n, p, k, c] W[o, c] + B[o]) in float64, and per output a
// bound: each term within (C + 2) float32 epsilons of the sum of |products| and |B| (an
// activation's slope is at most 1, plus a few epsilons of its own), a sum or mean adding k
// epsilons of the sum of |terms|.
struct Reference {
  std::vector<double> value, bound;
};

Reference Expected(const Case& c, const std::vector<double>& x, int64_t n, int64_t p) {
  const std::vector<float> w = Values(kO * kC, 0.5, 1);
  const std::vector<float> b = c.bias ? Values(kO, 0.3, 2) : std::vector<float>(kO, 0.0f);
  const double eps = std::numeric_limits<float>::epsilon();
  const std::string act = c.act, red = c.reduce;
  Reference r;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < kO; ++o) {
      for (int64_t q = 0; q < p; ++q) {
        double acc = red == "ReduceMax" ? -1e300 : red == "ReduceMin" ? 1e300 : 0.0;
        double bound = 0, mag = 0;
        for (int64_t k = 0; k < kK; ++k) {
          double s = b[o], m = std::abs(b[o]);
          for (int64_t ch = 0; ch < kC; ++ch) {
            const double prod = x[((i * p + q) * kK + k) * kC + ch] * w[o * kC + ch];
            s += prod;
            m += std::abs(prod);
          }
          double y = s, own = 0;
          if (act == "LeakyRelu") {
            y = s >= 0 ? s : 0.2 * s, own = eps * std::abs(y);
          } else if (act == "Relu") {
            y = std::max(s, 0.0);
          } else if (act == "Sigmoid") {
            y = 1 / (1 + std::exp(-s)), own = 4 * eps;
          }
          const double term_bound = (kC + 2) * eps * m + own;
          if (red == "ReduceMax") {
            acc = std::max(acc, y), bound = std::max(bound, term_bound);
          } else if (red == "ReduceMin") {
            acc = std::min(acc, y), bound = std::max(bound, term_bound);
          } else {
            acc += y, bound += term_bound, mag += std::abs(y);
          }
        }
        if (red == "ReduceMean") acc /= kK, bound /= kK, mag /= kK;
        r.value.push_back(acc);
        r.bound.push_back(bound + (kK + 1) * eps * mag + 1e-30);
      }
    }
  }
  return r;
}

std::shared_ptr<ExternalRegistry> WithOneDnn() {
  auto reg = std::make_shared<ExternalRegistry>();
  Status s = onednn::RegisterOneDnn(*reg);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  return reg;
}

std::vector<Case> Compiled() {
  std::vector<Case> v;
  for (const Case& c : Cases()) {
    if (c.rewritten) v.push_back(c);
  }
  return v;
}

BOOST_DATA_TEST_CASE(compiled_models_give_the_convolution_answer,
                     data::make(Compiled()) * data::make({"onednn", "none"}), c, external) {
  const std::string bytes = testing::ModelBytes(ModelText(c));
  CompileOptions o;
  o.external = external;
  StatusOr<std::vector<uint8_t>> kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  LoadOptions lo;
  lo.externals = WithOneDnn();
  auto exe = testing::LoadWithJit(*kiln, std::move(lo));
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  std::vector<Ints> shapes = {{2, 7, kK, kC}};
  if (c.dynamic) shapes.push_back({1, 13, kK, kC});
  for (const Ints& xd : shapes) {
    TensorDataRef x = testing::RandomTensor(DType::kF32, xd, -1, 1, 7);
    auto out = testing::RunExecutable(*exe, {x});
    BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
    const Ints want_dims = c.keepdims ? Ints{xd[0], kO, xd[1], 1} : Ints{xd[0], kO, xd[1]};
    BOOST_TEST((*out)[0]->dims() == want_dims, boost::test_tools::per_element());
    Reference want = Expected(c, x->ToDoubles(), xd[0], xd[1]);
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
