// Kernels wider than the JIT loads (32 buffers): NarrowWideNodes (compiler/passes/wide_nodes.cc)
// makes a wide Concat / Sum narrow nodes with the same output, and fusion (compiler/lower/
// fusion.cc) declines a group that would be too wide, so such models (DenseNet-169 concatenates
// 33 tensors) compile, load and run with the JIT alone and with oneDNN.
#define BOOST_TEST_MODULE wide_nodes_test
#include "compiler/passes/wide_nodes.h"

#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <memory>
#include <string>
#include <vector>

#include "compiler/compile.h"
#include "embed/compile.h"
#include "external/onednn/run/runtime.h"
#include "external/registry/registry.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

// x [B, 3] -> a_k = x * (k + 1) for k < n -> y = Concat(a_0 .. a_{n-1}) on `axis` (1 or -1):
// [B, 3n], B symbolic; `op` "Sum": y = Sum(a_0 .. a_{n-1}) [B, 3]; "chain": y = ((x + c_0) +
// c_1) ... + c_{n-1}, one fusion group.
std::string WideModel(int n, int axis, const std::string& op = "Concat") {
  int width = op == "Concat" ? 3 * n : 3;
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[B, 3] x) => (float[B, " +
                     std::to_string(width) + "] y) {\n";
  std::string inputs;
  for (int k = 0; k < n; ++k) {
    std::string c = "c" + std::to_string(k), a = "a" + std::to_string(k);
    text += "  " + c + " = Constant <value = float {" + std::to_string(k + 1) + "}> ()\n";
    if (op == "chain") {
      std::string prev = k ? "a" + std::to_string(k - 1) : "x";
      text += "  " + (k + 1 == n ? std::string("y") : a) + " = Add(" + prev + ", " + c + ")\n";
      continue;
    }
    text += "  " + a + " = Mul(x, " + c + ")\n";
    inputs += (k ? ", " : "") + a;
  }
  if (op == "Concat") text += "  y = Concat <axis = " + std::to_string(axis) + "> (" + inputs + ")\n";
  if (op == "Sum") text += "  y = Sum(" + inputs + ")\n";
  return text + "}\n";
}

int MaxConcatInputs(const Graph& g, int* concats) {
  int widest = 0;
  *concats = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (g.node(n).op_type != "Concat") continue;
    ++*concats;
    widest = std::max(widest, static_cast<int>(g.node(n).inputs.size()));
  }
  return widest;
}

BOOST_AUTO_TEST_CASE(wide_nodess_become_narrow_ones_with_the_same_output) {
  struct Case {
    int n, axis, limit, added;
  };
  for (Case c : {Case{40, 1, 31, 1}, Case{40, -1, 4, 12}, Case{31, 1, 31, 0}, Case{5, 1, 2, 3}}) {
    StatusOr<Graph> g = testing::InferText(WideModel(c.n, c.axis));
    BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
    StatusOr<int> added = NarrowWideNodes(*g, c.limit);
    BOOST_REQUIRE_MESSAGE(added.ok(), added.status().message());
    BOOST_TEST(*added == c.added, c.n << " inputs, limit " << c.limit);
    BOOST_TEST(g->Verify().ok());
    int concats = 0;
    BOOST_TEST(MaxConcatInputs(*g, &concats) <= c.limit);
    BOOST_TEST(concats == c.added + 1);
    BOOST_TEST(testing::TypeOf(*g, "y") == "float32[B, " + std::to_string(3 * c.n) + "]");
    for (NodeId n = 0; n < g->num_nodes(); ++n) {  // every new Concat's shape sums its inputs
      const Node& node = g->node(n);
      if (node.op_type != "Concat") continue;
      int64_t sum = 0;
      for (ValueId v : node.inputs) sum += (*g->value(v).shape)[1].const_value();
      BOOST_TEST((*g->value(node.outputs[0]).shape)[1].const_value() == sum, node.name);
    }
  }
  StatusOr<Graph> sum = testing::InferText(WideModel(40, 1, "Sum"));
  BOOST_REQUIRE(sum.ok());
  BOOST_TEST(*NarrowWideNodes(*sum, 31) == 1);
  BOOST_TEST(sum->Verify().ok());
  BOOST_TEST(testing::TypeOf(*sum, "y") == "float32[B, 3]");
  StatusOr<Graph> g = testing::InferText(WideModel(3, 1));
  BOOST_REQUIRE(g.ok());
  BOOST_TEST(NarrowWideNodes(*g, 1).status().code() == StatusCode::kInvalidArgument);
}

