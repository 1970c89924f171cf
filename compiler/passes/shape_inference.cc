// Shape inference over a graph and its subgraphs (see shape_inference.h).
#include "compiler/passes/shape_inference.h"

#include <string>
#include <vector>

namespace kiln::compiler {
namespace {

constexpr int64_t kMaxDim = int64_t{1} << 62;

std::string TypeToString(DType dtype, const std::optional<SymbolicShape>& shape) {
  return std::string(DTypeName(dtype)) + (shape ? ShapeToString(*shape) : "[?]");
}

class Inferrer {
 public:
  Inferrer(const OpRegistry& registry, const ShapeInferenceOptions::FoldHook& fold)
      : registry_(registry), fold_(fold) {}

  // `scope`: the enclosing graphs, innermost first (empty for the main graph).
  Status InferGraph(Graph& g, const std::vector<Graph*>& scope) {
    RETURN_IF_ERROR(PrepareLeaves(g, scope));
    ASSIGN_OR_RETURN(std::vector<NodeId> order, g.TopologicalOrder());
    for (NodeId n : order) {
      RETURN_IF_ERROR(InferNode(g, n, scope));
      // In a subgraph only a node computed from constants alone is folded (a Loop body's
      // transpose of captured weights, done once at compile time instead of on every
      // iteration): what shape inference knows of the other values may still change when a
      // body is inferred again with more general input shapes.
      if (fold_ && (scope.empty() || g.ReadsOnlyConstants(n, ConstantReads::kFoldable)))
        RETURN_IF_ERROR(fold_(g, n));
    }
    return CheckOutputs(g);
  }

 private:
  // Graph inputs and constants must already be typed; captures take their outer value's type.
  Status PrepareLeaves(Graph& g, const std::vector<Graph*>& scope) {
    for (ValueId v = 0; v < g.num_values(); ++v) {
      Value& val = g.mutable_value(v);
      switch (val.kind) {
        case ValueKind::kGraphInput:
          if (val.dtype == DType::kInvalid || !val.shape)
            return InvalidFormat("graph input '" + val.name + "' has no dtype or no shape");
          break;
        case ValueKind::kConstant:
          if (!val.data) return InvalidFormat("constant '" + val.name + "' has no data");
          val.dtype = val.data->dtype();
          val.shape = SymbolicShape(val.data->dims().begin(), val.data->dims().end());
          break;
        case ValueKind::kCapture:
          RETURN_IF_ERROR(ResolveCapture(val, scope));
          break;
        case ValueKind::kNodeOutput:
          break;
      }
    }
    return Status::Ok();
  }

  Status ResolveCapture(Value& val, const std::vector<Graph*>& scope) {
    for (Graph* outer : scope) {
      std::optional<ValueId> id = outer->FindValue(val.name);
      if (!id) continue;
      const Value& src = outer->value(*id);
      if (src.dtype == DType::kInvalid || !src.shape)
        return Internal("captured value '" + val.name + "' has no type yet");
      val.dtype = src.dtype;
      val.shape = src.shape;
      val.symbolic_value = src.symbolic_value;
      val.data = src.kind == ValueKind::kGraphInput ? nullptr : src.data;
      return Status::Ok();
    }
    return InvalidFormat("captured value '" + val.name + "' is not defined in an enclosing graph");
  }

