// Weight prepacking (compiler/passes/pack_weights): which MatMul / Gemm nodes become
// kiln::PackedMatMul, the packed layout (panels of `cols` columns, zero past n, alpha folded,
// transB read), sharing, and what stays untouched. Numerics end to end are in compile_test.
#define BOOST_TEST_MODULE pack_weights_test
#include <boost/test/unit_test.hpp>

#include <set>
#include <string>
#include <vector>

#include "compiler/passes/pack_weights.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

Graph Infer(const std::string& text) {
  auto g = testing::InferText(text);
  if (!g.ok()) BOOST_FAIL(g.status().message());
  return std::move(*g);
}

const Node& NodeNamed(const Graph& g, const std::string& output) {
  return g.node(g.value(*g.FindValue(output)).producer);
}

std::vector<float> Floats(const Graph& g, ValueId v) {
  const TensorData& d = *g.value(v).data;
  const float* p = static_cast<const float*>(d.data());
  return std::vector<float>(p, p + d.num_elements());
}

// B [3, 5] = 1..15 row-major; panels of 4 columns: 2 panels, the second holding column 4 only.
BOOST_AUTO_TEST_CASE(rewrites_constant_weight_products_into_packed_panels) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, S, 3] x, float[N, 3] a, float[3, 3] r)
        => (float[N, S, 5] y, float[N, 5] y2, float[N, 5] y3, float[N, 5] y4, float[N, S, 5] y5,
            float[N, 1] y6, float[N, 3] y7)
        <float[3, 5] w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
         float[5, 3] wt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
         float[5] c = {1, 1, 1, 1, 1}, float[3, 1] v = {1, 2, 3}> {
      y = MatMul(x, w)
      y2 = Gemm <transB = 1, alpha = 2.0> (a, wt, c)
      y3 = Gemm <beta = 0.0> (a, w, c)
      y4 = Gemm <beta = 0.5> (a, w, c)
      y5 = MatMul(x, w)
      y6 = MatMul(a, v)
      y7 = MatMul(a, r)
    }
  )";
  Graph g = Infer(text);
  PackWeightsStats stats;
  BOOST_REQUIRE(PackMatMulWeights(g, 4, {}, &stats).ok());
  BOOST_TEST(stats.matmuls == 2);  // y, y5 (y6: n = 1; y7: B known only at run time)
  BOOST_TEST(stats.gemms == 2);    // y2, y3 (y4: beta 0.5 with C)
  BOOST_TEST(g.OpsetFor(kKilnDomain) == 1);

  const Node& y = NodeNamed(g, "y");
  BOOST_TEST(y.op_type == "PackedMatMul");
  BOOST_TEST(y.domain == kKilnDomain);
  BOOST_TEST(y.FindAttribute("n")->i() == 5);
  BOOST_TEST(testing::TypeOf(g, g.value(y.inputs[1]).name) == "float32[2, 3, 4]");
  // Panel 0: columns 0-3 of each row; panel 1: column 4, then zeros.
  std::vector<float> want = {1, 2, 3, 4, 6, 7, 8, 9, 11, 12, 13, 14,
                             5, 0, 0, 0, 10, 0, 0, 0, 15, 0, 0, 0};
  BOOST_TEST(Floats(g, y.inputs[1]) == want, boost::test_tools::per_element());
  // The same B is packed once.
  BOOST_TEST(NodeNamed(g, "y5").inputs[1] == y.inputs[1]);
  BOOST_TEST(testing::TypeOf(g, "y") == "float32[N, S, 5]");  // the output value is untouched

  // transB reads B as [N, K]; alpha is folded into the panels; C stays.
  const Node& y2 = NodeNamed(g, "y2");
  BOOST_TEST(y2.op_type == "PackedMatMul");
  BOOST_REQUIRE(y2.inputs.size() == 3u);
  BOOST_TEST(g.value(y2.inputs[2]).name == "c");
  std::vector<float> want_t = {2, 8, 14, 20, 4, 10, 16, 22, 6, 12, 18, 24,
                               26, 0, 0, 0, 28, 0, 0, 0, 30, 0, 0, 0};
  BOOST_TEST(Floats(g, y2.inputs[1]) == want_t, boost::test_tools::per_element());
  // beta = 0 drops C.
  const Node& y3 = NodeNamed(g, "y3");
  BOOST_TEST(y3.op_type == "PackedMatMul");
  BOOST_TEST((y3.inputs.size() < 3 || y3.inputs[2] == kNoValue));

  BOOST_TEST(NodeNamed(g, "y4").op_type == "Gemm");
  BOOST_TEST(NodeNamed(g, "y6").op_type == "MatMul");
  BOOST_TEST(NodeNamed(g, "y7").op_type == "MatMul");
}

