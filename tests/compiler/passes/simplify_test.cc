// Simplify's Pad folding (compiler/passes/simplify.cc): a constant spatial Pad read only by a
// Conv, AveragePool (zeros) or MaxPool (-inf) becomes the reader's padding and the Pad is gone
// after dead-node removal; compiled with oneDNN and with the JIT alone, the model still gives
// the float64 answer of the written Pad + window. Every case where the two would differ keeps
// the Pad: another reader, a run-time or non-matching fill, reflect / edge, a crop, padding of
// N or C, an unpadded-average or ceil_mode pool, an Indices output, a pad the window outgrows.
// A Conv whose pads would become asymmetric keeps the Pad too, for speed alone.
// Then: a spatial ReduceMax / ReduceMean of a conv becomes a global pool, an inference Dropout
// is bypassed, and a Transpose sinks below sliced elementwise chains and their Concat; each
// with the cases that must stay, and the rewritten models' answers on both back ends.
#define BOOST_TEST_MODULE simplify_test
#include "compiler/passes/simplify.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
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
#include "compiler/onnx/importer.h"
#include "compiler/passes/dead_nodes.h"
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

const double kNegInf = -std::numeric_limits<double>::infinity();

// x [2, 3, 7, 8] -> c = 1x1 Conv (4 channels) -> p = Pad -> y = reader. The 1x1 conv is exact
// (each output channel is 0.5 times one input channel) and puts the Pad inside a oneDNN region,
// as in inception_v3 (conv -> relu -> Pad -> AveragePool).
struct Case {
  const char* name;
  std::string reader;  // Conv, AveragePool or MaxPool
  std::string attrs;   // the reader's attributes, ONNX text
  Ints pad;            // the Pad's pads: N, C, H, W begins, then ends
  double fill = 0;     // constant_value (an initializer)
  Ints folded;         // the reader's pads after the fold; empty: the Pad must stay
  std::string mode = "constant";
  int opset = 13;     // < 11: pads and value are attributes
  std::string extra;  // "other_reader", "pad_output", "runtime_pads", "runtime_fill",
                      // "indices"
  // Reader window, for the reference.
  Ints kernel = {3, 3}, strides = {1, 1}, own_pads = {0, 0, 0, 0};
  bool include = false;  // count_include_pad
};
std::ostream& operator<<(std::ostream& os, const Case& c) { return os << c.name; }

Case Make(const char* name, std::string reader, std::string attrs, Ints pad, double fill,
          Ints folded) {
  Case c;
  c.name = name;
  c.reader = std::move(reader);
  c.attrs = std::move(attrs);
  c.pad = std::move(pad);
  c.fill = fill;
  c.folded = std::move(folded);
  return c;
}

std::vector<Case> Folded() {
  std::vector<Case> v;
  // inception_v3's avg_pool2d(3, stride 1, padding 1).
  v.push_back(Make("avg_3x3_s1", "AveragePool", "kernel_shape = [3, 3]", {0, 0, 1, 1, 0, 0, 1, 1},
                   0, {1, 1, 1, 1}));
  Case own = Make("avg_own_pads_included", "AveragePool",
                  "kernel_shape = [3, 3], strides = [2, 2], pads = [1, 1, 1, 1], "
                  "count_include_pad = 1",
                  {0, 0, 1, 0, 0, 0, 0, 1}, 0, {2, 1, 1, 2});
  own.strides = {2, 2}, own.own_pads = {1, 1, 1, 1}, own.include = true;
  v.push_back(own);
  Case valid = Make("avg_valid_2x2", "AveragePool", "kernel_shape = [2, 2], auto_pad = \"VALID\"",
                    {0, 0, 1, 1, 0, 0, 0, 0}, 0, {1, 1, 0, 0});
  valid.kernel = {2, 2};
  v.push_back(valid);
  Case max = Make("max_neg_inf", "MaxPool", "kernel_shape = [3, 3], strides = [2, 2]",
                  {0, 0, 1, 1, 0, 0, 1, 1}, kNegInf, {1, 1, 1, 1});
  max.strides = {2, 2};
  v.push_back(max);
  Case conv = Make("conv_2x3_own_pads", "Conv", "pads = [0, 1, 0, 1]", {0, 0, 1, 0, 0, 0, 1, 0}, 0,
                   {1, 1, 1, 1});
  conv.kernel = {2, 3}, conv.own_pads = {0, 1, 0, 1};
  v.push_back(conv);
  // A causal (left-only) pad: the oneDNN run side pads the copy itself when the asymmetric
  // pads leave oneDNN only gemm (plan_conv_pool.cc, ExplicitPaddingPays).
  v.push_back(Make("conv_left_only", "Conv", "", {0, 0, 0, 2, 0, 0, 0, 0}, 0, {0, 2, 0, 0}));
  Case attr = Make("opset10_pad_attributes", "AveragePool", "kernel_shape = [3, 3]",
                   {0, 0, 1, 1, 0, 0, 1, 1}, 0, {1, 1, 1, 1});
  attr.opset = 10;
  v.push_back(attr);
  return v;
}

