// NodeContext / LowerContext / ShapeFuncContext, the lowering table and LowerNode.
#include "compiler/lower/lower.h"

#include <cstdio>
#include <cstdlib>

#include "jit/compute.h"

namespace kiln::compiler {
namespace {

std::string Sanitize(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) c = '_';
  }
  return out;
}

jit::Expr DimExprOrDimOf(const DimExpr& d, const jit::Buffer& b, int axis) {
  if (d.is_const()) return jit::IntImm(d.const_value());
  return jit::DimOf(b, axis);
}

}  // namespace

// ---- NodeContext ----------------------------------------------------------------------------

NodeContext::NodeContext(const Graph& graph, NodeId node, int64_t opset)
    : NodeContextBase(graph, node, opset) {
  const Node& n = graph.node(node);
  for (int i = 0; i < static_cast<int>(n.inputs.size()); ++i) {
    if (n.inputs[i] == kNoValue) continue;
    const Value& v = graph.value(n.inputs[i]);
    int rank = v.shape ? static_cast<int>(v.shape->size()) : 0;
    in_[i] = jit::Buffer::Param("in" + std::to_string(i), v.dtype, rank);
  }
}

std::string NodeContext::KernelName() const {
  return Sanitize(node().op_type) + "_" + Sanitize(node().name);
}

std::optional<std::vector<int64_t>> NodeContext::InputConstInts(int i) const {
  if (!has_input(i)) return std::nullopt;
  const Value& v = input(i);
  if (v.symbolic_value) {
    std::vector<int64_t> out;
    for (const DimExpr& e : *v.symbolic_value) {
      if (!e.is_const()) return std::nullopt;
      out.push_back(e.const_value());
    }
    return out;
  }
  const TensorData* d = input_data(i);
  if (!d || d->dims().size() > 1) return std::nullopt;
  StatusOr<std::vector<int64_t>> ints = d->ToInt64s();
  if (!ints.ok()) return std::nullopt;
  return *ints;
}

std::optional<std::vector<double>> NodeContext::InputConstDoubles(int i) const {
  const TensorData* d = input_data(i);
  if (d && d->dims().size() <= 1) return d->ToDoubles();
  std::optional<std::vector<int64_t>> ints = InputConstInts(i);
  if (!ints) return std::nullopt;
  return std::vector<double>(ints->begin(), ints->end());
}

jit::Buffer NodeContext::in(int i) const { return in_.at(i); }

jit::Expr NodeContext::InputDim(int i, int axis) const {
  return DimExprOrDimOf(input_shape(i)[axis], in(i), axis);
}

std::vector<jit::Expr> NodeContext::InputDims(int i) const {
  std::vector<jit::Expr> out;
  for (int a = 0; a < input_rank(i); ++a) out.push_back(InputDim(i, a));
  return out;
}

std::vector<jit::Buffer> NodeContext::InputBuffers() const {
  std::vector<jit::Buffer> out;
  for (const auto& [slot, b] : in_) out.push_back(b);
  return out;
}

// ---- LowerContext ---------------------------------------------------------------------------

LowerContext::LowerContext(const Graph& graph, NodeId node, int64_t opset)
    : NodeContext(graph, node, opset) {
  const Node& n = graph.node(node);
  for (int i = 0; i < static_cast<int>(n.outputs.size()); ++i) {
    if (n.outputs[i] == kNoValue) continue;
    const Value& v = graph.value(n.outputs[i]);
    int rank = v.shape ? static_cast<int>(v.shape->size()) : 0;
    out_[i] = jit::Buffer::Param("out" + std::to_string(i), v.dtype, rank);
  }
}

jit::Buffer LowerContext::out(int i) const { return out_.at(i); }

jit::Expr LowerContext::OutputDim(int i, int axis) const {
  return DimExprOrDimOf(output_shape(i)[axis], out(i), axis);
}

std::vector<jit::Expr> LowerContext::OutputDims(int i) const {
  std::vector<jit::Expr> out;
  for (int a = 0; a < output_rank(i); ++a) out.push_back(OutputDim(i, a));
  return out;
}

void LowerContext::SetCompute(int output,
                              const std::function<jit::Expr(const std::vector<jit::Expr>&)>& f) {
  SetBody(jit::ComputeInto(out(output), f));
}

std::vector<jit::Buffer> LowerContext::OutputBuffers() const {
  std::vector<jit::Buffer> out;
  for (const auto& [slot, b] : out_) out.push_back(b);
  return out;
}

jit::Kernel LowerContext::MakeKernel() const {
  jit::Kernel k;
  k.name = KernelName();
  k.buffers = InputBuffers();
  for (const jit::Buffer& b : OutputBuffers()) k.buffers.push_back(b);
  k.body = body_;
  return k;
}

// ---- ShapeFuncContext -----------------------------------------------------------------------

ShapeFuncContext::ShapeFuncContext(const Graph& graph, NodeId node, int64_t opset)
    : NodeContext(graph, node, opset) {
  const Node& n = graph.node(node);
  for (int i = 0; i < static_cast<int>(n.outputs.size()); ++i) {
    if (n.outputs[i] == kNoValue) continue;
    const Value& v = graph.value(n.outputs[i]);
    int rank = v.shape ? static_cast<int>(v.shape->size()) : 0;
    // A rank-0 output still gets an i64[0] buffer (nothing to store).
    out_[i] = jit::Buffer::Param("out" + std::to_string(i) + "_shape", DType::kI64, 1);
    (void)rank;
  }
}

