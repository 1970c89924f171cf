// Shape inference over whole graphs (compiler/passes/shape_inference.cc): symbols flowing
// through a transformer block, known shape values, folded constants, data-dependence flags,
// subgraphs with captures, re-running after edits, and the errors, each naming the node.
#define BOOST_TEST_MODULE shape_inference_test
#include "compiler/passes/shape_inference.h"

#include <boost/test/unit_test.hpp>
#include <string>
#include <vector>

#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::ImportText;
using testing::InferText;
using testing::TypeOf;

// One attention block as exporters write it: shapes computed with Shape/Gather/Concat.
const char* kAttention = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  attention (float[batch, seq, 64] x, float[64, 64] wq, float[64, 64] wk, float[64, 64] wv)
      => (float[batch, seq, 64] out) {
    q = MatMul(x, wq)
    k = MatMul(x, wk)
    v = MatMul(x, wv)
    dims = Shape(x)
    zero = Constant<value = int64 {0}>()
    one = Constant<value = int64 {1}>()
    b = Gather(dims, zero)
    s = Gather(dims, one)
    axis0 = Constant<value = int64[1] {0}>()
    b1 = Unsqueeze(b, axis0)
    s1 = Unsqueeze(s, axis0)
    heads = Constant<value = int64[2] {4, 16}>()
    split_shape = Concat<axis = 0>(b1, s1, heads)
    qh = Reshape(q, split_shape)
    kh = Reshape(k, split_shape)
    vh = Reshape(v, split_shape)
    qt = Transpose<perm = [0, 2, 1, 3]>(qh)
    kt = Transpose<perm = [0, 2, 3, 1]>(kh)
    vt = Transpose<perm = [0, 2, 1, 3]>(vh)
    scores = MatMul(qt, kt)
    probs = Softmax(scores)
    ctx = MatMul(probs, vt)
    ctx_t = Transpose<perm = [0, 2, 1, 3]>(ctx)
    minus_one = Constant<value = int64[1] {-1}>()
    merge_shape = Concat<axis = 0>(b1, s1, minus_one)
    out = Reshape(ctx_t, merge_shape)
  }
)";

BOOST_AUTO_TEST_CASE(symbols_flow_through_an_attention_block) {
  StatusOr<Graph> g = InferText(kAttention);
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(TypeOf(*g, "q") == "float32[batch, seq, 64]");
  BOOST_TEST(TypeOf(*g, "dims") == "int64[3]");
  BOOST_TEST(TypeOf(*g, "split_shape") == "int64[4]");
  BOOST_TEST(TypeOf(*g, "qt") == "float32[batch, 4, seq, 16]");
  BOOST_TEST(TypeOf(*g, "scores") == "float32[batch, 4, seq, seq]");
  BOOST_TEST(TypeOf(*g, "ctx_t") == "float32[batch, seq, 4, 16]");
  BOOST_TEST(TypeOf(*g, "out") == "float32[batch, seq, 64]");
  // No node needed run-time values: every shape is a function of the input shapes.
  for (NodeId n = 0; n < g->num_nodes(); ++n)
    BOOST_TEST(!g->node(n).data_dependent_shape, g->node(n).name);
}

BOOST_AUTO_TEST_CASE(records_symbolic_values_and_folded_constants) {
  StatusOr<Graph> g = InferText(kAttention);
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  const Value& dims = g->value(*g->FindValue("dims"));
  BOOST_TEST_REQUIRE(dims.symbolic_value.has_value());
  BOOST_TEST(ShapeToString(*dims.symbolic_value) == "[batch, seq, 64]");
  BOOST_TEST(ShapeToString(*g->value(*g->FindValue("split_shape")).symbolic_value) ==
             "[batch, seq, 4, 16]");
  const Value& heads = g->value(*g->FindValue("heads"));
  BOOST_TEST_REQUIRE(heads.data != nullptr);
  BOOST_TEST((*heads.data->ToInt64s() == std::vector<int64_t>{4, 16}));
}

BOOST_AUTO_TEST_CASE(dim_pins_make_every_shape_static) {
  ImportOptions options;
  options.dim_pins = {{"batch", 2}, {"seq", 5}};
  StatusOr<Graph> g = InferText(kAttention, options);
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(TypeOf(*g, "scores") == "float32[2, 4, 5, 5]");
  BOOST_TEST(TypeOf(*g, "out") == "float32[2, 5, 64]");
}

BOOST_AUTO_TEST_CASE(a_contradiction_names_the_node) {
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[batch, 4] x, float[3] b) => (y) {
      a = Relu(x)
      c = Neg(a)
      d = Abs(c)
      y = Add(d, b)
    }
  )");
  BOOST_TEST(g.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(g.status().message() == "node 'Add_3' (Add): cannot broadcast [batch, 4] with [3]");
}

BOOST_AUTO_TEST_CASE(declared_outputs_are_checked) {
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x) => (float[N, 3] y) { y = Relu(x) }
  )");
  BOOST_TEST(g.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(g.status().message() ==
             "node 'Relu_0' (Relu): graph output 'y' is declared float32[N, 3] but inferred "
             "float32[N, 4]");
  g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x) => (int64[N, 4] y) { y = Relu(x) }
  )");
  BOOST_TEST(
      g.status().message() ==
      "node 'Relu_0' (Relu): graph output 'y' is declared int64[N, 4] but inferred float32[N, 4]");
  // A declared symbolic name binds nothing: exporters' names ("Addy_dim_0") are not checked.
  BOOST_TEST(InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x) => (float[M, 4] y) { y = Relu(x) }
  )")
                 .ok());
}

