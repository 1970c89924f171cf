// ONNX import (compiler/onnx/importer.cc, tensor_import.cc): symbolic dims, initializers in
// every kiln dtype (raw and typed), overridable inputs, Constant nodes, subgraphs and captures,
// dim pins, external data, and one negative test per bad-input class (code + message).
#define BOOST_TEST_MODULE importer_test
#include "compiler/onnx/importer.h"

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

namespace data = boost::unit_test::data;
using testing::ImportText;
using testing::ModelBytes;
using testing::TypeOf;

onnx::ModelProto ParseModel(const std::string& text) {
  onnx::ModelProto m;
  BOOST_TEST_REQUIRE(m.ParseFromString(ModelBytes(text)));
  return m;
}

std::string Serialize(const onnx::ModelProto& m) {
  std::string s;
  m.SerializeToString(&s);
  return s;
}

std::string TempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(base ? base : "/tmp") + "/" + name;
  ::mkdir(dir.c_str(), 0755);
  return dir;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

#define EXPECT_ERROR(expr, code_, fragment)                                          \
  do {                                                                               \
    auto result_ = (expr);                                                           \
    BOOST_TEST_REQUIRE(!result_.ok(), "expected an error containing: " << fragment); \
    BOOST_TEST(result_.status().code() == (code_), result_.status().ToString());     \
    BOOST_TEST(result_.status().message().find(fragment) != std::string::npos,       \
               "'" << result_.status().message() << "' lacks '" << fragment << "'"); \
  } while (0)

const char* kRelu = R"(
  <ir_version: 8, opset_import: ["" : 13]>
  g (float[batch, ?, 3] x) => (float[batch, ?, 3] y) { y = Relu(x) }
)";

// ---- Structure and symbolic dims ---------------------------------------------------------------

BOOST_AUTO_TEST_CASE(imports_symbolic_and_fresh_dims_and_records_the_opset) {
  StatusOr<Graph> g = ImportText(kRelu);
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(TypeOf(*g, "x") == "float32[batch, ?0, 3]");
  BOOST_TEST(g->OpsetFor("") == 13);
  BOOST_TEST(g->num_nodes() == 1);
  const Node& n = g->node(0);
  BOOST_TEST(n.name == "Relu_0");
  BOOST_TEST(n.op_type == "Relu");
  BOOST_TEST(g->value(n.inputs[0]).name == "x");
  const Value& y = g->value(g->outputs()[0]);
  BOOST_TEST((y.declared_dtype == DType::kF32));
  BOOST_TEST(ShapeToString(*y.declared_shape) == "[batch, ?1, 3]");
  BOOST_TEST(!y.shape.has_value());  // inferred later
}

BOOST_AUTO_TEST_CASE(fresh_symbols_avoid_names_the_model_uses) {
  onnx::ModelProto m = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[?, N] x) => (y) { y = Relu(x) }
  )");
  m.mutable_graph()
      ->mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(1)
      ->set_dim_param("?0");
  StatusOr<Graph> g = ImportOnnxBytes(Serialize(m));
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(TypeOf(*g, "x") == "float32[?1, ?0]");
}

BOOST_AUTO_TEST_CASE(node_names_are_kept_or_made_unique) {
  onnx::ModelProto m = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (c) { a = Relu(x)  b = Neg(a)  c = Abs(b) }
  )");
  m.mutable_graph()->mutable_node(0)->set_name("same");
  m.mutable_graph()->mutable_node(1)->set_name("same");
  StatusOr<Graph> g = ImportOnnxBytes(Serialize(m));
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(g->node(0).name == "same");
  BOOST_TEST(g->node(1).name == "same_1");
  BOOST_TEST(g->node(2).name == "Abs_2");
}

BOOST_AUTO_TEST_CASE(nodes_may_come_in_any_order) {
  onnx::ModelProto m = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (b) { a = Relu(x)  b = Neg(a) }
  )");
  m.mutable_graph()->mutable_node()->SwapElements(0, 1);
  StatusOr<Graph> g = ImportOnnxBytes(Serialize(m));
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST((*g->TopologicalOrder() == std::vector<NodeId>{1, 0}));
}