std::vector<Case> Kept() {
  const Ints p1 = {0, 0, 1, 1, 0, 0, 1, 1};
  const char* avg = "kernel_shape = [3, 3]";
  std::vector<Case> v = {
      Make("fill_one_avg", "AveragePool", avg, p1, 1, {}),
      Make("fill_negative_zero_avg", "AveragePool", avg, p1, -0.0, {}),
      Make("fill_zero_max", "MaxPool", avg, p1, 0, {}),
      Make("fill_neg_inf_conv", "Conv", "", p1, kNegInf, {}),
      Make("crop", "AveragePool", avg, {0, 0, -1, 1, 0, 0, 1, 1}, 0, {}),
      Make("pads_channels", "AveragePool", avg, {0, 1, 1, 1, 0, 0, 1, 1}, 0, {}),
      Make("pads_batch", "AveragePool", avg, {0, 0, 1, 1, 1, 0, 1, 1}, 0, {}),
      Make("avg_own_pads_excluded", "AveragePool", "kernel_shape = [3, 3], pads = [1, 1, 1, 1]", p1,
           0, {}),
      Make("avg_ceil_mode", "AveragePool", "kernel_shape = [3, 3], ceil_mode = 1", p1, 0, {}),
      Make("avg_same_upper", "AveragePool", "kernel_shape = [3, 3], auto_pad = \"SAME_UPPER\"", p1,
           0, {}),
      Make("pad_reaches_the_kernel", "AveragePool", avg, {0, 0, 3, 0, 0, 0, 0, 0}, 0, {}),
  };
  for (Case& c : v) {
    if (c.attrs.find("pads = [1") != std::string::npos || c.attrs.find("SAME") != std::string::npos)
      c.own_pads = {1, 1, 1, 1};  // (the output's dims)
  }
  for (const char* mode : {"reflect", "edge"}) {
    Case c = Make(mode, "AveragePool", avg, p1, 0, {});
    c.mode = mode;
    v.push_back(c);
  }
  for (const char* extra :
       {"other_reader", "pad_output", "runtime_pads", "runtime_fill", "indices"}) {
    Case c = Make(extra, std::string(extra) == "indices" ? "MaxPool" : "AveragePool", avg, p1,
                  std::string(extra) == "indices" ? kNegInf : 0, {});
    c.extra = extra;
    v.push_back(c);
  }
  return v;
}

std::string Join(const std::vector<double>& v, const char* fmt) {
  std::string s;
  char buf[40];
  for (size_t i = 0; i < v.size(); ++i) {
    std::snprintf(buf, sizeof(buf), fmt, v[i]);
    s += (i ? ", " : "") + std::string(buf);
  }
  return s;
}

std::vector<double> AsDoubles(const Ints& v) { return std::vector<double>(v.begin(), v.end()); }

// The stem's weights: output channel m is 0.5 * input channel (m + 1) % 3.
std::vector<double> StemWeights() {
  std::vector<double> w(4 * 3, 0.0);
  for (int m = 0; m < 4; ++m) w[m * 3 + (m + 1) % 3] = 0.5;
  return w;
}

// The reader Conv's weights [5, 4, kh, kw], exactly representable as float.
std::vector<double> ReaderWeights(const Case& c) {
  return testing::RandomTensor(DType::kF32, {5, 4, c.kernel[0], c.kernel[1]}, -1, 1, 77)
      ->ToDoubles();
}

// The padded tensor's dims, and the reader's output dims (as its window computes them).
Ints PaddedDims(const Case& c) {
  const Ints in = {2, 4, 7, 8};
  Ints p;
  for (int i = 0; i < 4; ++i) p.push_back(in[i] + c.pad[i] + c.pad[4 + i]);
  return p;
}
Ints OutDims(const Case& c) {
  Ints p = PaddedDims(c);
  const Ints& op = c.own_pads;  // top, left, bottom, right
  return {p[0], c.reader == "Conv" ? 5 : p[1],
          (p[2] + op[0] + op[2] - c.kernel[0]) / c.strides[0] + 1,
          (p[3] + op[1] + op[3] - c.kernel[1]) / c.strides[1] + 1};
}

std::string TypeText(const char* dtype, const Ints& dims, const char* name) {
  return std::string(dtype) + "[" + Join(AsDoubles(dims), "%g") + "] " + name;
}

// The model as ONNX text (fill placeholder 0: Patch sets the real one, text has no -inf).
std::string ModelText(const Case& c) {
  bool runtime_pads = c.extra == "runtime_pads", runtime_fill = c.extra == "runtime_fill";
  std::string in = "float[2, 3, 7, 8] x";
  if (runtime_pads) in += ", int64[8] pads";
  if (runtime_fill) in += ", float fill";
  std::string out = TypeText("float", OutDims(c), "y");
  if (c.extra == "indices") out += ", " + TypeText("int64", OutDims(c), "i");
  if (c.extra == "other_reader") out += ", " + TypeText("float", PaddedDims(c), "r");
  if (c.extra == "pad_output") out += ", " + TypeText("float", PaddedDims(c), "p");
  std::string inits = "float[4, 3, 1, 1] w0 = {" + Join(StemWeights(), "%g") + "}";
  bool attr_pad = c.opset < 11;
  if (!runtime_pads && !attr_pad)
    inits += ", int64[8] pads = {" + Join(AsDoubles(c.pad), "%g") + "}";
  if (!runtime_fill && !attr_pad) inits += ", float fill = {0}";
  if (c.reader == "Conv") {
    inits += ", float[5, 4, " + std::to_string(c.kernel[0]) + ", " + std::to_string(c.kernel[1]) +
             "] w = {" + Join(ReaderWeights(c), "%.9g") + "}";
  }
  std::string body = "c = Conv(x, w0)\n";
  if (attr_pad) {
    body += "p = Pad <mode = \"" + c.mode + "\", pads = [" + Join(AsDoubles(c.pad), "%g") +
            "], value = 0.0> (c)\n";
  } else {
    body += "p = Pad <mode = \"" + c.mode + "\"> (c, pads, fill)\n";
  }
  std::string attrs = c.attrs.empty() ? "" : " <" + c.attrs + ">";
  std::string outs = c.extra == "indices" ? "y, i" : "y";
  body += outs + " = " + c.reader + attrs + (c.reader == "Conv" ? " (p, w)\n" : " (p)\n");
  if (c.extra == "other_reader") body += "r = Relu(p)\n";
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(c.opset) + "]>\n g (" + in +
         ") => (" + out + ") <" + inits + "> {\n" + body + "}";
}