BOOST_AUTO_TEST_CASE(an_op_missing_from_the_registry_is_unsupported) {
  StatusOr<Graph> g = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (y) { y = Relu(x) }
  )");
  BOOST_TEST_REQUIRE(g.ok());
  OpRegistry empty;
  ShapeInferenceOptions options;
  options.registry = &empty;
  Status s = InferShapes(*g, options);
  BOOST_TEST(s.code() == StatusCode::kUnsupported);
  BOOST_TEST(s.message() == "node 'Relu_0' (Relu): Relu is not supported");
}

BOOST_AUTO_TEST_CASE(overridable_defaults_are_not_constants) {
  // `shape` may be replaced at run time, so Reshape cannot use its default.
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x, int64[2] shape = {-1, 2}) => (y) <int64[2] fixed = {-1, 2}> {
      y = Reshape(x, shape)
      z = Reshape(x, fixed)
    }
  )");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(TypeOf(*g, "y") == "float32[?0, ?1]");
  BOOST_TEST(g->node(0).data_dependent_shape);
  BOOST_TEST(TypeOf(*g, "z") == "float32[N*2, 2]");
  BOOST_TEST(!g->node(1).data_dependent_shape);
}

BOOST_AUTO_TEST_CASE(data_dependent_nodes_are_marked) {
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x) => (y) {
      nz = NonZero(x)
      t = Transpose(nz)
      y = Relu(x)
    }
  )");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(TypeOf(*g, "nz") == "int64[2, ?0]");
  BOOST_TEST(TypeOf(*g, "t") == "int64[?0, 2]");
  BOOST_TEST(g->node(0).data_dependent_shape);
  BOOST_TEST(!g->node(1).data_dependent_shape);  // its shape follows from its input's shape
}

// What a rule assumes about dims it cannot compare is kept on the node (the emitted kernels
// check it); what it can prove is not.
BOOST_AUTO_TEST_CASE(unprovable_dim_relations_are_recorded_as_facts) {
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[M, K1] a, float[K2, 3] b, float[S] x, float[3] c, float[T] u, float[S] v) => (m, y, w, e) {
      m = MatMul(a, b)
      y = Add(x, c)
      w = Add(x, u)
      e = Add(x, v)
    }
  )");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  auto facts = [&](int n) {
    std::string out;
    for (const DimFact& f : g->node(n).dim_facts) {
      out += f.a.ToString() + (f.kind == DimFact::Kind::kEqual ? " == " : " bcast ") +
             f.b.ToString() + "; ";
    }
    return out;
  };
  BOOST_TEST(TypeOf(*g, "m") == "float32[M, 3]");
  BOOST_TEST(facts(0) == "K1 == K2; ");
  BOOST_TEST(TypeOf(*g, "y") == "float32[3]");
  BOOST_TEST(facts(1) == "S bcast 3; ");
  BOOST_TEST(TypeOf(*g, "w") == "float32[?0]");
  BOOST_TEST(facts(2) == "S bcast ?0; T bcast ?0; ");
  BOOST_TEST(facts(3) == "");  // equal dims need no check
}

BOOST_AUTO_TEST_CASE(subgraphs_see_captured_values) {
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (bool c, float[B, 4] x, int64 n) => (y, z) {
      w = Neg(x)
      y = If (c) <
        then_branch = t () => (a) { a = Relu(w) },
        else_branch = e () => (b) { b = Abs(x) }>
      z = Loop (n, c, x) <body = body (int64 i, bool ci, float[B, 4] v) => (bool co, vo) {
        co = Identity(ci)
        vo = If (ci) <
          then_branch = t2 () => (p) { p = Add(v, w) },
          else_branch = e2 () => (q) { q = Identity(v) }>
      }>
    }
  )");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(TypeOf(*g, "y") == "float32[B, 4]");
  BOOST_TEST(TypeOf(*g, "z") == "float32[B, 4]");
  const Graph& then_g = *g->node(*g->FindNode("If_1")).FindAttribute("then_branch")->graph();
  BOOST_TEST(TypeOf(then_g, "w") == "float32[B, 4]");
  BOOST_TEST(TypeOf(then_g, "a") == "float32[B, 4]");
}

BOOST_AUTO_TEST_CASE(rerunning_after_an_edit_updates_types) {
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x, float[N, 8] z) => (y) { a = Relu(x)  y = Neg(a) }
  )");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(TypeOf(*g, "y") == "float32[N, 4]");
  BOOST_TEST(InferShapes(*g).ok());  // idempotent
  BOOST_TEST(TypeOf(*g, "y") == "float32[N, 4]");
  g->SetNodeInput(0, 0, *g->FindValue("z"));
  BOOST_TEST_REQUIRE(InferShapes(*g).ok());
  BOOST_TEST(TypeOf(*g, "y") == "float32[N, 8]");
}

BOOST_AUTO_TEST_CASE(input_counts_and_dtypes_are_checked_before_rules) {
  StatusOr<Graph> g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (y) { y = Add(x) }
  )");
  BOOST_TEST(g.status().message() == "node 'Add_0' (Add): has 1 inputs, expected 2");
  g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (y) { y = Relu(x, x) }
  )");
  BOOST_TEST(g.status().message() == "node 'Relu_0' (Relu): has 2 inputs, expected 1");
  g = InferText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (bool[2] x) => (y) { y = Relu(x) }
  )");
  BOOST_TEST(g.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(g.status().message() ==
             "node 'Relu_0' (Relu): input 0 'x' has dtype bool; Relu accepts float32, float16, "
             "bfloat16, float64, "
             "int8, uint8, int16, int32, int64, uint16, uint32, uint64");
}

}  // namespace
}  // namespace kiln::compiler
