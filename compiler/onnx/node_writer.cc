// Writing ONNX nodes from code (see node_writer.h).
#include "compiler/onnx/node_writer.h"

namespace kiln::compiler::onnx_internal {

using onnx::AttributeProto;
using onnx::NodeProto;
using onnx::TensorProto;

AttributeProto IntAttr(const std::string& name, int64_t v) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::INT);
  a.set_i(v);
  return a;
}

AttributeProto IntsAttr(const std::string& name, const std::vector<int64_t>& v) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
  return a;
}

AttributeProto FloatAttr(const std::string& name, float v) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::FLOAT);
  a.set_f(v);
  return a;
}

AttributeProto TensorAttr(const std::string& name, TensorProto t) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::TENSOR);
  *a.mutable_t() = std::move(t);
  return a;
}

AttributeProto GraphAttr(const std::string& name, onnx::GraphProto g) {
  AttributeProto a;
  a.set_name(name);
  a.set_type(AttributeProto::GRAPH);
  *a.mutable_g() = std::move(g);
  return a;
}

NodeWriter::NodeWriter(std::string prefix, int64_t opset, int elem_type, std::string like)
    : NodeWriter(std::move(prefix), std::make_shared<int>(0), opset, elem_type, std::move(like)) {}

NodeWriter::NodeWriter(std::string prefix, std::shared_ptr<int> counter, int64_t opset,
                       int elem_type, std::string like)
    : prefix_(std::move(prefix)),
      counter_(std::move(counter)),
      opset_(opset),
      elem_type_(elem_type),
      like_(std::move(like)) {}

NodeWriter NodeWriter::Sub() const { return NodeWriter(prefix_, counter_, opset_, elem_type_, like_); }

std::string NodeWriter::Fresh(const std::string& what) {
  return prefix_ + what + "_" + std::to_string((*counter_)++);
}

std::vector<std::string> NodeWriter::OpN(const std::string& op, const std::vector<std::string>& ins,
                                         int outs, std::vector<AttributeProto> attrs) {
  NodeProto* n = &nodes_.emplace_back();
  n->set_op_type(op);
  n->set_name(Fresh(op));
  for (const std::string& in : ins) n->add_input(in);
  std::vector<std::string> names;
  for (int i = 0; i < outs; ++i) {
    names.push_back(Fresh(op + "_out"));
    n->add_output(names.back());
  }
  for (AttributeProto& a : attrs) *n->add_attribute() = std::move(a);
  return names;
}

std::string NodeWriter::Op(const std::string& op, const std::vector<std::string>& ins,
                           std::vector<AttributeProto> attrs) {
  return OpN(op, ins, 1, std::move(attrs))[0];
}

void NodeWriter::Rename(const std::string& x, const std::string& out) {
  NodeProto* n = &nodes_.emplace_back();
  n->set_op_type("Identity");
  n->set_name(Fresh("Identity"));
  n->add_input(x);
  n->add_output(out);
}

std::string NodeWriter::I64(const std::vector<int64_t>& values, const std::vector<int64_t>& dims) {
  TensorProto t;
  t.set_data_type(TensorProto::INT64);
  for (int64_t d : dims) t.add_dims(d);
  for (int64_t v : values) t.add_int64_data(v);
  return Op("Constant", {}, {TensorAttr("value", std::move(t))});
}

std::string NodeWriter::Scalar(float v) {
  TensorProto t;
  t.set_data_type(TensorProto::FLOAT);
  t.add_float_data(v);
  return Typed(Op("Constant", {}, {TensorAttr("value", std::move(t))}));
}

std::string NodeWriter::Typed(const std::string& f) {
  if (elem_type_ == TensorProto::FLOAT) return f;
  if (elem_type_ != 0) return Op("Cast", {f}, {IntAttr("to", elem_type_)});
  return Op("CastLike", {f, like_});
}

int DeclaredType(const onnx::GraphProto& g, const std::string& name) {
  auto find = [&](const auto& infos) {
    for (const onnx::ValueInfoProto& vi : infos)
      if (vi.name() == name && vi.type().has_tensor_type()) return vi.type().tensor_type().elem_type();
    return 0;
  };
  if (int t = find(g.input())) return t;
  if (int t = find(g.value_info())) return t;
  for (const TensorProto& t : g.initializer())
    if (t.name() == name) return t.data_type();
  return 0;
}

int DeclaredRank(const onnx::GraphProto& g, const std::string& name) {
  for (const TensorProto& t : g.initializer())
    if (t.name() == name) return t.dims_size();
  for (const auto* infos : {&g.input(), &g.value_info()}) {
    for (const onnx::ValueInfoProto& vi : *infos) {
      if (vi.name() == name && vi.type().has_tensor_type() && vi.type().tensor_type().has_shape())
        return vi.type().tensor_type().shape().dim_size();
    }
  }
  for (const NodeProto& n : g.node()) {
    if (n.op_type() == "Constant" && n.output_size() == 1 && n.output(0) == name) {
      for (const AttributeProto& a : n.attribute())
        if (a.name() == "value" && a.has_t()) return a.t().dims_size();
    }
  }
  return -1;
}

Status ExpandMatching(onnx::GraphProto* graph, const std::function<bool(const NodeProto&)>& match,
                      const ExpandNode& expand) {
  bool any = false;
  for (NodeProto& n : *graph->mutable_node()) {
    for (AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_g()) RETURN_IF_ERROR(ExpandMatching(a.mutable_g(), match, expand));
      for (onnx::GraphProto& g : *a.mutable_graphs())
        RETURN_IF_ERROR(ExpandMatching(&g, match, expand));
    }
    any = any || match(n);
  }
  if (!any) return Status::Ok();
  // Nodes are moved back one by one so that `expand` sees the nodes before its node as rewritten.
  google::protobuf::RepeatedPtrField<NodeProto> nodes;
  nodes.Swap(graph->mutable_node());
  for (int i = 0; i < nodes.size(); ++i) {
    NodeProto& n = nodes[i];
    if (!match(n)) {
      *graph->add_node() = std::move(n);
      continue;
    }
    std::string name = n.name().empty() ? n.op_type() + "_" + std::to_string(i) : n.name();
    ASSIGN_OR_RETURN(std::vector<NodeProto> replacement, expand(n, name, *graph));
    for (NodeProto& e : replacement) *graph->add_node() = std::move(e);
  }
  return Status::Ok();
}

}  // namespace kiln::compiler::onnx_internal