std::shared_ptr<ExternalRegistry> Vendors() {
  auto reg = std::make_shared<ExternalRegistry>();
  Status s = onednn::RegisterOneDnn(*reg);
  if (!s.ok()) BOOST_FAIL(s.message());
  return reg;
}

// The float32 result of WideModel(n, 1, op) for x (row-major [batch, 3]), computed as its
// kernels round: every product and every partial sum a float.
std::vector<double> WideReference(const std::vector<double>& x, int64_t batch, int n,
                                  const std::string& op) {
  std::vector<double> y;
  for (int64_t b = 0; b < batch; ++b) {
    if (op == "Concat") {
      for (int k = 0; k < n; ++k) {
        for (int j = 0; j < 3; ++j) y.push_back(static_cast<float>(x[b * 3 + j]) * (k + 1.0f));
      }
      continue;
    }
    for (int j = 0; j < 3; ++j) {
      float v = static_cast<float>(x[b * 3 + j]);
      float acc = op == "Sum" ? v : v + 1.0f;
      for (int k = 1; k < n; ++k) acc += op == "Sum" ? v * (k + 1.0f) : (k + 1.0f);
      y.push_back(acc);
    }
  }
  return y;
}

// Before the fixes each model's 41-buffer kernel compiled and then failed to load ("more than 32
// buffers"): a Concat of 40 tensors, a Sum of 40 and a chain of 40 Adds fused into one kernel.
BOOST_AUTO_TEST_CASE(forty_input_nodes_and_groups_compile_load_and_run) {
  const int n = 40;
  auto vendors = Vendors();
  for (const std::string op : {"Concat", "Sum", "chain"}) {
    std::string bytes = testing::ModelBytes(WideModel(n, 1, op));
    for (const char* external : {"none", "onednn"}) {
      CompileOptions o;
      o.external = external;
      auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, nullptr);
      BOOST_REQUIRE_MESSAGE(kiln.ok(), op << " " << external << ": " << kiln.status().message());
      auto exe = testing::LoadWithJit(*kiln, vendors);
      BOOST_REQUIRE_MESSAGE(exe.ok(), op << " " << external << ": " << exe.status().message());
      for (int64_t batch : {1, 4}) {
        auto x = testing::RandomTensor(DType::kF32, {batch, 3}, -1, 1, 7 + batch);
        auto out = testing::RunExecutable(*exe, {x});
        BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
        std::vector<double> y = WideReference(x->ToDoubles(), batch, n, op);
        int64_t width = static_cast<int64_t>(y.size()) / batch;
        // The reference rounds as the kernels do; a contracted multiply-add may round once
        // less per step (40 steps of half an ulp at most).
        std::string diff = testing::Compare(*(*out)[0], *testing::F32({batch, width}, y),
                                            op == "Concat" ? 0 : 40 * 6e-8, 0);
        BOOST_TEST(diff.empty(), op << " " << external << " batch " << batch << ": " << diff);
      }
    }
  }
}

// x [B, W] -> y_0 .. y_{n-1} = Split on axis 1, sizes k % 3 + 1 (`opset` >= 13: a sizes
// input; 11: equal parts of 2, no attribute). Sizes of output k: SplitSizes.
std::vector<int64_t> SplitSizes(int n, int opset) {
  std::vector<int64_t> sizes;
  for (int k = 0; k < n; ++k) sizes.push_back(opset >= 13 ? k % 3 + 1 : 2);
  return sizes;
}

std::string WideSplit(int n, int opset) {
  std::vector<int64_t> sizes = SplitSizes(n, opset);
  int64_t width = 0;
  std::string outs, decls, list;
  for (int k = 0; k < n; ++k) {
    width += sizes[k];
    outs += (k ? ", y" : "y") + std::to_string(k);
    decls +=
        (k ? ", float[B, " : "float[B, ") + std::to_string(sizes[k]) + "] y" + std::to_string(k);
    list += (k ? ", " : "") + std::to_string(sizes[k]);
  }
  std::string text = "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) +
                     "]>\ng (float[B, " + std::to_string(width) + "] x) => (" + decls + ") {\n";
  if (opset >= 13) {
    text += "  sizes = Constant <value = int64[" + std::to_string(n) + "] {" + list + "}> ()\n";
    return text + "  " + outs + " = Split <axis = 1> (x, sizes)\n}\n";
  }
  return text + "  " + outs + " = Split <axis = -1> (x)\n}\n";
}

