// ONNX function expansion (compiler/onnx/function_expand.cc) through the importer: fixed and
// context-dependent bodies, nested bodies, attribute references and defaults, subgraphs, unique
// names, and what is left alone.
#define BOOST_TEST_MODULE function_expand_test
#include <onnx/onnx_pb.h>

#include <boost/test/unit_test.hpp>
#include <set>
#include <string>

#include "compiler/onnx/importer.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::ImportText;
using testing::InferText;
using testing::ModelBytes;
using testing::TypeOf;

std::multiset<std::string> OpTypes(const Graph& g) {
  std::multiset<std::string> ops;
  for (NodeId n = 0; n < g.num_nodes(); ++n) ops.insert(g.node(n).op_type);
  return ops;
}

// The import failed with `code` and exactly `message`.
void ExpectError(const StatusOr<Graph>& g, StatusCode code, const std::string& message) {
  BOOST_TEST(g.status().code() == code, g.status().ToString());
  BOOST_TEST(g.status().message() == message, g.status().message());
}

bool AllNamesStartWith(const Graph& g, const std::string& prefix) {
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    if (g.node(n).name.rfind(prefix, 0) != 0) return false;
  return true;
}

BOOST_AUTO_TEST_CASE(a_context_dependent_body_replaces_the_node) {
  // NegativeLogLikelihoodLoss: its body depends on whether a weight is given and on the type of
  // the input (declared here).
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[3, 5] x, int64[3] t, float[5] w) => (float loss) {
      loss = NegativeLogLikelihoodLoss <reduction = "sum"> (x, t, w)
    })");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  std::multiset<std::string> ops = OpTypes(*g);
  BOOST_TEST(ops.count("NegativeLogLikelihoodLoss") == 0);
  BOOST_TEST(ops.count("GatherElements") == 1);
  BOOST_TEST(ops.count("ReduceSum") >= 1);
  BOOST_TEST(AllNamesStartWith(*g, "NegativeLogLikelihoodLoss_0/"));
  BOOST_TEST(TypeOf(*g, "loss") == "float32[]");
}

BOOST_AUTO_TEST_CASE(nested_bodies_expand_with_inferred_types) {
  // SoftmaxCrossEntropyLoss's body calls NegativeLogLikelihoodLoss on an internal value whose
  // type only shape inference knows.
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[3, 5, 2] x, int64[3, 2] t) => (float[3, 2] loss, float[3, 5, 2] log_prob) {
      loss, log_prob = SoftmaxCrossEntropyLoss <reduction = "none", ignore_index = 1> (x, t)
    })");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  std::multiset<std::string> ops = OpTypes(*g);
  BOOST_TEST(ops.count("SoftmaxCrossEntropyLoss") == 0);
  BOOST_TEST(ops.count("NegativeLogLikelihoodLoss") == 0);
  BOOST_TEST(ops.count("LogSoftmax") == 1);
  BOOST_TEST(TypeOf(*g, "loss") == "float32[3, 2]");
  BOOST_TEST(TypeOf(*g, "log_prob") == "float32[3, 5, 2]");
}

BOOST_AUTO_TEST_CASE(attribute_references_take_the_node_value_or_the_schema_default) {
  // HannWindow's body casts to the referenced output_datatype (default 1, float) and reads
  // periodic (default 1).
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (int32 n) => (double[?] a, float[?] b) {
      a = HannWindow <output_datatype = 11, periodic = 0> (n)
      b = HannWindow (n)
    })");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(OpTypes(*g).count("HannWindow") == 0);
  BOOST_TEST(TypeOf(*g, "a").rfind("float64[", 0) == 0, TypeOf(*g, "a"));
  BOOST_TEST(TypeOf(*g, "b").rfind("float32[", 0) == 0, TypeOf(*g, "b"));
}

BOOST_AUTO_TEST_CASE(internal_names_avoid_the_names_the_model_uses) {
  // The model already uses the name the body's first internal value ("A0") would get.
  onnx::ModelProto m;
  BOOST_TEST_REQUIRE(m.ParseFromString(ModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (int32 n, float a) => (float[?] y, float z) {
      y = HannWindow (n)
      z = Identity (a)
    })")));
  m.mutable_graph()->mutable_input(1)->set_name("HannWindow_0/A0");
  m.mutable_graph()->mutable_node(1)->set_input(0, "HannWindow_0/A0");
  std::string bytes;
  m.SerializeToString(&bytes);
  StatusOr<Graph> g = ImportOnnxBytes(bytes);
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  std::optional<ValueId> a = g->FindValue("HannWindow_0/A0");
  BOOST_TEST_REQUIRE(a.has_value());
  BOOST_TEST((g->value(*a).kind == ValueKind::kGraphInput));
  BOOST_TEST(g->FindValue("HannWindow_0/A0_1").has_value());
}

BOOST_AUTO_TEST_CASE(bodies_in_subgraphs_expand) {
  StatusOr<Graph> g = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (int32 n, bool c) => (float[?] y) {
      y = If (c) <then_branch = t () => (float[?] p) { p = HannWindow (n) },
                  else_branch = e () => (float[?] q) { q = HammingWindow (n) }>
    })");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  for (NodeId n = 0; n < g->num_nodes(); ++n) {
    for (const auto& [name, attr] : g->node(n).attributes) {
      if (attr.type() != Attribute::Type::kGraph) continue;
      std::multiset<std::string> ops = OpTypes(*attr.graph());
      BOOST_TEST(ops.count("HannWindow") + ops.count("HammingWindow") == 0);
      BOOST_TEST(ops.count("Cos") >= 1);
    }
  }
}

