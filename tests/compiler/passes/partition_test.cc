// BYOC partitioning on hand-built graphs: regions, convexity (no cycles), maximal merging,
// composites.
#define BOOST_TEST_MODULE partition_test
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>
#include <set>

#include "compiler/passes/dead_nodes.h"
#include "compiler/passes/partition.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

VendorRules Rules(std::set<std::string> ops) {
  VendorRules r;
  r.vendor = "test";
  r.supported = [ops](const Graph& g, NodeId n) { return ops.count(g.node(n).op_type) > 0; };
  return r;
}

Graph Parse(const std::string& body, const std::string& sig) {
  auto g = testing::ImportText("<ir_version: 8, opset_import: [\"\" : 13]>\n g " + sig + " {" +
                               body + "}");
  if (!g.ok()) BOOST_FAIL(g.status().message());
  return std::move(*g);
}

std::vector<std::string> Names(const Graph& g, const std::vector<NodeId>& nodes) {
  std::vector<std::string> out;
  for (NodeId n : nodes) out.push_back(g.value(g.node(n).outputs[0]).name);
  return out;
}

std::vector<std::string> ValueNames(const Graph& g, const std::vector<ValueId>& values) {
  std::vector<std::string> out;
  for (ValueId v : values) out.push_back(g.value(v).name);
  return out;
}

// Contracting every region to one node must leave the graph acyclic.
void CheckAcyclic(const Graph& g, const std::vector<PartitionedRegion>& regions) {
  std::map<NodeId, int> unit;
  int next = 0;
  for (const PartitionedRegion& r : regions) {
    for (NodeId n : r.nodes) unit[n] = next;
    ++next;
  }
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    if (!unit.count(n)) unit[n] = next++;
  }
  std::map<int, std::set<int>> edges;
  std::map<int, int> indeg;
  for (int u = 0; u < next; ++u) indeg[u] = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    for (ValueId v : g.node(n).inputs) {
      if (v == kNoValue || g.value(v).producer == kNoNode) continue;
      int a = unit[g.value(v).producer], b = unit[n];
      if (a != b && edges[a].insert(b).second) ++indeg[b];
    }
  }
  std::vector<int> ready;
  for (auto& [u, d] : indeg) {
    if (d == 0) ready.push_back(u);
  }
  int seen = 0;
  while (!ready.empty()) {
    int u = ready.back();
    ready.pop_back();
    ++seen;
    for (int w : edges[u]) {
      if (--indeg[w] == 0) ready.push_back(w);
    }
  }
  BOOST_TEST(seen == next, "contracted graph has a cycle");
}

using V = std::vector<std::string>;

BOOST_AUTO_TEST_CASE(an_unsupported_op_splits_a_chain) {
  Graph g = Parse("a = Relu(x) b = Relu(a) c = Tanh(b) d = Relu(c) e = Relu(d)",
                  "(float[4] x) => (float[4] e)");
  auto regions = PartitionGraph(g, Rules({"Relu"}));
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 2u);
  BOOST_TEST(Names(g, (*regions)[0].nodes) == V({"a", "b"}));
  BOOST_TEST(ValueNames(g, (*regions)[0].inputs) == V({"x"}));
  BOOST_TEST(ValueNames(g, (*regions)[0].outputs) == V({"b"}));
  BOOST_TEST(Names(g, (*regions)[1].nodes) == V({"d", "e"}));
  BOOST_TEST(ValueNames(g, (*regions)[1].inputs) == V({"c"}));
  BOOST_TEST(ValueNames(g, (*regions)[1].outputs) == V({"e"}));
  CheckAcyclic(g, *regions);
}

BOOST_AUTO_TEST_CASE(never_merges_across_a_path_through_an_unsupported_op) {
  // c reads a directly and through b = Tanh(a): {a, c} would be a cycle once contracted.
  Graph g = Parse("a = Relu(x) b = Tanh(a) c = Add(a, b)", "(float[4] x) => (float[4] c)");
  auto regions = PartitionGraph(g, Rules({"Relu", "Add"}));
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 2u);
  BOOST_TEST(Names(g, (*regions)[0].nodes) == V({"a"}));
  BOOST_TEST(Names(g, (*regions)[1].nodes) == V({"c"}));
  BOOST_TEST(ValueNames(g, (*regions)[1].inputs) == V({"a", "b"}));
  CheckAcyclic(g, *regions);
}

