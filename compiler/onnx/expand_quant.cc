// MatMulInteger / ConvInteger / QLinearMatMul / QLinearConv -> exact integer-valued products and
// QuantizeLinear (see expand_quant.h).
#include "compiler/onnx/expand_quant.h"

#include <string>
#include <vector>

#include "compiler/onnx/node_writer.h"

namespace kiln::compiler {
namespace {

using onnx::NodeProto;
using onnx::TensorProto;
using onnx_internal::IntAttr;
using onnx_internal::NodeWriter;

std::string In(const NodeProto& n, int i) { return i < n.input_size() ? n.input(i) : ""; }

bool IsQuantized(const NodeProto& n) {
  if (!n.domain().empty() && n.domain() != "ai.onnx") return false;
  const std::string& op = n.op_type();
  return op == "MatMulInteger" || op == "ConvInteger" || op == "QLinearMatMul" ||
         op == "QLinearConv";
}

// `v` - `zero` in `type` (zero may be absent); `zero` of shape [M] is laid out by `layout`.
std::string Shifted(NodeWriter& w, const std::string& v, const std::string& zero, int type,
                    const std::vector<int64_t>& layout) {
  std::string x = w.Op("Cast", {v}, {IntAttr("to", type)});
  if (zero.empty()) return x;
  std::string z = w.Op("Cast", {zero}, {IntAttr("to", type)});
  if (!layout.empty()) z = w.Op("Reshape", {z, w.I64(layout, {static_cast<int64_t>(layout.size())})});
  return w.Op("Sub", {x, z});
}

// A per-row parameter of A ([M]) applies along rows: [M, 1]. Scalars and [1] stay as they are
// (broadcasting handles them); Reshape of a 1-element tensor to [-1, 1] is harmless too.
const std::vector<int64_t> kRows = {-1, 1};

// A per-output-channel parameter [M] laid out along axis 0 of a weight of rank `rank`
// ([M, 1, ..., 1]), or, `ones` = rank - 2, along axis 1 of the output (broadcast from the right).
std::vector<int64_t> ChannelLayout(int ones) {
  std::vector<int64_t> l = {-1};
  for (int i = 0; i < ones; ++i) l.push_back(1);
  return l;
}

// QuantizeLinear(acc * (a_scale * b_scale / y_scale), 1, y_zero_point), acc in float.
void Requantize(NodeWriter& w, const std::string& acc, const std::string& a_scale,
                const std::string& b_scale, const std::vector<int64_t>& b_layout,
                const std::string& y_scale, const std::string& y_zero, const std::string& out) {
  std::string bs = b_scale;
  if (!b_layout.empty()) bs = w.Op("Reshape", {bs, w.I64(b_layout, {int64_t(b_layout.size())})});
  std::string as = w.Op("Reshape", {a_scale, w.I64(kRows, {2})});
  std::string mult = w.Op("Div", {w.Op("Mul", {as, bs}), y_scale});
  std::string y = w.Op("Mul", {w.Op("Cast", {acc}, {IntAttr("to", TensorProto::FLOAT)}), mult});
  std::vector<std::string> ins = {y, w.Scalar(1)};
  if (!y_zero.empty()) ins.push_back(y_zero);
  NodeProto& q = w.nodes().emplace_back();
  q.set_op_type("QuantizeLinear");
  q.set_name(w.Fresh("QuantizeLinear"));
  for (const std::string& in : ins) q.add_input(in);
  q.add_output(out);
}

// The conv attributes of `n`, for the Conv that replaces it.
std::vector<onnx::AttributeProto> ConvAttributes(const NodeProto& n) {
  return {n.attribute().begin(), n.attribute().end()};
}

Status Expand(NodeWriter& w, const NodeProto& n, const onnx::GraphProto& g,
              const std::string& label) {
  const std::string& op = n.op_type();
  const std::string out = n.output_size() > 0 ? n.output(0) : "";
  if (out.empty()) return Status::Ok();
  if (op == "MatMulInteger") {
    std::string a = Shifted(w, In(n, 0), In(n, 2), TensorProto::INT32, kRows);
    std::string b = Shifted(w, In(n, 1), In(n, 3), TensorProto::INT32, {});
    w.Rename(w.Op("MatMul", {a, b}), out);
    return Status::Ok();
  }
  if (op == "QLinearMatMul") {
    // a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
    std::string a = Shifted(w, In(n, 0), In(n, 2), TensorProto::INT32, kRows);
    std::string b = Shifted(w, In(n, 3), In(n, 5), TensorProto::INT32, {});
    Requantize(w, w.Op("MatMul", {a, b}), In(n, 1), In(n, 4), {}, In(n, 6), In(n, 7), out);
    return Status::Ok();
  }
  // ConvInteger(x, w, x_zp, w_zp); QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale,
  // y_zp, B).
  bool qlinear = op == "QLinearConv";
  std::string weight = In(n, qlinear ? 3 : 1), w_zero = In(n, qlinear ? 5 : 3);
  int rank = onnx_internal::DeclaredRank(g, weight);
  std::vector<int64_t> weight_layout, out_layout;
  if (!w_zero.empty() || qlinear) {
    if (rank < 3) {
      return Unsupported(label + ": the rank of weight '" + weight +
                         "' must be known (an initializer or a declared shape)");
    }
    weight_layout = ChannelLayout(rank - 1);
    out_layout = ChannelLayout(rank - 2);
  }
  std::string x = Shifted(w, In(n, 0), In(n, 2), TensorProto::DOUBLE, {});
  std::string k = Shifted(w, weight, w_zero, TensorProto::DOUBLE, weight_layout);
  std::vector<std::string> ins = {x, k};
  if (qlinear && !In(n, 8).empty()) {
    ins.push_back(w.Op("Cast", {In(n, 8)}, {IntAttr("to", TensorProto::DOUBLE)}));
  }
  std::string acc = w.Op("Conv", ins, ConvAttributes(n));
  if (!qlinear) {
    w.Rename(w.Op("Cast", {acc}, {IntAttr("to", TensorProto::INT32)}), out);
    return Status::Ok();
  }
  // The x scale is per tensor: Requantize's row layout of it is a no-op on one element.
  Requantize(w, acc, In(n, 1), In(n, 4), out_layout, In(n, 6), In(n, 7), out);
  return Status::Ok();
}

}  // namespace

Status ExpandQuantizedOps(onnx::GraphProto* graph, int64_t opset) {
  if (opset < 10) return Status::Ok();
  return onnx_internal::ExpandMatching(
      graph, IsQuantized,
      [opset](const NodeProto& n, const std::string& name,
              const onnx::GraphProto& g) -> StatusOr<std::vector<NodeProto>> {
        NodeWriter w(name + "/q/", opset, TensorProto::FLOAT, "");
        RETURN_IF_ERROR(Expand(w, n, g, n.op_type() + " node '" + name + "'"));
        return std::move(w.nodes());
      });
}

}  // namespace kiln::compiler