BOOST_AUTO_TEST_CASE(skipped_nodes_and_bad_widths) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 3] x) => (float[N, 5] y, float[N, 5] z)
        <float[3, 5] w = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}> {
      y = MatMul(x, w)
      z = MatMul(x, w)
    }
  )";
  Graph g = Infer(text);
  NodeId claimed = g.value(*g.FindValue("y")).producer;
  PackWeightsStats stats;
  BOOST_REQUIRE(PackMatMulWeights(g, 16, {claimed}, &stats).ok());
  BOOST_TEST(stats.matmuls == 1);
  BOOST_TEST(NodeNamed(g, "y").op_type == "MatMul");  // an external region's node
  BOOST_TEST(NodeNamed(g, "z").op_type == "PackedMatMul");
  BOOST_TEST(testing::TypeOf(g, g.value(NodeNamed(g, "z").inputs[1]).name) == "float32[1, 3, 16]");
  BOOST_TEST(stats.packed_bytes == 3 * 16 * 4);
  BOOST_TEST(PackMatMulWeights(g, 0, {}).code() == StatusCode::kInvalidArgument);
}

// A Loop body's product with a captured initializer, and the same product in an If branch nested
// in a second Loop body: each graph gets a constant of its own holding one shared packing; the
// body's capture of a run-time value stays a MatMul.
BOOST_AUTO_TEST_CASE(products_in_subgraphs_read_captured_constants_packed_once) {
  const char* text = R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (int64 m, bool c, float[N, 3] x, float[3, 3] r) => (float[N, 3] y, float[N, 3] z)
        <float[3, 3] w = {1, 2, 3, 4, 5, 6, 7, 8, 9}> {
      t = Constant <value = bool {1}> ()
      y = Loop (m, t, x) <
        body = b (int64 i, bool cin, float[N, 3] v) => (bool cout, float[N, 3] vout) {
          p = MatMul(v, w)
          vout = MatMul(p, r)
          cout = Identity(cin)
        }
      >
      z = Loop (m, t, x) <
        body = b2 (int64 i2, bool cin2, float[N, 3] v2) => (bool cout2, float[N, 3] vout2) {
          vout2 = If (c) <
            then_branch = tb () => (float[N, 3] ty) { ty = MatMul(v2, w) },
            else_branch = eb () => (float[N, 3] ey) { ey = Identity(v2) }
          >
          cout2 = Identity(cin2)
        }
      >
    }
  )";
  Graph g = Infer(text);
  PackWeightsStats stats;
  BOOST_REQUIRE(PackMatMulWeights(g, 4, {}, &stats).ok());
  BOOST_TEST(stats.matmuls == 2);
  BOOST_TEST(stats.packed_bytes == 1 * 3 * 4 * 4);  // one packing of w for both graphs

  const Graph& body = *NodeNamed(g, "y").FindAttribute("body")->graph();
  const Node& p = NodeNamed(body, "p");
  BOOST_TEST(p.op_type == "PackedMatMul");
  const Value& wp = body.value(p.inputs[1]);
  BOOST_TEST(std::string(ValueKindName(wp.kind)) == ValueKindName(ValueKind::kConstant));
  BOOST_TEST(testing::TypeOf(body, wp.name) == "float32[1, 3, 4]");
  std::vector<float> want = {1, 2, 3, 0, 4, 5, 6, 0, 7, 8, 9, 0};
  BOOST_TEST(Floats(body, p.inputs[1]) == want, boost::test_tools::per_element());
  BOOST_TEST(body.Users(*body.FindValue("w")).empty());  // the capture is read no more
  BOOST_TEST(NodeNamed(body, "vout").op_type == "MatMul");  // r is a graph input
  BOOST_TEST(body.OpsetFor(kKilnDomain) == 1);

  const Graph& body2 = *NodeNamed(g, "z").FindAttribute("body")->graph();
  const Graph& branch = *NodeNamed(body2, "vout2").FindAttribute("then_branch")->graph();
  const Node& ty = NodeNamed(branch, "ty");
  BOOST_TEST(ty.op_type == "PackedMatMul");
  BOOST_TEST(branch.value(ty.inputs[1]).data.get() == wp.data.get());
  BOOST_TEST(g.OpsetFor(kKilnDomain) == 0);  // the main graph has no product of its own
}

}  // namespace
}  // namespace kiln::compiler