BOOST_AUTO_TEST_CASE(a_supported_diamond_becomes_one_region) {
  Graph g = Parse("a = Relu(x) b = Relu(a) c = Sigmoid(a) d = Add(b, c)",
                  "(float[4] x) => (float[4] d)");
  auto regions = PartitionGraph(g, Rules({"Relu", "Sigmoid", "Add"}));
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 1u);
  BOOST_TEST(Names(g, (*regions)[0].nodes) == V({"a", "b", "c", "d"}));
  BOOST_TEST(ValueNames(g, (*regions)[0].outputs) == V({"d"}));
  CheckAcyclic(g, *regions);
}

BOOST_AUTO_TEST_CASE(independent_branches_join_at_their_consumer) {
  Graph g = Parse("a = Relu(x) b = Relu(y) c = Add(a, b)",
                  "(float[4] x, float[4] y) => (float[4] c)");
  auto regions = PartitionGraph(g, Rules({"Relu", "Add"}));
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 1u);
  BOOST_TEST(ValueNames(g, (*regions)[0].inputs) == V({"x", "y"}));
}

BOOST_AUTO_TEST_CASE(values_read_outside_or_returned_are_outputs) {
  Graph g = Parse("a = Relu(x) b = Relu(a) t = Tanh(a)",
                  "(float[4] x) => (float[4] a, float[4] b, float[4] t)");
  auto regions = PartitionGraph(g, Rules({"Relu"}));
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 1u);
  BOOST_TEST(ValueNames(g, (*regions)[0].outputs) == V({"a", "b"}));
  CheckAcyclic(g, *regions);
}

// A reader that reaches no graph output (a Pad Simplify bypassed or folded) does not make a value
// a region output: the compiler removes dead nodes before it partitions.
BOOST_AUTO_TEST_CASE(values_read_only_by_dead_nodes_are_not_outputs) {
  Graph g = Parse("a = Relu(x) b = Relu(a) t = Tanh(a) u = Tanh(b)",
                  "(float[4] x) => (float[4] b)");
  StatusOr<int> removed = RemoveDeadNodes(g);
  BOOST_REQUIRE(removed.ok());
  BOOST_TEST(*removed == 2);
  auto regions = PartitionGraph(g, Rules({"Relu"}));
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 1u);
  BOOST_TEST(ValueNames(g, (*regions)[0].outputs) == V({"b"}));
}

BOOST_AUTO_TEST_CASE(constants_are_not_region_inputs) {
  Graph g = Parse("c = Constant <value = float[4] {1, 2, 3, 4}> () a = Add(x, c) b = Relu(a)",
                  "(float[4] x) => (float[4] b)");
  auto regions = PartitionGraph(g, Rules({"Add", "Relu", "Constant"}));
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 1u);
  // The Constant node is claimed too, but its output never becomes an input.
  BOOST_TEST(ValueNames(g, (*regions)[0].inputs) == V({"x"}));
}

Pattern Gelu() {
  using P = Pattern;
  P div = P::Op({"Div"}, {P::Any(), P::Any()});
  P erf = P::Op({"Erf"}, {div});
  P add = P::Op({"Add"}, {erf, P::Any()}).Commutative();
  P mul = P::Op({"Mul"}, {P::Any(), add}).Commutative();
  return P::Op({"Mul"}, {mul, P::Any()}).Commutative();
}

BOOST_AUTO_TEST_CASE(a_composite_claims_ops_not_supported_alone) {
  Graph g = Parse(
      "k = Constant <value = float {1.4142}> () one = Constant <value = float {1}> () "
      "half = Constant <value = float {0.5}> () "
      "a = MatMul(x, w) d = Div(a, k) e = Erf(d) p = Add(e, one) m = Mul(a, p) "
      "y = Mul(m, half) t = Tanh(y)",
      "(float[2, 4] x, float[4, 4] w) => (float[2, 4] t)");
  VendorRules rules = Rules({"MatMul", "Mul"});
  rules.composites.push_back({"gelu", Gelu()});
  auto regions = PartitionGraph(g, rules);
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 1u);
  BOOST_TEST(Names(g, (*regions)[0].nodes) == V({"a", "d", "e", "p", "m", "y"}));
  BOOST_TEST(ValueNames(g, (*regions)[0].outputs) == V({"y"}));
  CheckAcyclic(g, *regions);
}

BOOST_AUTO_TEST_CASE(a_composite_whose_inner_value_escapes_does_not_match) {
  Graph g = Parse(
      "k = Constant <value = float {1.4142}> () one = Constant <value = float {1}> () "
      "half = Constant <value = float {0.5}> () "
      "d = Div(x, k) e = Erf(d) p = Add(e, one) m = Mul(x, p) y = Mul(m, half) z = Tanh(e)",
      "(float[4] x) => (float[4] y, float[4] z)");
  VendorRules rules = Rules({"Mul"});
  rules.composites.push_back({"gelu", Gelu()});
  auto regions = PartitionGraph(g, rules);
  BOOST_REQUIRE(regions.ok());
  // Only the two Muls (supported alone); Div, Erf and Add stay outside.
  std::set<std::string> claimed;
  for (const PartitionedRegion& r : *regions) {
    for (const std::string& n : Names(g, r.nodes)) claimed.insert(n);
  }
  BOOST_TEST(claimed == std::set<std::string>({"m", "y"}));
  CheckAcyclic(g, *regions);
}

