// Evaluator: binds symbols from concrete inputs, runs shape functions and kernels through the JIT.
#include "compiler/lower/evaluate.h"

#include <cstring>

#include "base/dtype.h"
#include "jit/runtime.h"

namespace kiln::compiler {
namespace {

// A tensor we own, as TensorData.
StatusOr<TensorDataRef> NewTensor(DType dtype, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return InvalidArgument("negative dim " + std::to_string(d));
    if (d != 0 && n > (int64_t{1} << 40) / d) return OutOfRange("tensor too large to evaluate");
    n *= d;
  }
  size_t bytes = static_cast<size_t>(n) * DTypeSize(dtype);
  std::shared_ptr<uint8_t[]> buf(new uint8_t[bytes == 0 ? 1 : bytes]());
  return TensorData::Make(dtype, dims, std::shared_ptr<const void>(buf, buf.get()), buf.get(),
                          bytes);
}

std::string DimsToString(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// What the node's shape rule assumed about its dims (DimFact) must hold for these inputs, as
// the kernels' preconditions make sure in the VM: a kernel run against a broken fact would read
// past a buffer or (ReverseSequence) silently compute something else.
Status CheckDimFacts(const std::string& where, const Node& node,
                     const std::map<std::string, int64_t>& bindings) {
  for (const DimFact& f : node.dim_facts) {
    StatusOr<int64_t> a = f.a.Evaluate(bindings), b = f.b.Evaluate(bindings);
    if (!a.ok() || !b.ok()) continue;  // over dims the inputs do not bind
    bool equal = f.kind == DimFact::Kind::kEqual;
    if (*a == *b || (!equal && *a == 1)) continue;
    return InvalidArgument(where + ": " + f.a.ToString() + " is " + std::to_string(*a) + ", " +
                           f.b.ToString() + " is " + std::to_string(*b) +
                           (equal ? "; they must be equal" : "; the first must be 1 or equal"));
  }
  return Status::Ok();
}

}  // namespace

Status Evaluator::Call(const jit::Kernel& k, const std::vector<const TensorData*>& args,
                       jit::Tier tier) {
  jit::KernelFn fn = nullptr;
  if (tier == jit::Tier::kFast) {
    ASSIGN_OR_RETURN(jit::KernelRef ref, engine_->Acquire(k, tier));
    fn = ref.fn();
    fast_kernels_.push_back(std::move(ref));
  } else {
    ASSIGN_OR_RETURN(fn, engine_->GetOrCompile(k));
  }
  std::vector<void*> buffers;
  std::vector<const int64_t*> shapes;
  for (const TensorData* t : args) {
    buffers.push_back(const_cast<void*>(t->data()));
    shapes.push_back(t->dims().data());
  }
  jit::KernelErrorScope errors;
  fn(buffers.data(), shapes.data(), nullptr, nullptr);
  return errors.ToStatus(jit::IndexCheckSites(k));
}

Evaluator::Evaluator(std::shared_ptr<jit::Engine> engine, const LoweringTable* table)
    : engine_(std::move(engine)), table_(table) {}

StatusOr<std::unique_ptr<Evaluator>> Evaluator::Create(const LoweringTable* table) {
  ASSIGN_OR_RETURN(std::unique_ptr<jit::Engine> engine, jit::Engine::Create());
  return std::make_unique<Evaluator>(std::shared_ptr<jit::Engine>(std::move(engine)), table);
}

StatusOr<std::vector<TensorDataRef>> Evaluator::RunNode(const Graph& graph, NodeId id,
                                                        const std::vector<TensorDataRef>& inputs,
                                                        jit::Tier tier) {
  const Node& node = graph.node(id);
  if (inputs.size() != node.inputs.size()) {
    return InvalidArgument(graph.DescribeNode(id) + ": " + std::to_string(inputs.size()) +
                           " inputs given for " + std::to_string(node.inputs.size()) + " slots");
  }
  // Bind symbols from the inputs' dims.
  std::map<std::string, int64_t> bindings;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (node.inputs[i] == kNoValue) continue;
    const Value& v = graph.value(node.inputs[i]);
    const TensorDataRef& t = inputs[i];
    std::string where = graph.DescribeNode(id) + " input " + std::to_string(i) + " ('" + v.name + "')";
    if (!t) return InvalidArgument(where + " is missing");
    if (t->dtype() != v.dtype) {
      return InvalidArgument(where + " is " + DTypeName(t->dtype()) + ", expected " +
                             DTypeName(v.dtype));
    }
    if (!v.shape || v.shape->size() != t->dims().size()) {
      return InvalidArgument(where + " has shape " + DimsToString(t->dims()) + ", expected " +
                             (v.shape ? ShapeToString(*v.shape) : "unknown"));
    }
    for (size_t a = 0; a < t->dims().size(); ++a) {
      const DimExpr& d = (*v.shape)[a];
      int64_t got = t->dims()[a];
      if (d.is_const()) {
        if (d.const_value() != got) {
          return InvalidArgument(where + " has shape " + DimsToString(t->dims()) + ", expected " +
                                 ShapeToString(*v.shape));
        }
      } else if (d.is_symbol()) {
        auto [it, inserted] = bindings.emplace(d.symbol_name(), got);
        if (!inserted && it->second != got) {
          return InvalidArgument(where + ": dim " + d.symbol_name() + " is " + std::to_string(got) +
                                 " here but " + std::to_string(it->second) + " elsewhere");
        }
      }
    }
  }
  RETURN_IF_ERROR(CheckDimFacts(graph.DescribeNode(id), node, bindings));
  // Output dims from the symbolic shapes where they evaluate.
  std::vector<std::vector<int64_t>> out_dims(node.outputs.size());
  bool need_shape_fn = node.data_dependent_shape;
  for (size_t o = 0; o < node.outputs.size() && !need_shape_fn; ++o) {
    if (node.outputs[o] == kNoValue) continue;
    const Value& v = graph.value(node.outputs[o]);
    for (const DimExpr& d : *v.shape) {
      StatusOr<int64_t> x = d.Evaluate(bindings);
      if (!x.ok()) {
        need_shape_fn = true;
        break;
      }
      out_dims[o].push_back(*x);
    }
  }
  ASSIGN_OR_RETURN(LoweredNode lowered, LowerNode(graph, id, need_shape_fn, *table_));
  std::vector<const TensorData*> args;
  for (const TensorDataRef& t : inputs) {
    if (t) args.push_back(t.get());
  }
  if (need_shape_fn) {
    std::vector<TensorDataRef> shapes;
    std::vector<const TensorData*> sargs = args;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == kNoValue) continue;
      int64_t rank = static_cast<int64_t>(graph.value(node.outputs[o]).shape->size());
      ASSIGN_OR_RETURN(TensorDataRef s, NewTensor(DType::kI64, {rank}));
      shapes.push_back(s);
      sargs.push_back(s.get());
    }
    RETURN_IF_ERROR(Call(*lowered.shape_function, sargs, tier));
    size_t k = 0;
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] == kNoValue) continue;
      const int64_t* p = static_cast<const int64_t*>(shapes[k]->data());
      out_dims[o].assign(p, p + shapes[k]->num_elements());
      ++k;
    }
  }
  std::vector<TensorDataRef> outputs(node.outputs.size());
  if (lowered.view_of >= 0) {
    const TensorDataRef& src = inputs[lowered.view_of];
    const Value& v = graph.value(node.outputs[0]);
    ASSIGN_OR_RETURN(outputs[0], TensorData::Make(v.dtype, out_dims[0], src, src->data(),
                                                  src->size_bytes()));
    return outputs;
  }
  for (size_t o = 0; o < node.outputs.size(); ++o) {
    if (node.outputs[o] == kNoValue) continue;
    ASSIGN_OR_RETURN(outputs[o], NewTensor(graph.value(node.outputs[o]).dtype, out_dims[o]));
    args.push_back(outputs[o].get());
  }
  RETURN_IF_ERROR(Call(*lowered.kernel, args, tier));
  return outputs;
}