// The serialized model with initializer `fill` set to c.fill.
std::string ModelBytes(const Case& c) {
  onnx::ModelProto model;
  BOOST_REQUIRE(model.ParseFromString(testing::ModelBytes(ModelText(c))));
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.name() != "fill") continue;
    t.clear_float_data();
    t.clear_raw_data();
    t.add_float_data(static_cast<float>(c.fill));
  }
  std::string bytes;
  BOOST_REQUIRE(model.SerializeToString(&bytes));
  return bytes;
}

// Import, infer, Simplify, RemoveDeadNodes: what the compiler partitions. `y_shape`, when
// given, receives the inferred shape of the value "y" before Simplify.
Graph Simplified(const std::string& bytes, SimplifyStats* stats, SymbolicShape* y_shape = nullptr) {
  StatusOr<Graph> g = ImportOnnxBytes(bytes);
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
  Status s = InferShapes(*g);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  if (y_shape) *y_shape = *g->value(*g->FindValue("y")).shape;
  s = Simplify(*g, stats);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  BOOST_REQUIRE(RemoveDeadNodes(*g).ok());
  Status valid = g->Verify();
  BOOST_REQUIRE_MESSAGE(valid.ok(), valid.ToString());
  return std::move(*g);
}
Graph Simplified(const Case& c, SimplifyStats* stats) { return Simplified(ModelBytes(c), stats); }

const Node& ReaderOf(const Graph& g) { return g.node(g.value(*g.FindValue("y")).producer); }

bool HasPad(const Graph& g) {
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.node(n).op_type == "Pad") return true;
  }
  return false;
}

BOOST_DATA_TEST_CASE(the_pad_becomes_the_readers_padding, data::make(Folded()), c) {
  SimplifyStats stats;
  Graph g = Simplified(c, &stats);
  BOOST_TEST(stats.pads_folded == 1);
  BOOST_TEST(!HasPad(g));
  const Node& reader = ReaderOf(g);
  BOOST_TEST(g.value(reader.inputs[0]).name == "c");
  const Attribute* pads = reader.FindAttribute("pads");
  BOOST_REQUIRE(pads != nullptr);
  BOOST_TEST(pads->ints() == c.folded, boost::test_tools::per_element());
  BOOST_TEST(reader.FindAttribute("auto_pad") == nullptr);
  if (c.reader == "AveragePool") {
    const Attribute* include = reader.FindAttribute("count_include_pad");
    BOOST_REQUIRE(include != nullptr);
    BOOST_TEST(include->i() == 1);
  }
}

void ExpectThePadStays(const Case& c) {
  SimplifyStats stats;
  Graph g = Simplified(c, &stats);
  BOOST_TEST(stats.pads_folded == 0);
  BOOST_TEST(HasPad(g));
  BOOST_TEST(g.value(ReaderOf(g).inputs[0]).name == "p");
}

BOOST_DATA_TEST_CASE(the_pad_stays_where_folding_would_change_the_answer, data::make(Kept()), c) {
  ExpectThePadStays(c);
}

// ---- End to end against float64 ----

struct Reference {
  Ints dims;
  std::vector<double> value, bound;  // bound: the float32 forward error allowed per output
};

double Gamma(int64_t n) {
  const double eps = std::ldexp(1.0, -24);
  return n * eps / (1 - n * eps);
}

