// Constant Reshape targets from symbolic values (see reshape_shapes.h).
#include "compiler/passes/reshape_shapes.h"

#include <string>
#include <vector>

namespace kiln::compiler {
namespace {

// The constant target of Reshape `node`, or empty when it keeps its run-time one.
std::vector<int64_t> ConstantTarget(const Graph& g, const Node& node) {
  if (!node.domain.empty() && node.domain != "ai.onnx") return {};
  if (node.op_type != "Reshape" || node.inputs.size() != 2) return {};
  const Attribute* allowzero = node.FindAttribute("allowzero");
  if (allowzero && allowzero->type() == Attribute::Type::kInt && allowzero->i() != 0) return {};
  ValueId x = node.inputs[0], shape = node.inputs[1];
  if (x == kNoValue || shape == kNoValue) return {};
  const Value& s = g.value(shape);
  if (s.data || s.kind == ValueKind::kGraphInput || !s.symbolic_value || !g.value(x).shape)
    return {};
  const SymbolicShape& in = *g.value(x).shape;
  std::vector<int64_t> target;
  int inferred = 0;  // -1 entries: ONNX allows one
  for (size_t i = 0; i < s.symbolic_value->size(); ++i) {
    const DimExpr& e = (*s.symbolic_value)[i];
    if (e.is_const() && (e.const_value() > 0 || (e.const_value() == -1 && ++inferred == 1))) {
      target.push_back(e.const_value());
    } else if (i < in.size() && e == in[i]) {
      target.push_back(0);
    } else {
      return {};
    }
  }
  return target;
}

}  // namespace

StatusOr<int> ConstantReshapeShapes(Graph& g) {
  int changed = 0;
  for (NodeId n = 0; n < g.num_nodes(); ++n) {
    std::vector<int64_t> target = ConstantTarget(g, g.node(n));
    if (target.empty()) continue;
    ASSIGN_OR_RETURN(ValueId c, g.AddValue(g.UniqueValueName(g.value(g.node(n).inputs[1]).name +
                                                             "_constant"),
                                           ValueKind::kConstant));
    Value& v = g.mutable_value(c);
    v.dtype = DType::kI64;
    v.shape = SymbolicShape{DimExpr(static_cast<int64_t>(target.size()))};
    v.data = TensorData::FromInt64s({static_cast<int64_t>(target.size())}, target);
    std::vector<DimExpr> symbolic;
    for (int64_t d : target) symbolic.push_back(DimExpr(d));
    v.symbolic_value = symbolic;
    g.SetNodeInput(n, 1, c);
    ++changed;
  }
  return changed;
}

}  // namespace kiln::compiler