BOOST_AUTO_TEST_CASE(kiln_keeps_bodies_for_ops_past_libonnx) {
  // GroupNormalization is new in 18 and redefined in 21 (per-channel scale); libonnx 1.12 has
  // neither. The bodies keep the model's types and shapes.
  for (auto [opset, channels] : {std::pair{18, 2}, {21, 6}}) {
    std::string c = std::to_string(channels);
    StatusOr<Graph> g = InferText(
        "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) +
        "]> g (float[2, 6, 5] x, float[" + c + "] s, float[" + c +
        "] b) => (y) { y = GroupNormalization <num_groups = 2> (x, s, b) }");
    BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
    std::multiset<std::string> ops = OpTypes(*g);
    BOOST_TEST(ops.count("GroupNormalization") == 0);
    BOOST_TEST(ops.count("ReduceMean") == 2);
    BOOST_TEST(TypeOf(*g, "y") == "float32[2, 6, 5]");
  }
  StatusOr<Graph> bad = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 20]>
    g (float[2] x) => (y) { y = Gelu <approximate = "fast"> (x) })");
  ExpectError(bad, StatusCode::kInvalidArgument,
              "node 'Gelu_0' (Gelu): approximate is 'fast'; ONNX allows 'none' and 'tanh'");
}

BOOST_AUTO_TEST_CASE(a_body_op_that_changed_meaning_is_refused) {
  // DynamicQuantizeLinear's body is written at opset 11 and reduces with ReduceMin's axes
  // attribute; from opset 18 kiln reads ReduceMin's axes from an input, so the body would
  // mean something else there.
  StatusOr<Graph> g = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 18]>
    g (float[4] x) => (y, s, z) { y, s, z = DynamicQuantizeLinear (x) })");
  ExpectError(g, StatusCode::kUnsupported,
              "node 'DynamicQuantizeLinear_0' (DynamicQuantizeLinear): its ONNX function body "
              "uses ReduceMin (body opset 11), which means something else at the model's "
              "opset 18");
  // The window functions' bodies use only ops that kept their meaning: they import at 21.
  StatusOr<Graph> w = ImportText(R"(
    <ir_version: 10, opset_import: ["" : 21]>
    g (int32 n) => (float[?] y) { y = HannWindow (n) })");
  BOOST_TEST_REQUIRE(w.ok(), w.status().ToString());
  BOOST_TEST(OpTypes(*w).count("HannWindow") == 0);
}

BOOST_AUTO_TEST_CASE(ops_kiln_implements_are_not_expanded) {
  // LayerNormalization has a body at opset 17, but kiln lowers it itself.
  StatusOr<Graph> g = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 4] x, float[4] s, float[4] b) => (y) {
      y = LayerNormalization (x, s, b)
    })");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(g->num_nodes() == 1);
  BOOST_TEST(g->node(0).op_type == "LayerNormalization");
}

BOOST_AUTO_TEST_CASE(ops_without_a_body_are_still_reported_together) {
  StatusOr<Graph> g = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[3, 5] x, int64[3] t, float[2, 2] m) => (loss, d) {
      loss = NegativeLogLikelihoodLoss (x, t)
      d = RandomUniformLike (m)
    })");
  ExpectError(g, StatusCode::kUnsupported,
              "the model uses 1 unsupported op type: RandomUniformLike is not supported (node "
              "'RandomUniformLike_1')");
}

BOOST_AUTO_TEST_CASE(a_node_whose_input_types_are_unknown_stays_and_is_reported) {
  // The loss input's type is declared nowhere and cannot be inferred (its producer is unknown).
  StatusOr<Graph> g = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13, "com.acme" : 1]>
    g (float[3, 5] x, int64[3] t) => (loss) {
      p = com.acme.Frob (x)
      loss = NegativeLogLikelihoodLoss (p, t)
    })");
  ExpectError(g, StatusCode::kUnsupported,
              "the model uses 2 unsupported op types: NegativeLogLikelihoodLoss is not "
              "supported (node 'NegativeLogLikelihoodLoss_1'); com.acme.Frob is not supported "
              "(node 'Frob_0')");
}

}  // namespace
}  // namespace kiln::compiler