// The written model in float64: the stem, an explicit constant Pad, then the reader with its own
// window. Outputs outside every input element do not occur (pads < kernel).
Reference Expected(const Case& c, const std::vector<double>& x) {
  const int64_t n = 2, ci = 3, h = 7, w = 8, cm = 4;
  std::vector<double> w0 = StemWeights();
  int64_t ph = PaddedDims(c)[2], pw = PaddedDims(c)[3];
  std::vector<double> p(n * cm * ph * pw, c.fill);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t m = 0; m < cm; ++m)
      for (int64_t i = 0; i < h; ++i)
        for (int64_t j = 0; j < w; ++j)
          p[((b * cm + m) * ph + i + c.pad[2]) * pw + j + c.pad[3]] =
              0.5 * x[((b * ci + (m + 1) % 3) * h + i) * w + j];
  const int64_t kh = c.kernel[0], kw = c.kernel[1], sh = c.strides[0], sw = c.strides[1];
  const Ints& op = c.own_pads;
  const Ints out = OutDims(c);
  const int64_t co = out[1], oh = out[2], ow = out[3];
  bool conv = c.reader == "Conv", max = c.reader == "MaxPool";
  std::vector<double> wr = conv ? ReaderWeights(c) : std::vector<double>();
  Reference r;
  r.dims = out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t z = 0; z < ow; ++z) {
          double acc = max ? kNegInf : 0, mag = 0;
          int64_t count = 0;
          for (int64_t m = conv ? 0 : o; m < (conv ? cm : o + 1); ++m)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t e = 0; e < kw; ++e) {
                int64_t i = y * sh - op[0] + a, j = z * sw - op[1] + e;
                if (i < 0 || i >= ph || j < 0 || j >= pw) continue;
                double v = p[((b * cm + m) * ph + i) * pw + j];
                double t = conv ? v * wr[((o * cm + m) * kh + a) * kw + e] : v;
                acc = max ? std::max(acc, t) : acc + t;
                mag += std::abs(t);
                ++count;
              }
          if (!max && !conv) {
            double div = c.include ? static_cast<double>(kh * kw) : static_cast<double>(count);
            acc /= div, mag /= div;
          }
          r.value.push_back(acc);
          // Max is exact; a sum of k terms (and the division) within gamma_{k+2}.
          r.bound.push_back(max ? 0.0 : Gamma(count + 2) * mag);
        }
  return r;
}

std::shared_ptr<ExternalRegistry> WithOneDnn() {
  auto reg = std::make_shared<ExternalRegistry>();
  Status s = onednn::RegisterOneDnn(*reg);
  BOOST_REQUIRE_MESSAGE(s.ok(), s.ToString());
  return reg;
}

// The model `bytes` compiled with `external` (`stats` filled), loaded with the JIT and oneDNN.
std::shared_ptr<const Executable> CompileAndLoad(const std::string& bytes, const char* external,
                                                 CompileStats* stats) {
  CompileOptions o;
  o.external = external;
  StatusOr<std::vector<uint8_t>> kiln =
      kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, stats);
  BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().ToString());
  LoadOptions lo;
  lo.externals = WithOneDnn();
  auto exe = testing::LoadWithJit(*kiln, std::move(lo));
  BOOST_REQUIRE_MESSAGE(exe.ok(), exe.status().ToString());
  return *exe;
}

BOOST_DATA_TEST_CASE(folded_models_give_the_written_answer,
                     data::make(Folded()) * data::make({"onednn", "none"}), c, external) {
  CompileStats stats;
  std::shared_ptr<const Executable> exe = CompileAndLoad(ModelBytes(c), external, &stats);
  BOOST_TEST(stats.nodes_after_passes == stats.nodes - 1);  // the Pad is gone
  if (std::string(external) == "onednn") BOOST_TEST(stats.external_nodes == 2);
  TensorDataRef x = testing::RandomTensor(DType::kF32, {2, 3, 7, 8}, -1, 1, 5);
  auto out = testing::RunExecutable(exe, {x});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  Reference want = Expected(c, x->ToDoubles());
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

// ---- ReduceMax / ReduceMean over the spatial dims of a convolution's output -> global pool ----

// x [2, 3, spatial...] -> c = 1x1 Conv (the stem above: channel m is 0.5 * x channel
// (m + 1) % 3) -> Relu (unless `relu` is off) -> y = ReduceMax or ReduceMean. `source` "input"
// reduces x itself; "maxpool_uint8" reduces a 1x1 MaxPool of x as uint8 (a non-float tensor
// from a pool).
struct MaxCase {
  std::string name;
  std::string op = "ReduceMax";      // or "ReduceMean"
  Ints spatial;                      // x's spatial dims
  std::string axes;                  // ONNX text of the axes ("" : attribute omitted)
  bool keepdims = true;              // the attribute (omitted when true)
  int opset = 13;                    // 18: axes as input 1
  std::string source = "conv_relu";  // "conv", "conv_relu", "input", "maxpool_uint8"
  bool runtime_axes = false;         // opset 18: axes is a graph input
  bool pooled = true;                // Simplify rewrites it
};
std::ostream& operator<<(std::ostream& os, const MaxCase& c) { return os << c.name; }

Ints XDims(const MaxCase& c) {
  Ints d = {2, 3};
  d.insert(d.end(), c.spatial.begin(), c.spatial.end());
  return d;
}

// The axes the case reduces, normalized (all dims when omitted).
std::vector<int> MaxAxes(const MaxCase& c) {
  const int rank = static_cast<int>(XDims(c).size());
  std::vector<int> axes;
  std::string t = c.axes;
  for (size_t i = 0; i < t.size();) {
    size_t j = t.find_first_of(",]", i);
    std::string tok = t.substr(i, j == std::string::npos ? std::string::npos : j - i);
    tok.erase(0, tok.find_first_not_of(" ["));
    if (!tok.empty()) {
      int a = std::stoi(tok);
      axes.push_back(a < 0 ? a + rank : a);
    }
    if (j == std::string::npos) break;
    i = j + 1;
  }
  if (axes.empty())
    for (int d = 0; d < rank; ++d) axes.push_back(d);
  std::sort(axes.begin(), axes.end());
  return axes;
}

Ints MaxOutDims(const MaxCase& c) {
  Ints x = XDims(c), out;
  if (c.source != "input" && c.source != "maxpool_uint8") x[1] = 4;
  std::vector<int> axes = MaxAxes(c);
  for (int d = 0; d < static_cast<int>(x.size()); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), d) != axes.end();
    if (!reduced)
      out.push_back(x[d]);
    else if (c.keepdims)
      out.push_back(1);
  }
  return out;
}