BOOST_AUTO_TEST_CASE(initializer_inputs_are_overridable_defaults) {
  StatusOr<Graph> g = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x, int64[2] shape = {-1, 2}) => (y) <float[4] bias = {1, 2, 3, 4}> {
      b = Add(x, bias)
      y = Reshape(b, shape)
    }
  )");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  const Value& shape = g->value(*g->FindValue("shape"));
  BOOST_TEST((shape.kind == ValueKind::kGraphInput));
  BOOST_TEST_REQUIRE(shape.data != nullptr);
  BOOST_TEST((*shape.data->ToInt64s() == std::vector<int64_t>{-1, 2}));
  BOOST_TEST(g->inputs().size() == 2u);
  const Value& bias = g->value(*g->FindValue("bias"));
  BOOST_TEST((bias.kind == ValueKind::kConstant));
  BOOST_TEST(TypeOf(*g, "bias") == "float32[4]");
  BOOST_TEST((bias.data->ToDoubles() == std::vector<double>{1, 2, 3, 4}));
}

BOOST_AUTO_TEST_CASE(constant_nodes_keep_their_tensor) {
  StatusOr<Graph> g = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2, 3] x) => (y) {
      s = Constant<value = int64[2] {3, 2}>()
      y = Reshape(x, s)
    }
  )");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  const Attribute* value = g->node(0).FindAttribute("value");
  BOOST_TEST_REQUIRE(value != nullptr);
  BOOST_TEST((value->type() == Attribute::Type::kTensor));
  BOOST_TEST((*value->tensor()->ToInt64s() == std::vector<int64_t>{3, 2}));
}

BOOST_AUTO_TEST_CASE(subgraphs_capture_outer_values_as_implicit_inputs) {
  StatusOr<Graph> g = ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (bool c, float[4] x, int64 n) => (y, z) {
      w = Neg(x)
      y = If (c) <
        then_branch = t () => (float[4] a) { a = Relu(w) },
        else_branch = e () => (float[4] b) { b = Abs(x) }>
      z = Loop (n, c, x) <body = body (int64 i, bool ci, float[4] v) => (bool co, float[4] vo) {
        co = Identity(ci)
        vo = If (ci) <
          then_branch = t2 () => (float[4] p) { p = Add(v, w) },
          else_branch = e2 () => (float[4] q) { q = Identity(v) }>
      }>
    }
  )");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  const Node& if_node = g->node(*g->FindNode("If_1"));
  std::vector<std::string> implicit;
  for (ValueId v : if_node.implicit_inputs) implicit.push_back(g->value(v).name);
  BOOST_TEST((implicit == std::vector<std::string>{"w", "x"}));
  const Graph& then_g = *if_node.FindAttribute("then_branch")->graph();
  BOOST_TEST((then_g.value(*then_g.FindValue("w")).kind == ValueKind::kCapture));
  BOOST_TEST(then_g.OpsetFor("") == 13);
  // The inner If reads w from two levels out: the Loop body captures it too.
  const Node& loop = g->node(*g->FindNode("Loop_2"));
  BOOST_TEST(loop.implicit_inputs.size() == 1u);
  BOOST_TEST(g->value(loop.implicit_inputs[0]).name == "w");
  const Graph& body = *loop.FindAttribute("body")->graph();
  BOOST_TEST((body.value(*body.FindValue("w")).kind == ValueKind::kCapture));
  BOOST_TEST((body.value(body.inputs()[2]).declared_dtype == DType::kF32));
  BOOST_TEST(g->Verify().ok());
}

// ---- Dim pins --------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(dim_pins_replace_symbols) {
  ImportOptions options;
  BOOST_TEST_REQUIRE(ParseDimPin("batch=4", &options).ok());
  StatusOr<Graph> g = ImportText(kRelu, options);
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(TypeOf(*g, "x") == "float32[4, ?0, 3]");
}

BOOST_AUTO_TEST_CASE(a_pin_matching_no_dim_param_is_an_error) {
  ImportOptions options;
  options.dim_pins["bach"] = 4;
  EXPECT_ERROR(ImportText(kRelu, options), StatusCode::kInvalidArgument,
               "dim pin 'bach' matches no dim_param in the model (it has: batch)");
}