  Status CheckCounts(const Graph& g, NodeId n, const OpDef& def) {
    const Node& node = g.node(n);
    auto count_error = [&](const char* what, size_t have, int lo, int hi) {
      std::string range = hi == kVariadic ? "at least " + std::to_string(lo)
                          : lo == hi      ? std::to_string(lo)
                                          : std::to_string(lo) + " to " + std::to_string(hi);
      return InvalidFormat(g.DescribeNode(n) + ": has " + std::to_string(have) + " " + what +
                           ", expected " + range);
    };
    auto present = [](const std::vector<ValueId>& v) {
      size_t last = v.size();
      while (last > 0 && v[last - 1] == kNoValue) --last;
      return last;
    };
    size_t ins = present(node.inputs), outs = present(node.outputs);
    if (static_cast<int64_t>(ins) < def.min_inputs ||
        (def.max_inputs != kVariadic && static_cast<int64_t>(ins) > def.max_inputs))
      return count_error("inputs", ins, def.min_inputs, def.max_inputs);
    if (static_cast<int64_t>(outs) < def.min_outputs ||
        (def.max_outputs != kVariadic && static_cast<int64_t>(outs) > def.max_outputs))
      return count_error("outputs", outs, def.min_outputs, def.max_outputs);
    for (int i = 0; i < def.min_inputs; ++i) {
      if (node.inputs[i] == kNoValue)
        return InvalidFormat(g.DescribeNode(n) + ": required input " + std::to_string(i) +
                             " is missing");
    }
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] == kNoValue) continue;
      const Value& v = g.value(node.inputs[i]);
      if (v.dtype == DType::kInvalid || !v.shape)
        return Internal(g.DescribeNode(n) + ": input '" + v.name + "' has no type");
    }
    if (node.inputs.empty() || node.inputs[0] == kNoValue) return Status::Ok();
    DType t = g.value(node.inputs[0]).dtype;
    if (!(DTypeBit(t) & def.input0_types)) {
      return Unsupported(g.DescribeNode(n) + ": input 0 '" + g.value(node.inputs[0]).name +
                         "' has dtype " + DTypeName(t) + "; " + node.op_type + " accepts " +
                         DTypeSetToString(def.input0_types));
    }
    return Status::Ok();
  }

  Status InferNode(Graph& g, NodeId n, const std::vector<Graph*>& scope) {
    const Node& node = g.node(n);
    int64_t opset = g.OpsetFor(node.domain);
    const OpDef* def = registry_.Find(node.domain, node.op_type, opset);
    if (!def) {
      return Unsupported(g.DescribeNode(n) + ": " + node.op_type + " " +
                         registry_.WhyUnsupported(node.domain, node.op_type, opset));
    }
    RETURN_IF_ERROR(CheckCounts(g, n, *def));

    std::vector<Graph*> inner_scope = scope;
    inner_scope.insert(inner_scope.begin(), &g);
    std::string where = g.DescribeNode(n);
    auto subgraphs = [this, inner_scope, where](Graph& body,
                                                const std::vector<ValueType>& inputs) -> Status {
      RETURN_IF_ERROR(BindFormalInputs(body, inputs).WithContext(where));
      return InferGraph(body, inner_scope).WithContext(where + " subgraph '" + body.name() + "'");
    };
    InferenceContext ctx(g, n, opset, subgraphs);
    RETURN_IF_ERROR(def->infer(ctx));

    for (int i = 0; i < ctx.num_outputs(); ++i) {
      if (!ctx.has_output(i)) continue;
      const InferenceContext::Result& r = ctx.results()[i];
      Value& out = g.mutable_value(node.outputs[i]);
      if (r.dtype == DType::kInvalid || !r.shape)
        return Internal(g.DescribeNode(n) + ": the rule did not set output " + std::to_string(i) +
                        " '" + out.name + "'");
      for (const DimExpr& d : *r.shape) {
        if (!d.is_const()) continue;
        if (d.const_value() < 0)
          return InvalidFormat(g.DescribeNode(n) + ": output '" + out.name + "' would have shape " +
                               ShapeToString(*r.shape) + " with a negative dim");
        if (d.const_value() >= kMaxDim)
          return OutOfRange(g.DescribeNode(n) + ": output '" + out.name + "' shape " +
                            ShapeToString(*r.shape) + " has a dim of 2^62 or more");
      }
      out.dtype = r.dtype;
      out.shape = r.shape;
      out.symbolic_value = r.values;
      out.data = r.data;
    }
    g.mutable_node(n).data_dependent_shape = ctx.data_dependent();
    g.mutable_node(n).dim_facts = ctx.facts();
    return Status::Ok();
  }

  // A subgraph's formal inputs take the types the node passes; a declared dtype must agree.
  Status BindFormalInputs(Graph& body, const std::vector<ValueType>& inputs) {
    if (body.inputs().size() != inputs.size())
      return InvalidFormat("subgraph '" + body.name() + "' has " +
                           std::to_string(body.inputs().size()) + " inputs, expected " +
                           std::to_string(inputs.size()));
    for (size_t i = 0; i < inputs.size(); ++i) {
      Value& v = body.mutable_value(body.inputs()[i]);
      if (v.declared_dtype != DType::kInvalid && v.declared_dtype != inputs[i].dtype) {
        return InvalidFormat("subgraph '" + body.name() + "' input '" + v.name + "' is declared " +
                             DTypeName(v.declared_dtype) + " but receives " +
                             DTypeName(inputs[i].dtype));
      }
      v.dtype = inputs[i].dtype;
      v.shape = inputs[i].shape;
    }
    return Status::Ok();
  }

  // Every graph output has a type that agrees with its declaration: same dtype, same rank, and
  // equal dims where both are constants (a declared symbolic name binds nothing).
  Status CheckOutputs(const Graph& g) {
    for (ValueId id : g.outputs()) {
      const Value& v = g.value(id);
      std::string where = "graph output '" + v.name + "'";
      if (v.producer != kNoNode) where = g.DescribeNode(v.producer) + ": " + where;
      if (v.dtype == DType::kInvalid || !v.shape)
        return InvalidFormat(where + " has no inferred type");
      bool bad = v.declared_dtype != DType::kInvalid && v.declared_dtype != v.dtype;
      if (v.declared_shape) {
        bad = bad || v.declared_shape->size() != v.shape->size();
        for (size_t i = 0; !bad && i < v.shape->size(); ++i) {
          const DimExpr& a = (*v.declared_shape)[i];
          const DimExpr& b = (*v.shape)[i];
          bad = a.is_const() && b.is_const() && a != b;
        }
      }
      if (bad) {
        return InvalidFormat(where + " is declared " +
                             TypeToString(v.declared_dtype, v.declared_shape) + " but inferred " +
                             TypeToString(v.dtype, v.shape));
      }
    }
    return Status::Ok();
  }

  const OpRegistry& registry_;
  const ShapeInferenceOptions::FoldHook& fold_;
};

}  // namespace

Status InferShapes(Graph& graph, const ShapeInferenceOptions& options) {
  Inferrer inferrer(options.registry ? *options.registry : OpRegistry::Global(), options.fold);
  return inferrer.InferGraph(graph, {});
}

}  // namespace kiln::compiler
