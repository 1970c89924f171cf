// NarrowWideConcats (compiler/passes/wide_concat.cc): a Concat wider than a kernel's buffer
// limit becomes narrow Concats with the same output, and such a model (DenseNet-169 concatenates
// 33 tensors) compiles, loads and runs with the JIT alone and with oneDNN.
#define BOOST_TEST_MODULE wide_concat_test
#include "compiler/passes/wide_concat.h"

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
// [B, 3n], B symbolic.
std::string WideModel(int n, int axis) {
  std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[B, 3] x) => (float[B, " +
                     std::to_string(3 * n) + "] y) {\n";
  std::string inputs;
  for (int k = 0; k < n; ++k) {
    std::string c = "c" + std::to_string(k), a = "a" + std::to_string(k);
    text += "  " + c + " = Constant <value = float {" + std::to_string(k + 1) + "}> ()\n";
    text += "  " + a + " = Mul(x, " + c + ")\n";
    inputs += (k ? ", " : "") + a;
  }
  text += "  y = Concat <axis = " + std::to_string(axis) + "> (" + inputs + ")\n}\n";
  return text;
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

BOOST_AUTO_TEST_CASE(wide_concats_become_narrow_ones_with_the_same_output) {
  struct Case {
    int n, axis, limit, added;
  };
  for (Case c : {Case{40, 1, 31, 1}, Case{40, -1, 4, 12}, Case{31, 1, 31, 0}, Case{5, 1, 2, 3}}) {
    StatusOr<Graph> g = testing::InferText(WideModel(c.n, c.axis));
    BOOST_REQUIRE_MESSAGE(g.ok(), g.status().message());
    StatusOr<int> added = NarrowWideConcats(*g, c.limit);
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
  StatusOr<Graph> g = testing::InferText(WideModel(3, 1));
  BOOST_REQUIRE(g.ok());
  BOOST_TEST(NarrowWideConcats(*g, 1).status().code() == StatusCode::kInvalidArgument);
}

std::shared_ptr<ExternalRegistry> Vendors() {
  auto reg = std::make_shared<ExternalRegistry>();
  Status s = onednn::RegisterOneDnn(*reg);
  if (!s.ok()) BOOST_FAIL(s.message());
  return reg;
}

// Before the pass, the 41-buffer Concat kernel compiled and then failed to load ("more than 32
// buffers").
BOOST_AUTO_TEST_CASE(a_forty_input_concat_compiles_loads_and_runs) {
  const int n = 40;
  std::string bytes = testing::ModelBytes(WideModel(n, 1));
  auto vendors = Vendors();
  for (const char* external : {"none", "onednn"}) {
    CompileOptions o;
    o.external = external;
    auto kiln = kiln::CompileOnnxBytes(bytes.data(), bytes.size(), o, nullptr);
    BOOST_REQUIRE_MESSAGE(kiln.ok(), kiln.status().message());
    auto exe = testing::LoadWithJit(*kiln, vendors);
    BOOST_REQUIRE_MESSAGE(exe.ok(), external << ": " << exe.status().message());
    for (int64_t batch : {1, 4}) {
      auto x = testing::RandomTensor(DType::kF32, {batch, 3}, -1, 1, 7 + batch);
      auto out = testing::RunExecutable(*exe, {x});
      BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message());
      std::vector<double> xv = x->ToDoubles(), y;
      for (int64_t b = 0; b < batch; ++b) {
        for (int k = 0; k < n; ++k) {
          for (int j = 0; j < 3; ++j) y.push_back(xv[b * 3 + j] * (k + 1));
        }
      }
      // One float32 multiply per element: within half an ulp of the exact product.
      std::string diff = testing::Compare(*(*out)[0], *testing::F32({batch, 3 * n}, y), 1e-7, 0);
      BOOST_TEST(diff.empty(), external << " batch " << batch << ": " << diff);
    }
  }
}

}  // namespace
}  // namespace kiln::compiler