BOOST_AUTO_TEST_CASE(parse_dim_pin_rejects_malformed_pins) {
  ImportOptions o;
  BOOST_TEST(ParseDimPin("seq=128", &o).ok());
  BOOST_TEST(o.dim_pins.at("seq") == 128);
  BOOST_TEST(ParseDimPin("seq=1", &o).message() == "dim pin 'seq=1': 'seq' is pinned twice");
  BOOST_TEST(ParseDimPin("batch", &o).message() == "dim pin 'batch' is not NAME=VALUE");
  BOOST_TEST(ParseDimPin("=3", &o).code() == StatusCode::kInvalidArgument);
  BOOST_TEST(ParseDimPin("batch=", &o).code() == StatusCode::kInvalidArgument);
  BOOST_TEST(ParseDimPin("batch=-1", &o).message() ==
             "dim pin 'batch=-1': '-1' is not a non-negative integer");
  BOOST_TEST(ParseDimPin("batch=x", &o).code() == StatusCode::kInvalidArgument);
}

// ---- Initializers in every dtype, raw and typed
// ---------------------------------------------------

struct InitCase {
  const char* name;
  int onnx_type;
  DType dtype;
  std::vector<int64_t> typed;  // the values as stored in the typed field (bits for f16/bf16)
  std::vector<double> expect;
};
std::ostream& operator<<(std::ostream& os, const InitCase& c) { return os << c.name; }

const InitCase kInitCases[] = {
    {"float", 1, DType::kF32, {}, {1.5, -2}},
    {"double", 11, DType::kF64, {}, {1.5, -2}},
    {"int64", 7, DType::kI64, {7, -9}, {7, -9}},
    {"int32", 6, DType::kI32, {7, -9}, {7, -9}},
    {"int16", 5, DType::kI16, {300, -9}, {300, -9}},
    {"int8", 3, DType::kI8, {-128, 127}, {-128, 127}},
    {"uint8", 2, DType::kU8, {255, 0}, {255, 0}},
    {"bool", 9, DType::kBool, {1, 0}, {1, 0}},
    {"float16", 10, DType::kF16, {0x3e00, 0xc000}, {1.5, -2}},
    {"bfloat16", 16, DType::kBF16, {0x3fc0, 0xc000}, {1.5, -2}},
    {"uint16", 4, DType::kU16, {65535, 1}, {65535, 1}},                // typed: int32_data
    {"uint32", 12, DType::kU32, {4294967295, 1}, {4294967295.0, 1}},  // typed: uint64_data
    {"uint64", 13, DType::kU64, {INT64_MIN, 1}, {0x1p63, 1}},         // 2^63 (as its bits)
};

// A model whose only output is the initializer "w" (two elements).
onnx::ModelProto InitializerModel(const InitCase& c, bool raw) {
  onnx::ModelProto m = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g () => (y) { y = Identity(w) }
  )");
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(c.onnx_type);
  t->add_dims(2);
  std::string bytes;
  auto put = [&bytes](const void* p, size_t n) { bytes.append(static_cast<const char*>(p), n); };
  for (size_t i = 0; i < 2; ++i) {
    switch (c.dtype) {
      case DType::kF32: {
        float f = static_cast<float>(c.expect[i]);
        put(&f, 4);
        t->add_float_data(f);
        break;
      }
      case DType::kF64: {
        double d = c.expect[i];
        put(&d, 8);
        t->add_double_data(d);
        break;
      }
      case DType::kI64: {
        int64_t v = c.typed[i];
        put(&v, 8);
        t->add_int64_data(v);
        break;
      }
      case DType::kI32: {
        int32_t v = static_cast<int32_t>(c.typed[i]);
        put(&v, 4);
        t->add_int32_data(v);
        break;
      }
      case DType::kU32: {
        uint32_t v = static_cast<uint32_t>(c.typed[i]);
        put(&v, 4);
        t->add_uint64_data(v);
        break;
      }
      case DType::kU64: {
        uint64_t v = static_cast<uint64_t>(c.typed[i]);
        put(&v, 8);
        t->add_uint64_data(v);
        break;
      }
      case DType::kI16:
      case DType::kU16:
      case DType::kF16:
      case DType::kBF16: {
        uint16_t v = static_cast<uint16_t>(c.typed[i]);
        put(&v, 2);
        t->add_int32_data(static_cast<int32_t>(c.typed[i]));
        break;
      }
      default: {
        uint8_t v = static_cast<uint8_t>(c.typed[i]);
        put(&v, 1);
        t->add_int32_data(static_cast<int32_t>(c.typed[i]));
      }
    }
  }
  if (raw) {
    t->clear_float_data();
    t->clear_double_data();
    t->clear_int32_data();
    t->clear_int64_data();
    t->clear_uint64_data();
    t->set_raw_data(bytes);
  }
  return m;
}

