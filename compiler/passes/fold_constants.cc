// Constant folding: the fold hook shape inference calls after each node (fold_constants.h).
#include "compiler/passes/fold_constants.h"

#include <set>
#include <string>

namespace kiln::compiler {
namespace {

bool IsConstant(const Value& v) { return v.data != nullptr && v.kind != ValueKind::kGraphInput; }

// The int64 value of a one-output node that shape inference knows exactly: the dims it picks
// are constants though its input's other dims are not (Gather(Shape(x[seq, batch, 768]), -1)
// is 768). nullptr otherwise.
TensorDataRef KnownValue(const Graph& g, const Node& node) {
  if (node.outputs.size() != 1 || node.outputs[0] == kNoValue) return nullptr;
  const Value& v = g.value(node.outputs[0]);
  if (v.data || v.dtype != DType::kI64 || !v.symbolic_value || !v.shape || v.shape->size() > 1)
    return nullptr;
  std::vector<int64_t> dims, values;
  for (const DimExpr& d : *v.shape) {
    if (!d.is_const()) return nullptr;
    dims.push_back(d.const_value());
  }
  for (const DimExpr& e : *v.symbolic_value) {
    if (!e.is_const()) return nullptr;
    values.push_back(e.const_value());
  }
  int64_t n = dims.empty() ? 1 : dims[0];
  if (static_cast<int64_t>(values.size()) != n) return nullptr;
  return TensorData::FromInt64s(dims, values);
}

// Whether the node's kernel only copies, selects or compares elements, whatever the dtype:
// no floating-point arithmetic (ScatterND / ScatterElements only without a reduction).
bool MovesDataOnly(const Node& node) {
  static const std::set<std::string, std::less<>> kOps = {
      "And",       "Concat",         "ConstantOfShape", "Equal",     "Expand",
      "Flatten",   "Gather",         "GatherElements",  "GatherND",  "Greater",
      "GreaterOrEqual", "Identity",  "Less",            "LessOrEqual", "Not",
      "Or",        "Pad",            "Reshape",         "Shape",     "Size",
      "Slice",     "Split",          "Squeeze",         "Tile",      "Transpose",
      "Unsqueeze", "Where",          "Xor"};
  if (kOps.count(node.op_type) > 0) return true;
  if (node.op_type != "ScatterND" && node.op_type != "ScatterElements") return false;
  const Attribute* reduction = node.FindAttribute("reduction");
  return reduction == nullptr ||
         (reduction->type() == Attribute::Type::kString && reduction->s() == "none");
}

// The JIT tier a fold compiles its kernel at. A folded kernel runs once, so its compile is
// most of its cost, and the optimized tier's is several times the first tier's (silero VAD's
// 40 folds of LSTM weights in If branches; swin_t's 2,562 folds of its attention masks). The
// tiers differ only in floating-point arithmetic (reassociated sums, vector math calls): a kernel
// without any gives the same bits at either, so it takes the cheap one.
jit::Tier FoldTier(const Graph& g, const Node& node) {
  if (MovesDataOnly(node)) return jit::Tier::kFast;
  for (const std::vector<ValueId>* vs : {&node.inputs, &node.outputs}) {
    for (ValueId v : *vs) {
      if (v != kNoValue && IsFloat(g.value(v).dtype)) return jit::Tier::kOptimized;
    }
  }
  return jit::Tier::kFast;
}

}  // namespace

namespace {

// Integer Div / Mod by zero has no value (ONNX leaves it undefined; the kernels give 0 so that
// they never trap). Folded silently it became a wrong constant; here it is an error naming the
// node and the element.
Status CheckIntegerDivisor(const Graph& g, const Node& node,
                           const std::vector<TensorDataRef>& inputs) {
  if ((node.op_type != "Div" && node.op_type != "Mod") || inputs.size() < 2 || !inputs[1] ||
      node.outputs.empty() || !IsInteger(g.value(node.outputs[0]).dtype))
    return Status::Ok();
  std::vector<double> divisor = inputs[1]->ToDoubles();
  for (size_t i = 0; i < divisor.size(); ++i) {
    if (divisor[i] == 0) {
      return InvalidArgument("node '" + node.name + "' (" + node.op_type +
                             "): integer division by zero: the divisor (a constant) is 0 at "
                             "element " + std::to_string(i));
    }
  }
  return Status::Ok();
}

}  // namespace

ShapeInferenceOptions::FoldHook MakeFoldHook(Evaluator* evaluator, const FoldOptions& options,
                                             int* folded) {
  return [evaluator, options, folded](Graph& g, NodeId n) -> Status {
    const Node& node = g.node(n);
    if (!node.domain.empty() && node.domain != "ai.onnx") return Status::Ok();
    if (node.op_type == "If" || node.op_type == "Loop" || node.op_type == "Scan") {
      return Status::Ok();
    }
    bool all_outputs_known = true;
    int64_t bytes = 0;
    for (ValueId out : node.outputs) {
      if (out == kNoValue) continue;
      const Value& v = g.value(out);
      if (!v.data) all_outputs_known = false;
      int64_t n_el = 1;
      for (const DimExpr& d : *v.shape) {
        if (!d.is_const()) return Status::Ok();  // size unknown (data-dependent): not folded
        n_el *= d.const_value();
        if (n_el > options.max_output_bytes) return Status::Ok();
      }
      bytes += n_el * static_cast<int64_t>(DTypeSize(v.dtype));
    }
    if (all_outputs_known || bytes > options.max_output_bytes) return Status::Ok();
    if (TensorDataRef known = KnownValue(g, node)) {
      g.mutable_value(node.outputs[0]).data = known;
      if (folded) ++*folded;
      return Status::Ok();
    }
    std::vector<TensorDataRef> inputs;
    for (ValueId in : node.inputs) {
      if (in == kNoValue) {
        inputs.push_back(nullptr);
        continue;
      }
      if (!IsConstant(g.value(in))) return Status::Ok();
      inputs.push_back(g.value(in).data);
    }
    if (node.inputs.empty() && node.op_type != "Constant") return Status::Ok();  // e.g. random ops
    RETURN_IF_ERROR(CheckIntegerDivisor(g, node, inputs));
    StatusOr<std::vector<TensorDataRef>> outs = evaluator->RunNode(g, n, inputs, FoldTier(g, node));
    if (!outs.ok()) {
      if (outs.status().code() == StatusCode::kUnsupported) return Status::Ok();
      return outs.status().WithContext("constant folding");
    }
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == kNoValue || !(*outs)[o]) continue;
      g.mutable_value(node.outputs[o]).data = (*outs)[o];
    }
    if (folded) ++*folded;
    return Status::Ok();
  };
}

}  // namespace kiln::compiler