// x [B, 3] -> y = op(a_0 .. a_{n-1}) [B, 3] for op Sum / Max / Min / Mean, broadcasting: the
// first 10 inputs are constants of dims [3] and [1, 3] in turn (their broadcast: [1, 3]),
// then x * (k + 1) [B, 3] and constants [3] in turn. Constant k, element j: BroadcastValue.
float BroadcastValue(int k, int j) { return 0.25f * static_cast<float>((k * 7 + j * 3) % 11) - 1; }

std::string WideBroadcast(int n, const std::string& op) {
  std::string text =
      "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[B, 3] x) => (float[B, 3] y) {\n";
  std::string inputs;
  for (int k = 0; k < n; ++k) {
    const std::string a = "a" + std::to_string(k);
    if (k >= 10 && k % 2 == 0) {
      text += "  c" + std::to_string(k) + " = Constant <value = float {" + std::to_string(k + 1) +
              "}> ()\n  " + a + " = Mul(x, c" + std::to_string(k) + ")\n";
    } else {
      std::string v;
      for (int j = 0; j < 3; ++j) v += (j ? ", " : "") + std::to_string(BroadcastValue(k, j));
      text += "  " + a + " = Constant <value = float" + (k % 2 ? "[1, 3]" : "[3]") + " {" + v +
              "}> ()\n";
    }
    inputs += (k ? ", " : "") + a;
  }
  return text + "  y = " + op + "(" + inputs + ")\n}\n";
}

// WideBroadcast(n, op)'s result for x (row-major [batch, 3]) as numpy defines it, each input
// a float32 array and the inputs combined left to right in float32 (the mean: their sum over n).
std::vector<double> BroadcastReference(const std::vector<double>& x, int64_t batch, int n,
                                       const std::string& op) {
  std::vector<double> y;
  for (int64_t b = 0; b < batch; ++b) {
    for (int j = 0; j < 3; ++j) {
      float acc = 0;
      for (int k = 0; k < n; ++k) {
        float a = k >= 10 && k % 2 == 0 ? static_cast<float>(x[b * 3 + j]) * (k + 1.0f)
                                        : BroadcastValue(k, j);
        acc = k == 0        ? a
              : op == "Max" ? std::max(acc, a)
              : op == "Min" ? std::min(acc, a)
                            : acc + a;
      }
      y.push_back(op == "Mean" ? acc / n : acc);
    }
  }
  return y;
}

// The pass itself: a 40-output Split (limit 31: 30 outputs) becomes a Split into two spans
// (30 and 10 outputs) and one Split per span; 65 outputs three spans; at limit 4 (3 outputs)
// 40 take three levels (14 spans, then 5, then 2). A Mean becomes a Sum over a count; a
// broadcasting Sum's leading node has its inputs' broadcast shape.
BOOST_AUTO_TEST_CASE(wide_splits_means_and_broadcasting_nodes_become_narrow_ones) {
  struct Case {
    int n, limit, added;
  };
  for (int opset : {17, 11}) {
    for (Case c : {Case{40, 31, 2}, Case{65, 31, 3}, Case{40, 4, 21}, Case{30, 31, 0}}) {
      const int n = c.n;
      StatusOr<Graph> g = testing::InferText(WideSplit(n, opset));
      BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
      StatusOr<int> added = NarrowWideNodes(*g, c.limit);
      BOOST_REQUIRE_MESSAGE(added.ok(), added.status().message());
      BOOST_TEST(*added == c.added, "opset " << opset << ", " << n << " limit " << c.limit);
      BOOST_TEST(g->Verify().ok());
      for (NodeId k = 0; k < g->num_nodes(); ++k) {
        if (g->node(k).op_type == "Split")
          BOOST_TEST(g->node(k).outputs.size() <= static_cast<size_t>(c.limit - 1));
      }
      const std::vector<int64_t> sizes = SplitSizes(n, opset);
      for (int k = 0; k < n; ++k) {
        BOOST_TEST(testing::TypeOf(*g, "y" + std::to_string(k)) ==
                   "float32[B, " + std::to_string(sizes[k]) + "]");
      }
    }
  }
  StatusOr<Graph> mean = testing::InferText(WideBroadcast(40, "Mean"));
  BOOST_REQUIRE_MESSAGE(mean.ok(), mean.status().message());
  BOOST_TEST(*NarrowWideNodes(*mean, 31) == 2);  // the Div and the leading Sum
  BOOST_TEST(mean->Verify().ok());
  BOOST_TEST(testing::TypeOf(*mean, "y") == "float32[B, 3]");
  int sums = 0, divs = 0;
  for (NodeId k = 0; k < mean->num_nodes(); ++k) {
    const Node& node = mean->node(k);
    BOOST_TEST(node.op_type != "Mean");
    sums += node.op_type == "Sum", divs += node.op_type == "Div";
    if (node.op_type == "Sum" && node.inputs.size() == 10u)
      BOOST_TEST(testing::TypeOf(*mean, mean->value(node.outputs[0]).name) == "float32[1, 3]");
  }
  BOOST_TEST(sums == 2);
  BOOST_TEST(divs == 1);
}