jit::Buffer ShapeFuncContext::out_shape(int i) const { return out_.at(i); }

std::vector<jit::Buffer> ShapeFuncContext::OutputBuffers() const {
  std::vector<jit::Buffer> out;
  for (const auto& [slot, b] : out_) out.push_back(b);
  return out;
}

jit::Kernel ShapeFuncContext::MakeKernel() const {
  jit::Kernel k;
  k.name = KernelName() + "_shape";
  k.buffers = InputBuffers();
  for (const jit::Buffer& b : OutputBuffers()) k.buffers.push_back(b);
  k.body = body_;
  return k;
}

// ---- LoweringTable --------------------------------------------------------------------------

Status LoweringTable::Add(Lowering l) {
  if (l.lower == nullptr) return InvalidArgument("lowering of " + l.op_type + " has no lower");
  if (l.since_version > l.until_version) {
    return InvalidArgument("lowering of " + l.op_type + " has an empty opset range");
  }
  std::vector<Lowering>& v = table_[l.op_type];
  for (const Lowering& o : v) {
    if (l.since_version <= o.until_version && o.since_version <= l.until_version) {
      return InvalidArgument("lowering of " + l.op_type + " opsets " +
                             std::to_string(l.since_version) + ".." +
                             std::to_string(l.until_version) + " overlaps an existing one");
    }
  }
  v.push_back(std::move(l));
  return Status::Ok();
}

void LoweringTable::MustAdd(Lowering l) {
  Status s = Add(std::move(l));
  if (!s.ok()) {
    std::fprintf(stderr, "kiln: bad lowering table: %s\n", s.message().c_str());
    std::abort();
  }
}

const Lowering* LoweringTable::Find(std::string_view op_type, int64_t opset) const {
  auto it = table_.find(op_type);
  if (it == table_.end()) return nullptr;
  for (const Lowering& l : it->second) {
    if (opset >= l.since_version && opset <= l.until_version) return &l;
  }
  return nullptr;
}

std::vector<std::string> LoweringTable::OpTypes() const {
  std::vector<std::string> out;
  for (const auto& [op, v] : table_) out.push_back(op);
  return out;
}

// ---- LowerNode ------------------------------------------------------------------------------

StatusOr<LoweredNode> LowerNode(const Graph& graph, NodeId node, bool need_shape_function,
                                const LoweringTable& table) {
  const Node& n = graph.node(node);
  // kiln's own ops (domain "kiln", made by compiler passes) share the table: their names are
  // not ONNX op types, and shape inference only accepts them in their domain.
  const bool kiln_op = n.domain == kKilnDomain;
  if (!n.domain.empty() && n.domain != "ai.onnx" && !kiln_op) {
    return Unsupported(graph.DescribeNode(node) + ": domain '" + n.domain +
                       "' has no lowering");
  }
  const int64_t opset = graph.OpsetFor(kiln_op ? kKilnDomain : "");
  const Lowering* l = table.Find(n.op_type, opset);
  if (l == nullptr) {
    return Unsupported(graph.DescribeNode(node) + ": no lowering for " + n.op_type +
                       " at opset " + std::to_string(opset));
  }
  for (ValueId v : n.inputs) {
    if (v != kNoValue && !graph.value(v).shape) {
      return Internal(graph.DescribeNode(node) + ": input '" + graph.value(v).name +
                      "' has no inferred shape (run shape inference first)");
    }
  }
  LoweredNode result;
  LowerContext ctx(graph, node, opset);
  RETURN_IF_ERROR(l->lower(ctx));
  if (ctx.view_of() >= 0) {
    result.view_of = ctx.view_of();
  } else {
    if (!ctx.body()) {
      return Internal(graph.DescribeNode(node) + ": the lowering produced no kernel body");
    }
    jit::Kernel k = ctx.MakeKernel();
    Status valid = jit::ValidateKernel(k);
    if (!valid.ok()) {
      return Internal(graph.DescribeNode(node) + ": lowering produced an invalid kernel: " +
                      valid.message());
    }
    result.kernel = std::move(k);
    result.element_fn = ctx.element_fn();
    result.element_slots = ctx.element_slots();
  }
  if (need_shape_function) {
    if (l->shape_function == nullptr) {
      return Unsupported(graph.DescribeNode(node) +
                         ": output shape is only known at run time and " + n.op_type +
                         " has no run-time shape function");
    }
    ShapeFuncContext sctx(graph, node, opset);
    RETURN_IF_ERROR(l->shape_function(sctx));
    if (!sctx.body()) {
      return Internal(graph.DescribeNode(node) + ": the shape function has no body");
    }
    jit::Kernel k = sctx.MakeKernel();
    Status valid = jit::ValidateKernel(k);
    if (!valid.ok()) {
      return Internal(graph.DescribeNode(node) + ": invalid shape function: " + valid.message());
    }
    result.shape_function = std::move(k);
  }
  return result;
}

}  // namespace kiln::compiler