BOOST_AUTO_TEST_CASE(overlapping_composites_first_listed_wins) {
  using P = Pattern;
  Graph g = Parse("c = Conv(x, w) a = Add(c, r) y = Relu(a)",
                  "(float[1, 1, 4, 4] x, float[1, 1, 1, 1] w, float[1, 1, 4, 4] r) => "
                  "(float[1, 1, 4, 4] y)");
  VendorRules rules = Rules({});
  P conv = P::Op({"Conv"});
  rules.composites.push_back(
      {"conv_add_relu", P::Op({"Relu"}, {P::Op({"Add"}, {conv, P::Any()}).Commutative()})});
  rules.composites.push_back({"conv_relu", P::Op({"Relu"}, {conv})});
  auto regions = PartitionGraph(g, rules);
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 1u);
  BOOST_TEST(Names(g, (*regions)[0].nodes) == V({"c", "a", "y"}));
  BOOST_TEST(ValueNames(g, (*regions)[0].inputs) == V({"x", "w", "r"}));
}

BOOST_AUTO_TEST_CASE(optional_pattern_nodes_may_be_absent) {
  using P = Pattern;
  Graph g = Parse("c = Conv(x, w) y = Sigmoid(c)",
                  "(float[1, 1, 4, 4] x, float[1, 1, 1, 1] w) => (float[1, 1, 4, 4] y)");
  VendorRules rules = Rules({});
  P conv = P::Op({"Conv"});
  rules.composites.push_back(
      {"conv_bias_relu", P::Op({"Relu"}, {P::Op({"Add"}, {conv, P::Any()}).Optional()})});
  rules.composites.push_back({"conv", conv});
  auto regions = PartitionGraph(g, rules);
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 1u);
  BOOST_TEST(Names(g, (*regions)[0].nodes) == V({"c"}));
  // Now with a Relu directly after the conv: the optional Add is skipped.
  Graph h = Parse("c = Conv(x, w) y = Relu(c)",
                  "(float[1, 1, 4, 4] x, float[1, 1, 1, 1] w) => (float[1, 1, 4, 4] y)");
  std::vector<NodeId> matched;
  BOOST_TEST(rules.composites[0].pattern.Match(h, *h.FindNode(h.node(1).name), &matched));
  BOOST_TEST(matched.size() == 2u);
}

BOOST_AUTO_TEST_CASE(regions_without_an_anchor_op_are_dropped) {
  Graph g = Parse("a = Relu(x) b = Tanh(a) c = MatMul(b, w) d = Relu(c)",
                  "(float[2, 2] x, float[2, 2] w) => (float[2, 2] d)");
  VendorRules rules = Rules({"Relu", "MatMul"});
  rules.anchor_ops = {"MatMul"};
  auto regions = PartitionGraph(g, rules);
  BOOST_REQUIRE(regions.ok());
  BOOST_REQUIRE_EQUAL(regions->size(), 1u);
  BOOST_TEST(Names(g, (*regions)[0].nodes) == V({"c", "d"}));
}

BOOST_AUTO_TEST_CASE(a_wide_random_graph_partitions_without_cycles) {
  // A layered graph with every third node unsupported: whatever merges, contraction stays a DAG.
  std::string body;
  std::vector<std::string> prev = {"x0", "x1", "x2"};
  int id = 0;
  for (int layer = 0; layer < 12; ++layer) {
    std::vector<std::string> cur;
    for (int j = 0; j < 3; ++j) {
      std::string name = "n" + std::to_string(id);
      std::string op = (id % 3 == 1) ? "Sub" : "Add";
      body += name + " = " + op + "(" + prev[j] + ", " + prev[(j + layer + 1) % 3] + ") ";
      cur.push_back(name);
      ++id;
    }
    prev = cur;
  }
  Graph g = Parse(body + " y = Add(" + prev[0] + ", " + prev[1] + ") z = Add(y, " + prev[2] + ")",
                  "(float[4] x0, float[4] x1, float[4] x2) => (float[4] z)");
  auto regions = PartitionGraph(g, Rules({"Add"}));
  BOOST_REQUIRE(regions.ok());
  BOOST_TEST(regions->size() >= 1u);
  CheckAcyclic(g, *regions);
}

}  // namespace
}  // namespace kiln::compiler