// Before the fixes these failed to load ("more than 32 buffers"): a 40-output Split (with a
// sizes input and with equal parts), and a 40-input Mean, broadcasting Sum and Max.
BOOST_AUTO_TEST_CASE(forty_output_splits_and_broadcasting_nodes_compile_load_and_run) {
  const int n = 40;
  auto vendors = Vendors();
  for (const char* external : {"none", "onednn"}) {
    CompileOptions o;
    o.external = external;
    for (int opset : {17, 11}) {
      std::string bytes = testing::ModelBytes(WideSplit(n, opset));
      auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, nullptr);
      BOOST_REQUIRE_MESSAGE(kiln.ok(), "Split " << external << ": " << kiln.status().message());
      auto exe = testing::LoadWithJit(*kiln, vendors);
      BOOST_REQUIRE_MESSAGE(exe.ok(), "Split " << external << ": " << exe.status().message());
      const std::vector<int64_t> sizes = SplitSizes(n, opset);
      int64_t width = 0;
      for (int64_t s : sizes) width += s;
      for (int64_t batch : {1, 3}) {
        auto x = testing::RandomTensor(DType::kF32, {batch, width}, -1, 1, 11 + batch);
        auto out = testing::RunExecutable(*exe, {x});
        BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
        BOOST_REQUIRE(out->size() == static_cast<size_t>(n));
        const std::vector<double> xv = x->ToDoubles();
        int64_t offset = 0;
        for (int k = 0; k < n; ++k) {  // numpy.split(x, cumsum(sizes)[:-1], axis=1)[k]
          std::vector<double> want;
          for (int64_t b = 0; b < batch; ++b) {
            for (int64_t j = 0; j < sizes[k]; ++j) want.push_back(xv[b * width + offset + j]);
          }
          offset += sizes[k];
          std::string diff =
              testing::Compare(*(*out)[k], *testing::F32({batch, sizes[k]}, want), 0, 0);
          BOOST_TEST(diff.empty(),
                     "opset " << opset << " " << external << " y" << k << ": " << diff);
        }
      }
    }
    for (const std::string op : {"Mean", "Sum", "Max"}) {
      std::string bytes = testing::ModelBytes(WideBroadcast(n, op));
      auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, nullptr);
      BOOST_REQUIRE_MESSAGE(kiln.ok(), op << " " << external << ": " << kiln.status().message());
      auto exe = testing::LoadWithJit(*kiln, vendors);
      BOOST_REQUIRE_MESSAGE(exe.ok(), op << " " << external << ": " << exe.status().message());
      for (int64_t batch : {1, 4}) {
        auto x = testing::RandomTensor(DType::kF32, {batch, 3}, -1, 1, 7 + batch);
        auto out = testing::RunExecutable(*exe, {x});
        BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
        std::vector<double> y = BroadcastReference(x->ToDoubles(), batch, n, op);
        // Rounded as the kernels do; a contracted multiply-add may round once less per step.
        std::string diff = testing::Compare(*(*out)[0], *testing::F32({batch, 3}, y),
                                            op == "Max" ? 0 : 40 * 6e-8, op == "Max" ? 0 : 1e-6);
        BOOST_TEST(diff.empty(), op << " " << external << " batch " << batch << ": " << diff);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::compiler