std::string MaxModelText(const MaxCase& c) {
  const Ints x = XDims(c);
  Ints wdims = {4, 3};
  for (size_t k = 0; k < c.spatial.size(); ++k) wdims.push_back(1);
  const char* type = c.source == "maxpool_uint8" ? "uint8" : "float";
  std::string in = TypeText(type, x, "x");
  if (c.runtime_axes) in += ", int64[1] axes";
  std::string inits = TypeText("float", wdims, "w0") + " = {" + Join(StemWeights(), "%g") + "}";
  const bool axes_input = c.opset >= 18 && !c.axes.empty();
  if (axes_input && !c.runtime_axes) {
    int n = static_cast<int>(std::count(c.axes.begin(), c.axes.end(), ',')) + 1;
    std::string values = c.axes.substr(1, c.axes.size() - 2);
    inits += ", int64[" + std::to_string(n) + "] axes = {" + values + "}";
  }
  std::string body;
  std::string data = "x";
  if (c.source == "maxpool_uint8") {
    body += "c = MaxPool <kernel_shape = [" + std::string(c.spatial.size() == 1 ? "1" : "1, 1") +
            "]> (x)\n";
    data = "c";
  } else if (c.source != "input") {
    body += "c = Conv(x, w0)\n";
    data = "c";
    if (c.source == "conv_relu") body += "r = Relu(c)\n", data = "r";
  }
  std::string attrs;
  if (!axes_input && !c.axes.empty()) attrs += "axes = " + c.axes;
  if (!c.keepdims) attrs += std::string(attrs.empty() ? "" : ", ") + "keepdims = 0";
  body += "y = " + c.op + (attrs.empty() ? std::string() : " <" + attrs + ">") + " (" + data +
          (axes_input ? ", axes" : "") + ")\n";
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(c.opset) + "]>\n g (" + in +
         ") => (" + TypeText(type, MaxOutDims(c), "y") + ") <" + inits + "> {\n" + body + "}";
}

MaxCase MakeMax(const char* name, Ints spatial, std::string axes, bool keepdims, bool pooled) {
  MaxCase c;
  c.name = name;
  c.spatial = std::move(spatial);
  c.axes = std::move(axes);
  c.keepdims = keepdims;
  c.pooled = pooled;
  return c;
}

// The structural cases for reduce op `op`, named "op/case".
std::vector<MaxCase> ReduceCases(const std::string& op) {
  std::vector<MaxCase> v = {
      // PointNet: max over points after a shared MLP.
      MakeMax("points_keepdims_0", {37}, "[2]", false, true),
      MakeMax("points_keepdims_1", {37}, "[2]", true, true),
      // ShuffleNetV2, MNASNet: mean over H, W before the classifier.
      MakeMax("image_negative_axes", {5, 6}, "[-1, -2]", false, true),
      MakeMax("one_of_two_spatial_dims", {5, 6}, "[3]", false, false),
      MakeMax("channels_too", {37}, "[1, 2]", false, false),
      MakeMax("every_dim_by_default", {37}, "", false, false),
  };
  MaxCase conv = MakeMax("conv_without_relu", {5, 6}, "[2, 3]", true, true);
  conv.source = "conv";
  v.push_back(conv);
  MaxCase input = MakeMax("graph_input_not_a_conv", {37}, "[2]", false, false);
  input.source = "input";
  v.push_back(input);
  MaxCase o18 = MakeMax("opset18_axes_input", {37}, "[2]", false, true);
  o18.opset = 18;
  v.push_back(o18);
  MaxCase runtime = MakeMax("opset18_runtime_axes", {37}, "[2]", false, false);
  runtime.opset = 18, runtime.runtime_axes = true;
  v.push_back(runtime);
  if (op == "ReduceMax") {  // ReduceMean takes no 8-bit integers
    MaxCase integer = MakeMax("uint8_pool_output", {5, 6}, "[2, 3]", true, false);
    integer.source = "maxpool_uint8";
    v.push_back(integer);
  }
  for (MaxCase& c : v) c.op = op, c.name = op + "/" + c.name;
  return v;
}

std::vector<MaxCase> ReduceCases() {
  std::vector<MaxCase> v = ReduceCases("ReduceMax"), mean = ReduceCases("ReduceMean");
  v.insert(v.end(), mean.begin(), mean.end());
  return v;
}

// The cases the rewrite turns into a pool (the end-to-end test runs those).
std::vector<MaxCase> PooledReduceCases() {
  std::vector<MaxCase> v;
  for (const MaxCase& c : ReduceCases()) {
    if (c.pooled) v.push_back(c);
  }
  return v;
}

int CountOps(const Graph& g, const std::string& op) {
  int k = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) k += g.node(n).op_type == op;
  return k;
}