BOOST_DATA_TEST_CASE(imports_initializers_of_every_dtype,
                     data::make(kInitCases) * data::make({false, true}), c, raw) {
  StatusOr<Graph> g = ImportOnnxBytes(Serialize(InitializerModel(c, raw)));
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  const Value& w = g->value(*g->FindValue("w"));
  BOOST_TEST((w.dtype == c.dtype));
  BOOST_TEST(ShapeToString(*w.shape) == "[2]");
  BOOST_TEST(w.data->ToDoubles() == c.expect, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(typed_field_count_must_match_dims) {
  onnx::ModelProto m = InitializerModel(kInitCases[0], false);
  m.mutable_graph()->mutable_initializer(0)->add_float_data(3);
  EXPECT_ERROR(ImportOnnxBytes(Serialize(m)), StatusCode::kInvalidFormat,
               "initializer 'w': has 3 values in float_data, expected 2");
}

BOOST_AUTO_TEST_CASE(raw_data_size_must_match_dims) {
  onnx::ModelProto m = InitializerModel(kInitCases[0], true);
  m.mutable_graph()->mutable_initializer(0)->mutable_raw_data()->resize(6);
  EXPECT_ERROR(ImportOnnxBytes(Serialize(m)), StatusCode::kInvalidFormat,
               "initializer 'w': tensor of 2 float32 elements needs 8 bytes, has 6");
}

BOOST_AUTO_TEST_CASE(string_and_complex_initializers_are_unsupported) {
  for (auto [code, name] : {std::pair{8, "STRING"}, {14, "COMPLEX64"}, {17, "FLOAT8E4M3FN"}}) {
    onnx::ModelProto m = InitializerModel(kInitCases[0], true);
    m.mutable_graph()->mutable_initializer(0)->set_data_type(code);
    EXPECT_ERROR(
        ImportOnnxBytes(Serialize(m)), StatusCode::kUnsupported,
        std::string("initializer 'w': element type ") + name + " is not supported by kiln");
  }
}

BOOST_AUTO_TEST_CASE(an_initializer_contradicting_its_declared_input_is_an_error) {
  onnx::ModelProto m = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x, float[2] s = {1, 2}) => (y) { y = Add(x, s) }
  )");
  m.mutable_graph()->mutable_initializer(0)->set_data_type(onnx::TensorProto::DOUBLE);
  m.mutable_graph()->mutable_initializer(0)->clear_float_data();
  m.mutable_graph()->mutable_initializer(0)->add_double_data(1);
  m.mutable_graph()->mutable_initializer(0)->add_double_data(2);
  EXPECT_ERROR(ImportOnnxBytes(Serialize(m)), StatusCode::kInvalidFormat,
               "graph input 's' is declared float32 but its initializer is float64");
  m = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x, float[2] s = {1, 2}) => (y) { y = Add(x, s) }
  )");
  m.mutable_graph()
      ->mutable_input(1)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_value(3);
  EXPECT_ERROR(ImportOnnxBytes(Serialize(m)), StatusCode::kInvalidFormat,
               "graph input 's' is declared [3] but its initializer has shape [2]");
}

// ---- Unsupported ops: one error, all of them ---------------------------------------------------

