// Writes quickstart.onnx (opset 17, symbolic dims batch and seq) with the ONNX protobuf API.
// Usage: make_model OUT.onnx   (the build runs it; see BUILD)
#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "examples/quickstart/model_def.h"

namespace {

using namespace quickstart;

void AddInitializer(onnx::GraphProto* g, const std::string& name, const std::vector<int64_t>& dims,
                    const std::vector<float>& values) {
  onnx::TensorProto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(values.data(), values.size() * sizeof(float));  // little-endian, as ONNX says
}

void AddScalar(onnx::GraphProto* g, const std::string& name, float value) {
  AddInitializer(g, name, {}, {value});
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op,
                         const std::vector<std::string>& inputs, const std::string& output) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(output);  // node names show up in kiln's error messages and profiles
  for (const std::string& i : inputs) n->add_input(i);
  n->add_output(output);
  return n;
}

void SetInt(onnx::NodeProto* n, const std::string& name, int64_t v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void SetFloat(onnx::NodeProto* n, const std::string& name, float v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void SetInts(onnx::NodeProto* n, const std::string& name, const std::vector<int64_t>& v) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}

// A graph input or output: dims are symbols (std::string) or sizes.
void DeclareValue(onnx::ValueInfoProto* v, const std::string& name, int elem_type,
                  const std::vector<std::string>& symbols, const std::vector<int64_t>& sizes) {
  v->set_name(name);
  onnx::TypeProto_Tensor* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  onnx::TensorShapeProto* shape = t->mutable_shape();
  for (const std::string& s : symbols) shape->add_dim()->set_dim_param(s);
  for (int64_t d : sizes) shape->add_dim()->set_dim_value(d);
}

onnx::ModelProto BuildModel() {
  Weights w = MakeWeights();
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("kiln examples/quickstart/make_model");
  model.set_producer_version("1");
  onnx::OperatorSetIdProto* opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);

  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("quickstart_classifier");
  DeclareValue(g->add_input(), "input_ids", onnx::TensorProto::INT64, {"batch", "seq"}, {});
  DeclareValue(g->add_output(), "probabilities", onnx::TensorProto::FLOAT, {"batch"}, {kClasses});

  AddInitializer(g, "embedding", {kVocab, kHidden}, w.embedding);
  AddInitializer(g, "ln_gamma", {kHidden}, w.ln_gamma);
  AddInitializer(g, "ln_beta", {kHidden}, w.ln_beta);
  AddInitializer(g, "w1", {kHidden, kFfn}, w.w1);
  AddInitializer(g, "b1", {kFfn}, w.b1);
  AddInitializer(g, "w2", {kFfn, kHidden}, w.w2);
  AddInitializer(g, "b2", {kHidden}, w.b2);
  AddInitializer(g, "wc", {kHidden, kClasses}, w.wc);
  AddInitializer(g, "bc", {kClasses}, w.bc);
  AddScalar(g, "sqrt2", std::sqrt(2.0f));
  AddScalar(g, "one", 1.0f);
  AddScalar(g, "half", 0.5f);

  AddNode(g, "Gather", {"embedding", "input_ids"}, "embedded");  // [batch, seq, 64]
  onnx::NodeProto* ln = AddNode(g, "LayerNormalization", {"embedded", "ln_gamma", "ln_beta"}, "ln");
  SetInt(ln, "axis", -1);
  SetFloat(ln, "epsilon", kLayerNormEpsilon);
  AddNode(g, "MatMul", {"ln", "w1"}, "ffn1_mm");  // [batch, seq, 128]
  AddNode(g, "Add", {"ffn1_mm", "b1"}, "ffn1");
  // Gelu, exact (erf) form as exporters write it: x * 0.5 * (1 + erf(x / sqrt(2))).
  AddNode(g, "Div", {"ffn1", "sqrt2"}, "gelu_div");
  AddNode(g, "Erf", {"gelu_div"}, "gelu_erf");
  AddNode(g, "Add", {"gelu_erf", "one"}, "gelu_add");
  AddNode(g, "Mul", {"ffn1", "gelu_add"}, "gelu_mul");
  AddNode(g, "Mul", {"gelu_mul", "half"}, "gelu");
  AddNode(g, "MatMul", {"gelu", "w2"}, "ffn2_mm");  // [batch, seq, 64]
  AddNode(g, "Add", {"ffn2_mm", "b2"}, "ffn2");
  AddNode(g, "Add", {"ln", "ffn2"}, "residual");
  onnx::NodeProto* mean = AddNode(g, "ReduceMean", {"residual"}, "pooled");  // [batch, 64]
  SetInts(mean, "axes", {1});  // an attribute up to opset 17
  SetInt(mean, "keepdims", 0);
  AddNode(g, "Gemm", {"pooled", "wc", "bc"}, "logits");  // [batch, 4]
  onnx::NodeProto* softmax = AddNode(g, "Softmax", {"logits"}, "probabilities");
  SetInt(softmax, "axis", -1);
  return model;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_model OUT.onnx\n");
    return 2;
  }
  std::string bytes;
  if (!BuildModel().SerializeToString(&bytes)) {
    std::fprintf(stderr, "make_model: cannot serialize the model\n");
    return 1;
  }
  std::ofstream out(argv[1], std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "make_model: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