BOOST_DATA_TEST_CASE(a_spatial_reduce_of_a_conv_becomes_a_global_pool, data::make(ReduceCases()),
                     c) {
  SimplifyStats stats;
  SymbolicShape y_shape;
  Graph simplified = Simplified(testing::ModelBytes(MaxModelText(c)), &stats, &y_shape);
  Graph* g = &simplified;
  const bool max = c.op == "ReduceMax";
  const std::string pool = max ? "GlobalMaxPool" : "GlobalAveragePool";
  BOOST_TEST(stats.reduce_max_pooled == (c.pooled && max ? 1 : 0));
  BOOST_TEST(stats.reduce_mean_pooled == (c.pooled && !max ? 1 : 0));
  BOOST_TEST(CountOps(*g, c.op) == (c.pooled ? 0 : 1));
  BOOST_TEST(CountOps(*g, pool) == (c.pooled ? 1 : 0));
  BOOST_TEST(CountOps(*g, "Flatten") == (c.pooled && !c.keepdims ? 1 : 0));
  BOOST_TEST(*g->value(*g->FindValue("y")).shape == y_shape);  // y keeps its shape
}

// The rewritten models give the float64 answer with both back ends (max exactly; the mean of
// k terms within gamma_{k+2} of the mean magnitude: summation in any order, then the division),
// and with oneDNN the pool joins the convolution's region.
BOOST_DATA_TEST_CASE(pooled_reduce_models_give_the_written_answer,
                     data::make(PooledReduceCases()) * data::make({"onednn", "none"}), c,
                     external) {
  CompileStats stats;
  std::shared_ptr<const Executable> exe =
      CompileAndLoad(testing::ModelBytes(MaxModelText(c)), external, &stats);
  if (std::string(external) == "onednn")
    BOOST_TEST(stats.external_nodes == stats.nodes_after_passes);  // one region, pool included
  const Ints xd = XDims(c);
  TensorDataRef x = testing::RandomTensor(DType::kF32, xd, -1, 1, 11);
  auto out = testing::RunExecutable(exe, {x});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  // want[b][m] = max or mean over positions of relu(0.5 * x[b][(m + 1) % 3][p]).
  const bool max = c.op == "ReduceMax";
  const std::vector<double> xv = x->ToDoubles();
  int64_t positions = 1;
  for (size_t d = 2; d < xd.size(); ++d) positions *= xd[d];
  std::vector<double> want, bound;
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t m = 0; m < 4; ++m) {
      double best = -std::numeric_limits<double>::infinity(), sum = 0, mag = 0;
      for (int64_t p = 0; p < positions; ++p) {
        double v = 0.5 * xv[(b * 3 + (m + 1) % 3) * positions + p];
        if (c.source == "conv_relu") v = std::max(v, 0.0);
        best = std::max(best, v);
        sum += v, mag += std::abs(v);
      }
      want.push_back(max ? best : sum / positions);
      bound.push_back(max ? 0.0 : Gamma(positions + 2) * mag / positions);
    }
  }
  BOOST_TEST((*out)[0]->dims() == MaxOutDims(c), boost::test_tools::per_element());
  const std::vector<double> got = (*out)[0]->ToDoubles();
  BOOST_REQUIRE(got.size() == want.size());
  for (size_t k = 0; k < got.size(); ++k) {
    BOOST_TEST(std::abs(got[k] - want[k]) <= bound[k],
               "y[" << k << "] = " << got[k] << ", want " << want[k] << " +- " << bound[k]);
  }
}

// ---- Inference Dropout: its readers read its input ----

// x [2, 3, 4] -> s = Softmax -> d, mask = Dropout -> y = Mul(d, 2). `form` picks the Dropout's
// inputs and outputs; `kept` says whether a Dropout node survives Simplify + dead nodes.
struct DropCase {
  const char* name;
  std::string dropout;  // the Dropout line's right-hand side, ONNX text
  std::string outputs;  // the Dropout's outputs
  int opset = 13;
  std::string extra_in, extra_out;  // more graph inputs / outputs, ONNX text
  bool kept = false;
  bool bypassed = true;  // dropouts_bypassed == 1
};
std::ostream& operator<<(std::ostream& os, const DropCase& c) { return os << c.name; }

std::vector<DropCase> DropCases() {
  return {
      // PyTorch's export of nn.Dropout in eval: ratio and training_mode constants, mask unread.
      {"unread_mask", "Dropout (s, ratio, off)", "d, mask"},
      {"no_mask", "Dropout (s, ratio, off)", "d"},
      {"no_training_input", "Dropout (s, ratio)", "d, mask"},
      {"no_ratio_no_training", "Dropout (s)", "d, mask"},
      {"opset10_attribute_ratio", "Dropout <ratio = 0.3> (s)", "d, mask", 10},
      {"training_with_zero_ratio", "Dropout (s, zero, on)", "d, mask"},
      // The mask is read: the node stays and writes it.
      {"mask_is_an_output", "Dropout (s, ratio, off)", "d, mask", 13, "", ", bool[2, 3, 4] mask",
       true, false},
      // d is an output: the node stays, as a view, without its unread mask.
      {"data_is_an_output", "Dropout (s, ratio, off)", "d, mask", 13, "", ", float[2, 3, 4] d",
       true, true},
      // training_mode known only at run time: lowering rejects it, Simplify leaves it.
      {"runtime_training", "Dropout (s, ratio, t)", "d, mask", 13, ", bool t", "", true, false},
  };
}

std::string DropModelText(const DropCase& c) {
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(c.opset) +
         "]>\n g (float[2, 3, 4] x" + c.extra_in + ") => (float[2, 3, 4] y" + c.extra_out +
         ") <float ratio = {0.25}, float zero = {0}, bool off = {0}, bool on = {1}, "
         "float two = {2}> {\n s = Softmax <axis = -1> (x)\n " +
         c.outputs + " = " + c.dropout + "\n y = Mul(d, two)\n}";
}

