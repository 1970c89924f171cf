// Dead-node removal (compiler/passes/dead_nodes.cc) on imported graphs: what reaches no graph
// output goes, transitively; graph outputs, their producers, producers read only through an
// If's subgraph capture, and nodes of which only one output is read stay.
#define BOOST_TEST_MODULE dead_nodes_test
#include <boost/test/unit_test.hpp>

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/passes/dead_nodes.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

Graph Import(const std::string& text) {
  StatusOr<Graph> g = testing::ImportText(text);
  if (!g.ok()) BOOST_FAIL(g.status().message());
  return std::move(*g);
}

// Runs the pass and checks the graph is still well formed.
int Remove(Graph& g) {
  StatusOr<int> removed = RemoveDeadNodes(g);
  BOOST_REQUIRE_MESSAGE(removed.ok(), removed.status().ToString());
  Status verified = g.Verify();
  BOOST_TEST(verified.ok(), verified.ToString());
  return *removed;
}

// t reads a live value, u a dead one (a chain of two), v nothing live at all; the rest feed y.
// Split's second output is unread, but its first is: it stays, with both outputs.
BOOST_AUTO_TEST_CASE(dead_chains_go_and_live_nodes_stay) {
  Graph g = Import(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (float[2] y, float[4] r) {
      a = Relu(x)
      t = Tanh(a)
      u = Neg(t)
      k = Constant <value = float {2}> ()
      v = Mul(k, k)
      h1, h2 = Split <axis = 0> (a)
      y = Abs(h1)
      r = Sigmoid(a)
    })");
  BOOST_TEST(Remove(g) == 4);  // t, u, k, v
  std::set<std::string> kept;
  for (NodeId n = 0; n < g.num_nodes(); ++n) kept.insert(g.value(g.node(n).outputs[0]).name);
  BOOST_TEST((kept == std::set<std::string>{"a", "h1", "y", "r"}));
  BOOST_TEST(!g.FindValue("t").has_value());
  BOOST_TEST(!g.FindValue("v").has_value());
  BOOST_TEST(g.FindValue("h2").has_value());  // an output of a live node
  // a is read by Split and Sigmoid only now.
  BOOST_TEST(g.Users(*g.FindValue("a")).size() == 2u);
  BOOST_TEST(g.value(g.outputs()[0]).name == "y");
  BOOST_TEST(g.value(g.outputs()[1]).name == "r");
  BOOST_TEST(Remove(g) == 0);  // nothing left to do
}

// c is read only inside the If's branches (a capture, the If's implicit input): it lives as long
// as the If does. The second If is unread, so it goes and so does d, which only it captured.
BOOST_AUTO_TEST_CASE(subgraph_captures_keep_their_producers) {
  Graph g = Import(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (bool b, float[4] x) => (float[4] y) {
      c = Relu(x)
      d = Tanh(x)
      y = If (b) <
        then_branch = t () => (float[4] ty) { ty = Neg(c) },
        else_branch = e () => (float[4] ey) { ey = Abs(c) }
      >
      z = If (b) <
        then_branch = t2 () => (float[4] tz) { tz = Neg(d) },
        else_branch = e2 () => (float[4] ez) { ez = Abs(d) }
      >
    })");
  BOOST_TEST(Remove(g) == 2);
  BOOST_TEST(g.num_nodes() == 2);
  BOOST_TEST(g.FindValue("c").has_value());
  BOOST_TEST(!g.FindValue("d").has_value());
  BOOST_TEST(!g.FindValue("z").has_value());
  NodeId if_node = g.value(g.outputs()[0]).producer;
  BOOST_TEST(g.node(if_node).op_type == "If");
  BOOST_TEST((g.node(if_node).implicit_inputs == std::vector<ValueId>{*g.FindValue("c")}));
}

// A graph output read straight from a graph input or an initializer: no node is needed, and
// unread graph inputs and initializers stay (they are the model's signature and data).
BOOST_AUTO_TEST_CASE(inputs_and_initializers_stay) {
  Graph g = Import(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x, float[4] unused) => (float[4] x2) <float[4] w = {1, 2, 3, 4}> {
      x2 = Identity(x)
      q = Add(unused, w)
    })");
  BOOST_TEST(Remove(g) == 1);
  BOOST_TEST(g.inputs().size() == 2u);
  BOOST_TEST(g.FindValue("w").has_value());
  BOOST_TEST(g.FindValue("unused").has_value());
  BOOST_TEST(g.Users(*g.FindValue("w")).empty());
}

// A value shape inference folded is emitted as a constant. When its producer read a run-time
// value (Shape(x): ShuffleNet's Slice bounds), that producer does not run: it goes, and the value
// stays as a constant its live readers still read. A producer that reads only constants (the
// Constant here; a DequantizeLinear of int8 weights, which the int8 rules match) stays.
BOOST_AUTO_TEST_CASE(folded_values_of_run_time_readers_stay_as_constants) {
  StatusOr<Graph> inferred = testing::InferText(R"(<ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 3] x) => (float[2, 3] y) <int64[2] dims = {2, 3}> {
      k = Constant <value = float[3] {1, 2, 3}> ()
      s = Shape(x)
      r = Reshape(x, s)
      y = Add(r, k)
    })");
  BOOST_REQUIRE_MESSAGE(inferred.ok(), inferred.status().ToString());
  Graph& g = *inferred;
  // What the compiler's fold hook does to Shape of a static shape (plain InferShapes does not).
  g.mutable_value(*g.FindValue("s")).data = g.value(*g.FindValue("dims")).data;
  BOOST_REQUIRE(g.value(*g.FindValue("k")).data != nullptr);
  BOOST_TEST(Remove(g) == 1);  // the Shape node
  BOOST_TEST(g.num_nodes() == 3);
  std::optional<ValueId> s_value = g.FindValue("s");
  BOOST_REQUIRE(s_value.has_value());
  BOOST_TEST(g.value(*s_value).producer == kNoNode);
  BOOST_TEST((g.value(*s_value).kind == ValueKind::kConstant));
  BOOST_TEST(g.value(*s_value).data != nullptr);
  BOOST_TEST(g.Users(*s_value).size() == 1u);                        // the Reshape
  BOOST_TEST(g.Users(*g.FindValue("x")).size() == 1u);               // Shape no longer reads x
  BOOST_TEST(g.value(*g.FindValue("k")).producer != kNoNode);        // the Constant stays
}

}  // namespace
}  // namespace kiln::compiler
