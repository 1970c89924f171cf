// Graph IR (compiler/ir/graph.cc): building, use-def lists, topological order, cycle and
// verifier errors, cloning, node removal, constant reads, tensor data checks and conversions,
// ONNX dtype codes.
#define BOOST_TEST_MODULE graph_test
#include "compiler/ir/graph.h"

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cstring>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::compiler {
namespace {

namespace data = boost::unit_test::data;

ValueId MustValue(Graph& g, const std::string& name, ValueKind kind) {
  StatusOr<ValueId> v = g.AddValue(name, kind);
  BOOST_TEST_REQUIRE(v.ok(), v.status().ToString());
  return *v;
}

Node MakeNode(std::string name, std::string op, std::vector<ValueId> in, std::vector<ValueId> out) {
  Node n;
  n.name = std::move(name);
  n.op_type = std::move(op);
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

NodeId MustNode(Graph& g, Node n) {
  StatusOr<NodeId> id = g.AddNode(std::move(n));
  BOOST_TEST_REQUIRE(id.ok(), id.status().ToString());
  return *id;
}

// x -> a = Relu(x) -> b = Add(a, x) -> graph output b.
struct Chain {
  Graph g;
  ValueId x, a, b;
  NodeId relu, add;
  Chain() {
    x = MustValue(g, "x", ValueKind::kGraphInput);
    a = MustValue(g, "a", ValueKind::kNodeOutput);
    b = MustValue(g, "b", ValueKind::kNodeOutput);
    g.AddInput(x);
    // Added out of order on purpose: the graph does not need nodes sorted.
    add = MustNode(g, MakeNode("add", "Add", {a, x}, {b}));
    relu = MustNode(g, MakeNode("relu", "Relu", {x}, {a}));
    g.AddOutput(b);
  }
};

BOOST_AUTO_TEST_CASE(builds_and_answers_use_def_queries) {
  Chain c;
  BOOST_TEST(c.g.num_values() == 3);
  BOOST_TEST(c.g.num_nodes() == 2);
  BOOST_TEST(*c.g.FindValue("a") == c.a);
  BOOST_TEST(!c.g.FindValue("zz").has_value());
  BOOST_TEST(*c.g.FindNode("relu") == c.relu);
  BOOST_TEST(c.g.value(c.a).producer == c.relu);
  BOOST_TEST(c.g.value(c.x).producer == kNoNode);
  BOOST_TEST((c.g.Users(c.x) == std::vector<NodeId>{c.add, c.relu}));
  BOOST_TEST((c.g.Users(c.a) == std::vector<NodeId>{c.add}));
  BOOST_TEST(c.g.Users(c.b).empty());
  BOOST_TEST(c.g.DescribeNode(c.add) == "node 'add' (Add)");
  BOOST_TEST(c.g.Verify().ok());
}

BOOST_AUTO_TEST_CASE(topological_order_puts_producers_first) {
  Chain c;
  StatusOr<std::vector<NodeId>> order = c.g.TopologicalOrder();
  BOOST_TEST_REQUIRE(order.ok());
  BOOST_TEST((*order == std::vector<NodeId>{c.relu, c.add}));
}

BOOST_AUTO_TEST_CASE(topological_order_keeps_insertion_order_for_independent_nodes) {
  Graph g;
  ValueId x = MustValue(g, "x", ValueKind::kGraphInput);
  std::vector<NodeId> ids;
  for (int i = 0; i < 5; ++i) {
    ValueId o = MustValue(g, "o" + std::to_string(i), ValueKind::kNodeOutput);
    ids.push_back(MustNode(g, MakeNode("n" + std::to_string(i), "Relu", {x}, {o})));
  }
  BOOST_TEST(*g.TopologicalOrder() == ids);
}

BOOST_AUTO_TEST_CASE(a_cycle_is_reported_with_its_nodes) {
  Graph g;
  ValueId a = MustValue(g, "a", ValueKind::kNodeOutput);
  ValueId b = MustValue(g, "b", ValueKind::kNodeOutput);
  MustNode(g, MakeNode("first", "Relu", {b}, {a}));
  MustNode(g, MakeNode("second", "Neg", {a}, {b}));
  StatusOr<std::vector<NodeId>> order = g.TopologicalOrder();
  BOOST_TEST(order.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(order.status().message() ==
             "cycle: node 'first' (Relu) -> node 'second' (Neg) -> node 'first' (Relu)");
  BOOST_TEST(g.Verify().message() == order.status().message());
}

BOOST_AUTO_TEST_CASE(building_rejects_duplicates_and_second_producers) {
  Graph g;
  ValueId x = MustValue(g, "x", ValueKind::kGraphInput);
  ValueId y = MustValue(g, "y", ValueKind::kNodeOutput);
  BOOST_TEST(g.AddValue("x", ValueKind::kConstant).status().message() ==
             "value name 'x' is used twice");
  BOOST_TEST(g.AddValue("", ValueKind::kConstant).status().code() == StatusCode::kInvalidFormat);
  MustNode(g, MakeNode("p1", "Relu", {x}, {y}));
  StatusOr<NodeId> again = g.AddNode(MakeNode("p2", "Neg", {x}, {y}));
  BOOST_TEST(again.status().message() ==
             "node 'p2' (Neg): output 'y' is already produced by node 'p1' (Relu)");
  BOOST_TEST(g.AddNode(MakeNode("p1", "Neg", {x}, {})).status().message() ==
             "node name 'p1' is used twice");
  BOOST_TEST(g.AddNode(MakeNode("p3", "Neg", {x}, {x})).status().message() ==
             "node 'p3' (Neg): output 'x' is a graph input");
  BOOST_TEST(g.AddNode(MakeNode("p4", "Neg", {42}, {})).status().code() ==
             StatusCode::kInvalidFormat);
  BOOST_TEST(g.AddNode(MakeNode("", "Neg", {x}, {})).status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(g.UniqueNodeName("p1") == "p1_1");
  BOOST_TEST(g.UniqueNodeName("fresh") == "fresh");
}

BOOST_AUTO_TEST_CASE(verify_names_the_node_with_an_undefined_input) {
  Graph g;
  ValueId w = MustValue(g, "w", ValueKind::kNodeOutput);  // nothing produces it
  ValueId y = MustValue(g, "y", ValueKind::kNodeOutput);
  MustNode(g, MakeNode("conv1", "Conv", {w}, {y}));
  Status s = g.Verify();
  BOOST_TEST(s.code() == StatusCode::kInvalidFormat);
  BOOST_TEST(s.message() ==
             "node 'conv1' (Conv): input 0 'w' is not defined (not a graph input, an initializer "
             "or a node output)");
}

BOOST_AUTO_TEST_CASE(verify_checks_constants_and_outputs) {
  Graph g;
  ValueId c = MustValue(g, "c", ValueKind::kConstant);
  BOOST_TEST(g.Verify().message() == "constant 'c' has no data");
  g.mutable_value(c).data = TensorData::FromInt64s({1}, {3});
  BOOST_TEST(g.Verify().ok());
  ValueId dangling = MustValue(g, "out", ValueKind::kNodeOutput);
  g.AddOutput(dangling);
  BOOST_TEST(g.Verify().message() == "graph output 'out' is not produced by any node");
}

// outer: x; If node with a then-branch reading x (a capture).
struct WithSubgraph {
  Graph g;
  NodeId if_node;
  ValueId x;
  WithSubgraph(bool list_implicit) {
    x = MustValue(g, "x", ValueKind::kGraphInput);
    ValueId c = MustValue(g, "c", ValueKind::kGraphInput);
    ValueId y = MustValue(g, "y", ValueKind::kNodeOutput);
    auto body = std::make_shared<Graph>();
    ValueId cx = MustValue(*body, "x", ValueKind::kCapture);
    ValueId z = MustValue(*body, "z", ValueKind::kNodeOutput);
    MustNode(*body, MakeNode("inner", "Relu", {cx}, {z}));
    body->AddOutput(z);
    Node n = MakeNode("if", "If", {c}, {y});
    n.attributes["then_branch"] = Attribute::SubGraph(body);
    if (list_implicit) n.implicit_inputs = {x};
    if_node = MustNode(g, std::move(n));
  }
};

BOOST_AUTO_TEST_CASE(captures_are_implicit_inputs) {
  WithSubgraph w(true);
  BOOST_TEST(w.g.Verify().ok(), w.g.Verify().ToString());
  BOOST_TEST((w.g.Users(w.x) == std::vector<NodeId>{w.if_node}));
  WithSubgraph missing(false);
  BOOST_TEST(missing.g.Verify().message() ==
             "node 'if' (If): subgraph 'then_branch' reads 'x' but the node does not list it as an "
             "implicit input");
}

BOOST_AUTO_TEST_CASE(verify_reports_errors_inside_subgraphs_with_context) {
  WithSubgraph w(true);
  Graph& body = *w.g.node(w.if_node).FindAttribute("then_branch")->graph();
  MustValue(body, "ghost", ValueKind::kCapture);
  BOOST_TEST(w.g.Verify().message() ==
             "node 'if' (If) attribute 'then_branch': captured value 'ghost' is not defined in an "
             "enclosing graph");
}

BOOST_AUTO_TEST_CASE(clone_is_deep) {
  WithSubgraph w(true);
  Graph copy = w.g.Clone();
  Graph& body = *copy.node(w.if_node).FindAttribute("then_branch")->graph();
  body.mutable_value(0).dtype = DType::kF16;
  const Graph& original = *w.g.node(w.if_node).FindAttribute("then_branch")->graph();
  BOOST_TEST((original.value(0).dtype == DType::kInvalid));
  BOOST_TEST(copy.Verify().ok());
  BOOST_TEST(&copy.symbols() == &w.g.symbols());
}

BOOST_AUTO_TEST_CASE(set_node_input_keeps_use_lists) {
  Chain c;
  ValueId z = MustValue(c.g, "z", ValueKind::kGraphInput);
  c.g.SetNodeInput(c.add, 0, z);  // add(a, x) -> add(z, x)
  BOOST_TEST(c.g.Users(c.a).empty());
  BOOST_TEST((c.g.Users(z) == std::vector<NodeId>{c.add}));
  c.g.SetNodeInput(c.add, 1, z);  // add(z, z): x is no longer used by add
  BOOST_TEST((c.g.Users(c.x) == std::vector<NodeId>{c.relu}));
  c.g.SetNodeInput(c.add, 0, kNoValue);
  BOOST_TEST((c.g.Users(z) == std::vector<NodeId>{c.add}));
}

// Dropping nodes drops their outputs and renumbers what stays, in order, use lists included.
BOOST_AUTO_TEST_CASE(remove_nodes_renumbers_what_stays) {
  Graph g;
  ValueId x = MustValue(g, "x", ValueKind::kGraphInput);
  ValueId a = MustValue(g, "a", ValueKind::kNodeOutput);
  ValueId d = MustValue(g, "d", ValueKind::kNodeOutput);
  ValueId b = MustValue(g, "b", ValueKind::kNodeOutput);
  g.AddInput(x);
  MustNode(g, MakeNode("relu", "Relu", {x}, {a}));
  MustNode(g, MakeNode("tanh", "Tanh", {a}, {d}));
  MustNode(g, MakeNode("neg", "Neg", {x}, {b}));
  g.AddOutput(b);
  BOOST_REQUIRE(g.RemoveNodes({false, false, true}).ok());
  BOOST_TEST(g.num_nodes() == 1);
  BOOST_TEST(g.num_values() == 2);  // x and b
  BOOST_TEST(!g.FindNode("relu").has_value());
  BOOST_TEST(!g.FindValue("a").has_value());
  BOOST_TEST(*g.FindNode("neg") == 0);
  ValueId nb = *g.FindValue("b");
  BOOST_TEST(nb == 1);
  BOOST_TEST(g.value(nb).producer == 0);
  BOOST_TEST((g.node(0).inputs == std::vector<ValueId>{*g.FindValue("x")}));
  BOOST_TEST((g.Users(*g.FindValue("x")) == std::vector<NodeId>{0}));
  BOOST_TEST((g.outputs() == std::vector<ValueId>{nb}));
  BOOST_TEST((g.inputs() == std::vector<ValueId>{x}));
  BOOST_TEST(g.Verify().ok());
}

// A kept reader of a dropped output, or a dropped graph output, is refused and changes nothing.
BOOST_AUTO_TEST_CASE(remove_nodes_refuses_dangling_reads) {
  Chain c;
  Status s = c.g.RemoveNodes({true, false});  // keep add, drop relu: add reads a
  BOOST_TEST(s.code() == StatusCode::kInvalidArgument);
  BOOST_TEST(s.message().find("node 'add' (Add) reads 'a' of dropped node 'relu' (Relu)") !=
                 std::string::npos,
             s.message());
  s = c.g.RemoveNodes({false, true});  // drop add, whose b is the graph output
  BOOST_TEST(s.message().find("graph output 'b' is dropped") != std::string::npos, s.message());
  s = c.g.RemoveNodes({true});
  BOOST_TEST(s.message().find("1 flags for 2 nodes") != std::string::npos, s.message());
  BOOST_TEST(c.g.num_nodes() == 2);
  BOOST_TEST(c.g.num_values() == 3);
  BOOST_TEST(c.g.Verify().ok());
}

// The two rules agree on plain constants and differ exactly where the dead-node walk and the
// fold hook need opposite safe answers: no inputs, captures, and a graph input's default.
BOOST_AUTO_TEST_CASE(reads_only_constants_under_each_rule) {
  Graph g;
  ValueId w = MustValue(g, "w", ValueKind::kConstant);
  g.mutable_value(w).data = TensorData::FromInt64s({1}, {3});
  ValueId x = MustValue(g, "x", ValueKind::kGraphInput);
  g.mutable_value(x).data = TensorData::FromInt64s({1}, {4});  // an overridable default
  ValueId y = MustValue(g, "y", ValueKind::kGraphInput);          // no default
  std::vector<ValueId> outs;
  for (const char* name : {"o0", "o1", "o2", "o3", "o4", "o5"})
    outs.push_back(MustValue(g, name, ValueKind::kNodeOutput));
  NodeId on_const = MustNode(g, MakeNode("neg", "Neg", {w, kNoValue}, {outs[0]}));
  NodeId on_default = MustNode(g, MakeNode("add", "Add", {w, x}, {outs[1]}));
  NodeId on_input = MustNode(g, MakeNode("mul", "Mul", {w, y}, {outs[2]}));
  NodeId no_inputs = MustNode(g, MakeNode("rand", "RandomNormal", {}, {outs[3]}));
  Node capture = MakeNode("if", "If", {w}, {outs[4]});
  capture.implicit_inputs = {w};
  NodeId captures_const = MustNode(g, std::move(capture));
  Node capture_input = MakeNode("if2", "If", {w}, {outs[5]});
  capture_input.implicit_inputs = {y};
  NodeId captures_input = MustNode(g, std::move(capture_input));
  struct Case {
    NodeId node;
    bool has_data, foldable;
  };
  for (const Case& c : {Case{on_const, true, true}, Case{on_default, true, false},
                        Case{on_input, false, false}, Case{no_inputs, true, false},
                        Case{captures_const, true, false}, Case{captures_input, false, false}}) {
    BOOST_TEST(g.ReadsOnlyConstants(c.node, ConstantReads::kHasData) == c.has_data,
               g.DescribeNode(c.node));
    BOOST_TEST(g.ReadsOnlyConstants(c.node, ConstantReads::kFoldable) == c.foldable,
               g.DescribeNode(c.node));
  }
}

BOOST_AUTO_TEST_CASE(opset_lookup_and_attributes) {
  Graph g;
  g.set_opset_imports({{"", 13}, {"com.microsoft", 1}});
  BOOST_TEST(g.OpsetFor("") == 13);
  BOOST_TEST(g.OpsetFor("ai.onnx") == 13);
  BOOST_TEST(g.OpsetFor("com.microsoft") == 1);
  BOOST_TEST(g.OpsetFor("other") == 0);
  Attribute a = Attribute::Ints({1, 2});
  BOOST_TEST((a.type() == Attribute::Type::kInts));
  BOOST_TEST(std::string(Attribute::TypeName(a.type())) == "ints");
  BOOST_TEST((Attribute::Float(0.5f).f() == 0.5f));
  BOOST_TEST((Attribute::String("SAME_UPPER").type() == Attribute::Type::kString));
  BOOST_TEST(
      (Attribute::Tensor(TensorData::FromInt64s({}, {1})).type() == Attribute::Type::kTensor));
}

// ---- TensorData ------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(tensor_data_checks_its_size) {
  float v[6] = {};
  StatusOr<TensorDataRef> ok = TensorData::Copy(DType::kF32, {2, 3}, v, sizeof(v));
  BOOST_TEST_REQUIRE(ok.ok());
  BOOST_TEST((*ok)->num_elements() == 6);
  BOOST_TEST((*ok)->size_bytes() == 24u);
  StatusOr<TensorDataRef> bad = TensorData::Copy(DType::kF32, {2, 4}, v, sizeof(v));
  BOOST_TEST(bad.status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(bad.status().message() == "tensor of 8 float32 elements needs 32 bytes, has 24");
  BOOST_TEST(TensorData::Copy(DType::kF32, {-1}, v, 0).status().message() ==
             "tensor dim -1 is negative");
  BOOST_TEST(TensorData::Copy(DType::kI64, {int64_t{1} << 62, 8}, v, 0).status().code() ==
             StatusCode::kInvalidFormat);
}

BOOST_AUTO_TEST_CASE(tensor_data_shares_its_owner_without_copying) {
  auto owner = std::make_shared<std::vector<int32_t>>(std::vector<int32_t>{1, 2, 3});
  StatusOr<TensorDataRef> t = TensorData::Make(DType::kI32, {3}, owner, owner->data(), 12);
  BOOST_TEST_REQUIRE(t.ok());
  BOOST_TEST((*t)->data() == static_cast<const void*>(owner->data()));
  BOOST_TEST(owner.use_count() == 2);
}

struct ConvertCase {
  DType dtype;
  std::vector<uint8_t> bytes;
  std::vector<int64_t> ints;  // empty: not integral
  std::vector<double> doubles;
};
std::ostream& operator<<(std::ostream& os, const ConvertCase& c) {
  return os << DTypeName(c.dtype);
}

template <typename T>
std::vector<uint8_t> Bytes(std::initializer_list<T> v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), std::data(v), b.size());
  return b;
}

const ConvertCase kConvertCases[] = {
    {DType::kI64, Bytes<int64_t>({-1, 5}), {-1, 5}, {-1, 5}},
    {DType::kI32, Bytes<int32_t>({7, -8}), {7, -8}, {7, -8}},
    {DType::kI16, Bytes<int16_t>({-3, 4}), {-3, 4}, {-3, 4}},
    {DType::kI8, Bytes<int8_t>({-2, 9}), {-2, 9}, {-2, 9}},
    {DType::kU8, Bytes<uint8_t>({200, 1}), {200, 1}, {200, 1}},
    {DType::kBool, Bytes<uint8_t>({1, 0}), {1, 0}, {1, 0}},
    {DType::kF32, Bytes<float>({2.0f, -3.0f}), {2, -3}, {2, -3}},
    {DType::kF64, Bytes<double>({0.5, 1.0}), {}, {0.5, 1.0}},
    {DType::kF16, Bytes<uint16_t>({0x3c00, 0xc000}), {1, -2}, {1, -2}},  // 1.0, -2.0
    {DType::kBF16, Bytes<uint16_t>({0x3f80, 0x4040}), {1, 3}, {1, 3}},   // 1.0, 3.0
};

BOOST_DATA_TEST_CASE(tensor_data_converts_elements, data::make(kConvertCases), c) {
  StatusOr<TensorDataRef> t = TensorData::Copy(c.dtype, {2}, c.bytes.data(), c.bytes.size());
  BOOST_TEST_REQUIRE(t.ok());
  BOOST_TEST((*t)->ToDoubles() == c.doubles, boost::test_tools::per_element());
  StatusOr<std::vector<int64_t>> ints = (*t)->ToInt64s();
  if (c.ints.empty()) {
    BOOST_TEST(ints.status().message() == "element 0 (0.500000) is not an integer");
  } else {
    BOOST_TEST_REQUIRE(ints.ok());
    BOOST_TEST(*ints == c.ints, boost::test_tools::per_element());
  }
}

BOOST_AUTO_TEST_CASE(onnx_dtype_codes) {
  const std::pair<int, DType> kSupported[] = {
      {1, DType::kF32},  {2, DType::kU8},   {3, DType::kI8},   {5, DType::kI16},
      {6, DType::kI32},  {7, DType::kI64},  {9, DType::kBool}, {10, DType::kF16},
      {11, DType::kF64}, {16, DType::kBF16}, {4, DType::kU16}, {12, DType::kU32},
      {13, DType::kU64}};
  for (auto [code, dtype] : kSupported) {
    BOOST_TEST((*DTypeFromOnnx(code) == dtype), code);
    BOOST_TEST(DTypeToOnnx(dtype) == code);  // the inverse
  }
  BOOST_TEST(DTypeToOnnx(DType::kInvalid) == 0);
  for (int code : {8, 14, 15, 17, 18}) {
    StatusOr<DType> d = DTypeFromOnnx(code);
    BOOST_TEST(d.status().code() == StatusCode::kUnsupported);
    BOOST_TEST(d.status().message() ==
               "element type " + OnnxTypeName(code) + " is not supported by kiln");
  }
  BOOST_TEST(DTypeFromOnnx(8).status().message() == "element type STRING is not supported by kiln");
  BOOST_TEST(DTypeFromOnnx(0).status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(DTypeFromOnnx(99).status().code() == StatusCode::kInvalidFormat);
  BOOST_TEST(OnnxTypeName(99) == "TYPE(99)");
}

BOOST_AUTO_TEST_CASE(shape_printing) {
  BOOST_TEST(ShapeToString({DimExpr::Symbol("batch"), DimExpr(4)}) == "[batch, 4]");
  BOOST_TEST(ShapeToString({}) == "[]");
}

}  // namespace
}  // namespace kiln::compiler