BOOST_AUTO_TEST_CASE(lists_every_unsupported_op_with_its_nodes) {
  onnx::ModelProto m = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 13, "com.acme" : 1]>
    g (float[2, 3, 4] x, bool c) => (y) {
      a = RandomNormalLike(x)
      b = RandomNormalLike(x)
      f = com.acme.Frob(x)
      h = HardSwish(x)
      y = If (c) <then_branch = t () => (float[2] p) { p = RandomUniformLike(x) },
                  else_branch = e () => (float[2] q) { q = Relu(x) }>
    }
  )");
  m.mutable_graph()->mutable_node(0)->set_name("rand1");
  m.mutable_graph()->mutable_node(1)->set_name("rand2");
  StatusOr<Graph> g = ImportOnnxBytes(Serialize(m));
  BOOST_TEST(g.status().code() == StatusCode::kUnsupported);
  BOOST_TEST(g.status().message() ==
             "the model uses 4 unsupported op types: HardSwish needs opset >= 14 (the model "
             "imports 13) (node 'HardSwish_3'); RandomNormalLike is not supported (nodes 'rand1', "
             "'rand2'); RandomUniformLike is not supported (node 'RandomUniformLike_0'); "
             "com.acme.Frob is not supported (node 'Frob_2')");
}

BOOST_AUTO_TEST_CASE(rejects_opsets_outside_the_supported_range) {
  const std::string range = "; kiln supports 1 to " + std::to_string(kMaxOnnxOpset);
  for (int64_t opset : {int64_t{0}, kMaxOnnxOpset + 1}) {
    std::string text = R"(<ir_version: 8, opset_import: ["" : )" + std::to_string(opset) +
                       R"(]> g (float[2] x) => (y) { y = Relu(x) })";
    EXPECT_ERROR(ImportText(text), StatusCode::kUnsupported,
                 "the model imports ai.onnx opset " + std::to_string(opset) + range);
  }
  // A newer opset: the message says how to convert the model.
  std::string text = R"(<ir_version: 8, opset_import: ["" : 99]> g (float[2] x) => (y) { y = Relu(x) })";
  EXPECT_ERROR(ImportText(text), StatusCode::kUnsupported,
               range + " (convert the model with onnx.version_converter.convert_version(model, " +
                   std::to_string(kMaxOnnxOpset) + "))");
}

BOOST_AUTO_TEST_CASE(old_opsets_import_ops_whose_definition_kiln_implements) {
  // Relu-1 (consumed_inputs is a memory hint only) and Selu-1 import at opset 1.
  StatusOr<Graph> g = ImportText(R"(<ir_version: 3, opset_import: ["" : 1]>
    g (float[2] x) => (y, z) { y = Relu <consumed_inputs = [0]> (x)  z = Selu (x) })");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST(g->OpsetFor("") == 1);
  // Ops whose old definitions differ are reported as needing a newer opset: Add-1's legacy
  // broadcast, LpPool-1's float p, Sin (new in 7).
  EXPECT_ERROR(ImportText(R"(<ir_version: 3, opset_import: ["" : 1]>
    g (float[1, 1, 4] x, float[1] b) => (y, z, s) {
      y = Add <broadcast = 1> (x, b)  z = LpPool <kernel_shape = [2]> (x)  s = Sin (x) })"),
               StatusCode::kUnsupported,
               "the model uses 3 unsupported op types: Add needs opset >= 7 (the model imports 1) "
               "(node 'Add_0'); LpPool needs opset >= 2 (the model imports 1) (node 'LpPool_1'); "
               "Sin needs opset >= 7 (the model imports 1) (node 'Sin_2')");
}

// ---- Malformed input never crashes ------------------------------------------------------------

BOOST_AUTO_TEST_CASE(malformed_bytes_are_rejected) {
  EXPECT_ERROR(ImportOnnxBytes("this is not a protobuf at all \xff\xff\xff"),
               StatusCode::kInvalidFormat,
               "the model is not a valid protobuf message (malformed or truncated)");
  std::string bytes = ModelBytes(kRelu);
  EXPECT_ERROR(ImportOnnxBytes(bytes.substr(0, bytes.size() / 2)), StatusCode::kInvalidFormat,
               "not a valid protobuf message");
  EXPECT_ERROR(ImportOnnxBytes(""), StatusCode::kInvalidFormat, "the model has no graph");
}

// A length-delimited protobuf field: tag, varint length, payload.
std::string Wrap(int field, const std::string& payload) {
  std::string out(1, static_cast<char>((field << 3) | 2));
  size_t n = payload.size();
  do {
    uint8_t b = n & 0x7f;
    n >>= 7;
    out.push_back(static_cast<char>(b | (n ? 0x80 : 0)));
  } while (n);
  return out + payload;
}

