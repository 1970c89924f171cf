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

}  // namespace
}  // namespace kiln::compiler