BOOST_DATA_TEST_CASE(an_inference_dropout_is_bypassed, data::make(DropCases()), c) {
  SimplifyStats stats;
  Graph simplified = Simplified(testing::ModelBytes(DropModelText(c)), &stats);
  Graph* g = &simplified;
  BOOST_TEST(stats.dropouts_bypassed == (c.bypassed ? 1 : 0));
  BOOST_TEST(CountOps(*g, "Dropout") == (c.kept ? 1 : 0));
  const Node& mul = g->node(g->value(*g->FindValue("y")).producer);
  BOOST_TEST(g->value(mul.inputs[0]).name == (c.kept ? "d" : "s"));
  for (NodeId n = 0; n < g->num_nodes(); ++n) {
    // A Dropout Simplify changed lost its unread mask; one it left alone keeps both outputs.
    if (g->node(n).op_type == "Dropout")
      BOOST_TEST(g->node(n).outputs.size() == (c.bypassed ? 1u : 2u));
  }
}

// Compiled with both back ends, the bypassed and the kept-as-view Dropout give y = 2 * softmax(x)
// (within softmax's f32 error), and a read mask is all true.
BOOST_DATA_TEST_CASE(dropout_models_give_the_written_answer,
                     data::make(std::vector<DropCase>{DropCases()[0], DropCases()[6],
                                                      DropCases()[7]}) *
                         data::make({"onednn", "none"}),
                     c, external) {
  CompileStats stats;
  std::shared_ptr<const Executable> exe =
      CompileAndLoad(testing::ModelBytes(DropModelText(c)), external, &stats);
  if (!c.kept) BOOST_TEST(stats.nodes_after_passes == stats.nodes - 1);  // the Dropout is gone
  TensorDataRef x = testing::RandomTensor(DType::kF32, {2, 3, 4}, -3, 3, 7);
  auto out = testing::RunExecutable(exe, {x});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  const std::vector<double> xv = x->ToDoubles();
  const std::vector<double> y = (*out)[0]->ToDoubles();
  BOOST_REQUIRE(y.size() == xv.size());
  for (size_t row = 0; row < 6; ++row) {
    double top = -std::numeric_limits<double>::infinity(), sum = 0;
    for (size_t k = 0; k < 4; ++k) top = std::max(top, xv[row * 4 + k]);
    for (size_t k = 0; k < 4; ++k) sum += std::exp(xv[row * 4 + k] - top);
    for (size_t k = 0; k < 4; ++k) {
      double want = 2 * std::exp(xv[row * 4 + k] - top) / sum;
      // exp, a sum of 4 and a division in f32: a few ulps of each term; 1e-6 relative is wide.
      BOOST_TEST(std::abs(y[row * 4 + k] - want) <= 1e-6 * want + 1e-7,
                 "y[" << row * 4 + k << "] = " << y[row * 4 + k] << ", want " << want);
    }
  }
  if (out->size() > 1) {
    const std::vector<double> second = (*out)[1]->ToDoubles();
    if ((*out)[1]->dtype() == DType::kBool) {
      BOOST_TEST(std::all_of(second.begin(), second.end(), [](double v) { return v == 1; }));
    } else {
      for (size_t k = 0; k < y.size(); ++k) BOOST_TEST(second[k] == y[k] / 2);  // d = y / 2
    }
  }
}

// ---- A Transpose sunk below Slice -> elementwise -> Concat (YOLO's box decode) ----

// x [2, 6, 3, 4] -> t = Transpose(perm [0, 2, 3, 1]) = [2, 3, 4, 6] -> three Slices of the last
// axis (0:2, 2:4, 4:6), decoded as YOLO does (xy: sigmoid * 2 + grid, a run-time [1, 3, 4, 2];
// wh: exp * anchors, a constant [1, 1, 1, 2]; the rest: sigmoid) -> y = Concat(axis = -1).
struct SinkCase {
  const char* name;
  std::string xy_slice = "Slice (t, s0, e0, a3)";  // the first Slice
  std::string extra_out;                           // more graph outputs, ONNX text
  bool sunk = true;
};
std::ostream& operator<<(std::ostream& os, const SinkCase& c) { return os << c.name; }

std::vector<SinkCase> SinkCases() {
  return {
      {"yolo_decode"},
      {"negative_slice_axis", "Slice (t, s0, e0, am1)"},
      // Sliced along another axis than the Concat's: not the pattern.
      {"slice_of_another_axis", "Slice (t, s0, e0, a2)", "", false},
      // A chain value is also read elsewhere: moving its layout would change that reader.
      {"chain_value_is_an_output", "Slice (t, s0, e0, a3)", ", float[2, 3, 4, 2] b", false},
      // The transposed tensor is read whole too: it stays, so sinking would add a Transpose.
      {"transpose_read_elsewhere", "Slice (t, s0, e0, a3)", ", float[2, 3, 4, 6] t", false},
  };
}