BOOST_AUTO_TEST_CASE(deeply_nested_messages_are_rejected_not_overflowed) {
  // ModelProto.graph -> GraphProto.node -> NodeProto.attribute -> AttributeProto.g -> ...,
  // 9,000 messages deep: protobuf's recursion limit turns it into a parse error.
  std::string graph;
  for (int i = 0; i < 3000; ++i) graph = Wrap(1, Wrap(5, Wrap(6, graph)));
  EXPECT_ERROR(ImportOnnxBytes(Wrap(7, graph)), StatusCode::kInvalidFormat,
               "not a valid protobuf message");
}

BOOST_AUTO_TEST_CASE(random_corruption_never_crashes) {
  std::string good = ModelBytes(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[N, 4] x, int64[2] shape = {-1, 2}) => (y) <float[4] bias = {1, 2, 3, 4}> {
      b = Add(x, bias)
      y = Reshape(b, shape)
    }
  )");
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string bad = good;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) bad[rng() % bad.size()] = static_cast<char>(rng());
    if (rng() % 5 == 0) bad.resize(rng() % bad.size());
    StatusOr<Graph> g = ImportOnnxBytes(bad);
    rejected += !g.ok();
  }
  BOOST_TEST(rejected > 0);
}

// ---- Structural errors ------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(a_missing_initializer_names_the_node_and_input) {
  EXPECT_ERROR(
      ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (y) { y = Add(x, w) }
  )"),
      StatusCode::kInvalidFormat,
      "node 'Add_0' (Add): input 'w' is not defined: no graph input, initializer or node output "
      "has that name (a missing initializer?)");
}

BOOST_AUTO_TEST_CASE(a_cycle_names_its_nodes) {
  EXPECT_ERROR(ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (b) { a = Add(x, b)  b = Neg(a) }
  )"),
               StatusCode::kInvalidFormat,
               "cycle: node 'Add_0' (Add) -> node 'Neg_1' (Neg) -> node 'Add_0' (Add)");
}

BOOST_AUTO_TEST_CASE(a_value_produced_twice_is_an_error) {
  EXPECT_ERROR(ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (a) { a = Relu(x)  a = Neg(x) }
  )"),
               StatusCode::kInvalidFormat,
               "node 'Neg_1' (Neg): output 'a' is already an output of an earlier node");
  EXPECT_ERROR(ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (x2) { x = Relu(x)  x2 = Neg(x) }
  )"),
               StatusCode::kInvalidFormat,
               "node 'Relu_0' (Relu): output 'x' is already a graph input");
}

BOOST_AUTO_TEST_CASE(an_undefined_graph_output_is_an_error) {
  EXPECT_ERROR(ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[2] x) => (nope) { a = Relu(x) }
  )"),
               StatusCode::kInvalidFormat,
               "graph output 'nope' is not defined by any node, input or initializer");
}

BOOST_AUTO_TEST_CASE(graph_inputs_need_a_tensor_type_with_a_rank) {
  EXPECT_ERROR(ImportText(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[] x) => (y) { y = Relu(x) }
  )"),
               StatusCode::kUnsupported, "graph input 'x' has no shape (its rank is unknown)");
  onnx::ModelProto m = ParseModel(kRelu);
  onnx::TypeProto seq;
  *seq.mutable_sequence_type()->mutable_elem_type() = m.graph().input(0).type();
  *m.mutable_graph()->mutable_input(0)->mutable_type() = seq;
  EXPECT_ERROR(ImportOnnxBytes(Serialize(m)), StatusCode::kUnsupported,
               "graph input 'x' is not a tensor (sequence, map, optional or sparse types are not "
               "supported)");
}

// ---- External data ----------------------------------------------------------------------------

// A model whose initializer "w" (float[4]) lives in `location`.
onnx::ModelProto ExternalModel(const std::string& location, const std::string& offset = "0") {
  onnx::ModelProto m = ParseModel(R"(
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[4] x) => (y) { y = Add(x, w) }
  )");
  onnx::TensorProto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [t](const char* k, const std::string& v) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", location);
  add("offset", offset);
  add("length", "16");
  return m;
}