StatusOr<std::vector<TensorDataRef>> Evaluator::RunGraph(const Graph& graph,
                                                         const std::vector<TensorDataRef>& inputs) {
  std::vector<TensorDataRef> values(graph.num_values());
  if (inputs.size() != graph.inputs().size()) {
    return InvalidArgument(std::to_string(inputs.size()) + " inputs given, the graph has " +
                           std::to_string(graph.inputs().size()));
  }
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const Value& val = graph.value(v);
    if (val.kind == ValueKind::kConstant || (val.kind == ValueKind::kGraphInput && val.data)) {
      values[v] = val.data;
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i]) values[graph.inputs()[i]] = inputs[i];
  }
  ASSIGN_OR_RETURN(std::vector<NodeId> order, graph.TopologicalOrder());
  for (NodeId n : order) {
    const Node& node = graph.node(n);
    std::vector<TensorDataRef> args;
    for (ValueId v : node.inputs) args.push_back(v == kNoValue ? nullptr : values[v]);
    ASSIGN_OR_RETURN(std::vector<TensorDataRef> outs, RunNode(graph, n, args));
    for (size_t o = 0; o < node.outputs.size(); ++o) {
      if (node.outputs[o] != kNoValue) values[node.outputs[o]] = outs[o];
    }
  }
  std::vector<TensorDataRef> out;
  for (ValueId v : graph.outputs()) out.push_back(values[v]);
  return out;
}

}  // namespace kiln::compiler