std::string SinkModelText(const SinkCase& c) {
  return "<ir_version: 8, opset_import: [\"\" : 13]>\n g (float[2, 6, 3, 4] x, float[1, 3, 4, 2] "
         "grid) => (float[2, 3, 4, 6] y" +
         c.extra_out +
         ") <int64[1] s0 = {0}, int64[1] e0 = {2}, int64[1] s1 = {2}, int64[1] e1 = {4}, "
         "int64[1] s2 = {4}, int64[1] e2 = {6}, int64[1] a3 = {3}, int64[1] am1 = {-1}, "
         "int64[1] a2 = {2}, float two = {2}, float[1, 1, 1, 2] anchors = {3, 5}> {\n"
         " t = Transpose <perm = [0, 2, 3, 1]> (x)\n"
         " xy = " +
         c.xy_slice +
         "\n"
         " a = Sigmoid(xy)\n b = Mul(a, two)\n c = Add(b, grid)\n"
         " wh = Slice (t, s1, e1, a3)\n e = Exp(wh)\n f = Mul(e, anchors)\n"
         " rest = Slice (t, s2, e2, a3)\n r = Sigmoid(rest)\n"
         " y = Concat <axis = -1> (c, f, r)\n}";
}

BOOST_DATA_TEST_CASE(a_transpose_sinks_below_sliced_chains_and_their_concat,
                     data::make(SinkCases()), c) {
  std::string text = SinkModelText(c);
  if (std::string(c.name) == "slice_of_another_axis") {
    // Both slices cut axis 2 (rows 0:2 and 2:4 of t's 4), the Concat joins them on axis 3.
    text =
        "<ir_version: 8, opset_import: [\"\" : 13]>\n g (float[2, 6, 3, 4] x) => "
        "(float[2, 3, 2, 12] y) <int64[1] s0 = {0}, int64[1] e0 = {2}, int64[1] s1 = {2}, "
        "int64[1] e1 = {4}, int64[1] a2 = {2}> {\n t = Transpose <perm = [0, 2, 3, 1]> (x)\n"
        " p = Slice (t, s0, e0, a2)\n q = Slice (t, s1, e1, a2)\n sp = Sigmoid(p)\n"
        " sq = Sigmoid(q)\n y = Concat <axis = 3> (sp, sq)\n}";
  }
  SimplifyStats stats;
  SymbolicShape y_shape;
  Graph simplified = Simplified(testing::ModelBytes(text), &stats, &y_shape);
  Graph* g = &simplified;
  BOOST_TEST(stats.transposes_sunk == (c.sunk ? 1 : 0));
  BOOST_TEST(*g->value(*g->FindValue("y")).shape == y_shape);  // y keeps its shape
  const Node& last = g->node(g->value(*g->FindValue("y")).producer);
  BOOST_REQUIRE(last.op_type == (c.sunk ? "Transpose" : "Concat"));
  if (c.sunk) {
    // The Transpose of x is gone; the grid's and the one after the Concat remain.
    BOOST_TEST(CountOps(*g, "Transpose") == 2);
    const Node& concat = g->node(g->value(last.inputs[0]).producer);
    BOOST_REQUIRE(concat.op_type == "Concat");
    BOOST_TEST(concat.FindAttribute("axis")->i() == 1);
    for (NodeId n = 0; n < g->num_nodes(); ++n) {
      if (g->node(n).op_type == "Slice") BOOST_TEST(g->value(g->node(n).inputs[0]).name == "x");
    }
  }
}

// The sunk model gives the float64 decode with both back ends: sigmoid and exp in f32 are
// within a few ulps, then one multiply and one add; 1e-5 of the magnitude covers them.
BOOST_DATA_TEST_CASE(a_sunk_decode_gives_the_written_answer,
                     data::make(std::vector<SinkCase>{SinkCases()[0], SinkCases()[3]}) *
                         data::make({"onednn", "none"}),
                     c, external) {
  CompileStats stats;
  std::shared_ptr<const Executable> exe =
      CompileAndLoad(testing::ModelBytes(SinkModelText(c)), external, &stats);
  TensorDataRef x = testing::RandomTensor(DType::kF32, {2, 6, 3, 4}, -3, 3, 13);
  TensorDataRef grid = testing::RandomTensor(DType::kF32, {1, 3, 4, 2}, 0, 4, 17);
  auto out = testing::RunExecutable(exe, {x, grid});
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  const std::vector<double> xv = x->ToDoubles(), gv = grid->ToDoubles();
  const std::vector<double> y = (*out)[0]->ToDoubles();
  BOOST_REQUIRE(y.size() == 2u * 3 * 4 * 6);
  const double anchors[2] = {3, 5};
  for (int b = 0; b < 2; ++b)
    for (int h = 0; h < 3; ++h)
      for (int w = 0; w < 4; ++w)
        for (int k = 0; k < 6; ++k) {
          double v = xv[((b * 6 + k) * 3 + h) * 4 + w];  // t[b][h][w][k] = x[b][k][h][w]
          double sig = 1 / (1 + std::exp(-v)), want;
          if (k < 2)
            want = sig * 2 + gv[(h * 4 + w) * 2 + k];
          else if (k < 4)
            want = std::exp(v) * anchors[k - 2];
          else
            want = sig;
          size_t at = ((b * 3 + h) * 4 + w) * 6 + k;
          BOOST_TEST(std::abs(y[at] - want) <= 1e-5 * std::max(1.0, std::abs(want)),
                     "y[" << at << "] = " << y[at] << ", want " << want);
        }
}

}  // namespace
}  // namespace kiln::compiler