std::string FloatBytes(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

BOOST_AUTO_TEST_CASE(external_data_is_read_relative_to_the_model) {
  std::string dir = TempDir("ext_ok");
  WriteFile(dir + "/w.bin", std::string(8, 'x') + FloatBytes({1, 2, 3, 4}));
  WriteFile(dir + "/model.onnx", Serialize(ExternalModel("w.bin", "8")));
  StatusOr<Graph> g = ImportOnnxFile(dir + "/model.onnx");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST((g->value(*g->FindValue("w")).data->ToDoubles() == std::vector<double>{1, 2, 3, 4}));
  // The same model from bytes needs the directory.
  ImportOptions options;
  options.external_data_dir = dir;
  BOOST_TEST(ImportOnnxBytes(Serialize(ExternalModel("w.bin", "8")), options).ok());
  EXPECT_ERROR(ImportOnnxBytes(Serialize(ExternalModel("w.bin", "8"))),
               StatusCode::kInvalidArgument,
               "initializer 'w': uses external data file 'w.bin' but no model directory is known");
}

BOOST_AUTO_TEST_CASE(missing_external_data_names_the_tensor_and_file) {
  std::string dir = TempDir("ext_missing");
  WriteFile(dir + "/model.onnx", Serialize(ExternalModel("gone.bin")));
  EXPECT_ERROR(ImportOnnxFile(dir + "/model.onnx"), StatusCode::kNotFound,
               "initializer 'w': external data file 'gone.bin' does not exist in the model "
               "directory");
}

// A symlink inside the model directory that leads outside it is refused, and the error says
// nothing of the target (not its size, not whether it exists). One that stays inside is fine.
BOOST_AUTO_TEST_CASE(external_data_symlinks_may_not_leave_the_model_directory) {
  std::string outside = TempDir("ext_outside");
  WriteFile(outside + "/secret.bin", FloatBytes({9, 9, 9, 9, 9, 9}));
  std::string dir = TempDir("ext_symlink");
  WriteFile(dir + "/real.bin", FloatBytes({1, 2, 3, 4}));
  const std::vector<std::pair<std::string, std::string>> links = {
      {"to_outside.bin", outside + "/secret.bin"},
      {"to_passwd.bin", "/etc/passwd"},
      {"to_missing.bin", outside + "/missing.bin"},
      {"inside.bin", dir + "/real.bin"}};
  for (const auto& [name, target] : links) {
    ::unlink((dir + "/" + name).c_str());
    BOOST_REQUIRE(::symlink(target.c_str(), (dir + "/" + name).c_str()) == 0);
  }
  for (const char* name : {"to_outside.bin", "to_passwd.bin"}) {
    WriteFile(dir + "/model.onnx", Serialize(ExternalModel(name)));
    Status st = ImportOnnxFile(dir + "/model.onnx").status();
    BOOST_TEST((st.code() == StatusCode::kInvalidFormat), st.ToString());
    BOOST_TEST(st.message() == std::string("initializer 'w': external data location '") + name +
                                   "' leads outside the model directory (through a symbolic link)");
  }
  WriteFile(dir + "/model.onnx", Serialize(ExternalModel("to_missing.bin")));
  EXPECT_ERROR(ImportOnnxFile(dir + "/model.onnx"), StatusCode::kNotFound,
               "external data file 'to_missing.bin' does not exist in the model directory");
  WriteFile(dir + "/model.onnx", Serialize(ExternalModel("inside.bin")));
  StatusOr<Graph> g = ImportOnnxFile(dir + "/model.onnx");
  BOOST_TEST_REQUIRE(g.ok(), g.status().ToString());
  BOOST_TEST((g->value(*g->FindValue("w")).data->ToDoubles() == std::vector<double>{1, 2, 3, 4}));
}

// FIFOs as the model or its external data are refused at once instead of blocking on open.
BOOST_AUTO_TEST_CASE(fifos_are_refused_without_blocking) {
  std::string dir = TempDir("ext_fifo");
  ::unlink((dir + "/w.bin").c_str());
  BOOST_REQUIRE(::mkfifo((dir + "/w.bin").c_str(), 0600) == 0);
  WriteFile(dir + "/model.onnx", Serialize(ExternalModel("w.bin")));
  EXPECT_ERROR(ImportOnnxFile(dir + "/model.onnx"), StatusCode::kInvalidArgument,
               "w.bin' is not a regular file");
  ::unlink((dir + "/fifo.onnx").c_str());
  BOOST_REQUIRE(::mkfifo((dir + "/fifo.onnx").c_str(), 0600) == 0);
  EXPECT_ERROR(ImportOnnxFile(dir + "/fifo.onnx"), StatusCode::kInvalidArgument,
               "fifo.onnx' is not a regular file");
}

BOOST_AUTO_TEST_CASE(newer_ir_versions_and_graphs_without_outputs_are_refused) {
  onnx::ModelProto m = ParseModel(kRelu);
  m.set_ir_version(999);
  EXPECT_ERROR(ImportOnnxBytes(Serialize(m)), StatusCode::kUnsupported,
               "the model's ir_version is 999; kiln reads ONNX IR versions up to 10");
  m = ParseModel(kRelu);
  m.mutable_graph()->clear_output();
  EXPECT_ERROR(ImportOnnxBytes(Serialize(m)), StatusCode::kInvalidFormat,
               "has no outputs: there is nothing to compute");
}

// A compiled executable handed to the compiler says what it is and what to do with it.
BOOST_AUTO_TEST_CASE(a_kiln_executable_is_recognised) {
  std::string bytes = std::string("\x40\x00\x00\x00\x10\x00\x00\x00KILN", 12) +
                      std::string(64, '\0');
  EXPECT_ERROR(ImportOnnxBytes(bytes), StatusCode::kInvalidFormat,
               "this is a compiled .kiln executable, not an ONNX model: run it with `kiln run`");
}

BOOST_AUTO_TEST_CASE(short_external_data_names_the_tensor_and_file) {
  std::string dir = TempDir("ext_short");
  WriteFile(dir + "/w.bin", FloatBytes({1, 2}));
  WriteFile(dir + "/model.onnx", Serialize(ExternalModel("w.bin")));
  EXPECT_ERROR(
      ImportOnnxFile(dir + "/model.onnx"), StatusCode::kInvalidFormat,
      "initializer 'w': external data file 'w.bin' has 8 bytes, the tensor needs bytes [0, 16)");
}

BOOST_AUTO_TEST_CASE(external_data_may_not_leave_the_model_directory) {
  std::string dir = TempDir("ext_escape");
  for (const char* location : {"../w.bin", "/etc/passwd", "a/../../w.bin"}) {
    WriteFile(dir + "/model.onnx", Serialize(ExternalModel(location)));
    EXPECT_ERROR(ImportOnnxFile(dir + "/model.onnx"), StatusCode::kInvalidFormat,
                 std::string("initializer 'w': external data location '") + location +
                     "' is not inside the model directory");
  }
}

BOOST_AUTO_TEST_CASE(a_missing_model_file_is_not_found) {
  EXPECT_ERROR(ImportOnnxFile("/nonexistent/model.onnx"), StatusCode::kNotFound,
               "model file: cannot open '/nonexistent/model.onnx': No such file or directory");
}

// ---- Tensor files ------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(imports_serialized_tensors) {
  onnx::TensorProto t;
  t.set_name("in");
  t.set_data_type(onnx::TensorProto::INT32);
  t.add_dims(3);
  for (int v : {4, 5, 6}) t.add_int32_data(v);
  StatusOr<TensorDataRef> d = ImportOnnxTensorBytes(t.SerializeAsString());
  BOOST_TEST_REQUIRE(d.ok(), d.status().ToString());
  BOOST_TEST((*(*d)->ToInt64s() == std::vector<int64_t>{4, 5, 6}));
  EXPECT_ERROR(ImportOnnxTensorBytes("\xff\xff"), StatusCode::kInvalidFormat,
               "the tensor is not a valid protobuf");
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  EXPECT_ERROR(ImportOnnxTensorBytes(t.SerializeAsString()), StatusCode::kInvalidArgument,
               "tensor 'in': external data is not allowed here");
}

}  // namespace
}  // namespace kiln::compiler
