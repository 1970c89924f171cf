// OpRegistry lookups, InferenceContext accessors, and the helpers in op_util.h.
#include "compiler/ops/registry.h"

#include <algorithm>
#include <cassert>
#include <set>

#include "compiler/ops/op_util.h"

namespace kiln::compiler {

std::string DTypeSetToString(DTypeSet set) {
  std::string s;
  for (int t = 1; t < kNumDTypes; ++t) {
    if (!(set & (1u << t))) continue;
    if (!s.empty()) s += ", ";
    s += DTypeName(static_cast<DType>(t));
  }
  return s;
}

// ---- OpRegistry ------------------------------------------------------------------------------

const OpRegistry& OpRegistry::Global() {
  static const OpRegistry* registry = [] {
    auto* r = new OpRegistry();
    ops::RegisterElementwiseOps(*r);
    ops::RegisterNnOps(*r);
    ops::RegisterShapeOps(*r);
    ops::RegisterIndexingOps(*r);
    ops::RegisterReduceOps(*r);
    ops::RegisterControlFlowOps(*r);
    ops::RegisterQuantizeOps(*r);
    ops::RegisterSignalOps(*r);
    return r;
  }();
  return *registry;
}

Status OpRegistry::Register(OpDef def) {
  std::string what = "op " + def.op_type;
  if (def.op_type.empty() || def.infer == nullptr)
    return InvalidArgument(what + ": no op type or no rule");
  if (def.since_version < 1 || def.until_version < def.since_version)
    return InvalidArgument(what + ": bad opset range");
  if (def.domain == "ai.onnx") def.domain.clear();
  std::vector<OpDef>& defs = defs_[{def.domain, def.op_type}];
  for (const OpDef& d : defs) {
    if (def.since_version <= d.until_version && d.since_version <= def.until_version)
      return InvalidArgument(what + ": opset range overlaps a registered one");
  }
  defs.push_back(std::move(def));
  std::sort(defs.begin(), defs.end(),
            [](const OpDef& a, const OpDef& b) { return a.since_version < b.since_version; });
  return Status::Ok();
}

const OpDef* OpRegistry::Find(std::string_view domain, std::string_view op_type,
                              int64_t opset) const {
  if (domain == "ai.onnx") domain = "";
  auto it = defs_.find(std::make_pair(std::string(domain), std::string(op_type)));
  if (it == defs_.end()) return nullptr;
  for (const OpDef& d : it->second) {
    if (d.since_version <= opset && opset <= d.until_version) return &d;
  }
  return nullptr;
}

std::string OpRegistry::WhyUnsupported(std::string_view domain, std::string_view op_type,
                                       int64_t opset) const {
  if (Find(domain, op_type, opset)) return "";
  if (domain == "ai.onnx") domain = "";
  auto it = defs_.find(std::make_pair(std::string(domain), std::string(op_type)));
  if (it == defs_.end()) return "is not supported";
  const std::vector<OpDef>& defs = it->second;
  if (opset < defs.front().since_version) {
    return "needs opset >= " + std::to_string(defs.front().since_version) + " (the model imports " +
           std::to_string(opset) + ")";
  }
  return "is not supported at opset " + std::to_string(opset);
}

std::vector<std::pair<std::string, std::string>> OpRegistry::OpTypes() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, defs] : defs_) out.push_back(key);
  return out;
}

std::vector<const OpDef*> OpRegistry::Defs(std::string_view domain,
                                           std::string_view op_type) const {
  std::vector<const OpDef*> out;
  auto it = defs_.find(std::make_pair(std::string(domain), std::string(op_type)));
  if (it != defs_.end())
    for (const OpDef& d : it->second) out.push_back(&d);
  return out;
}

// ---- InferenceContext --------------------------------------------------------------------------

namespace {
// Symbolic values are tracked for small tensors only (shape vectors, axes, scalars).
constexpr int64_t kMaxSymbolicElements = 1024;
}  // namespace

InferenceContext::InferenceContext(Graph& graph, NodeId node, int64_t opset,
                                   SubgraphInferer subgraphs)
    : NodeContextBase(graph, node, opset), mutable_graph_(graph), subgraphs_(std::move(subgraphs)) {
  results_.resize(graph.node(node).outputs.size());
}

std::optional<std::vector<DimExpr>> InferenceContext::InputValues(int i) const {
  if (!has_input(i)) return std::nullopt;
  const Value& v = input(i);
  if (v.symbolic_value) return v.symbolic_value;
  const TensorData* d = input_data(i);
  if (!d || d->dims().size() > 1 || d->num_elements() > kMaxSymbolicElements) return std::nullopt;
  if (!IsInteger(d->dtype()) && d->dtype() != DType::kBool) return std::nullopt;
  StatusOr<std::vector<int64_t>> ints = d->ToInt64s();
  if (!ints.ok()) return std::nullopt;
  return std::vector<DimExpr>(ints->begin(), ints->end());
}

std::optional<std::vector<int64_t>> InferenceContext::InputConstInts(int i) const {
  std::optional<std::vector<DimExpr>> v = InputValues(i);
  if (!v) return std::nullopt;
  std::vector<int64_t> out;
  for (const DimExpr& e : *v) {
    if (!e.is_const()) return std::nullopt;
    out.push_back(e.const_value());
  }
  return out;
}

StatusOr<Graph*> InferenceContext::GetGraph(std::string_view name) const {
  ASSIGN_OR_RETURN(const Attribute* a, FindTyped(name, Attribute::Type::kGraph));
  if (!a) return Error("required graph attribute '" + std::string(name) + "' is missing");
  return a->graph().get();
}

void InferenceContext::SetOutput(int i, DType dtype, SymbolicShape shape) {
  if (!has_output(i)) return;
  results_[i].dtype = dtype;
  results_[i].shape = std::move(shape);
}

void InferenceContext::SetOutputValues(int i, std::vector<DimExpr> values) {
  if (!has_output(i) || static_cast<int64_t>(values.size()) > kMaxSymbolicElements) return;
  results_[i].values = std::move(values);
}

void InferenceContext::SetOutputData(int i, TensorDataRef data) {
  if (has_output(i)) results_[i].data = std::move(data);
}

void InferenceContext::Assume(DimFact::Kind kind, const DimExpr& a, const DimExpr& b) {
  if (a == b) return;
  if (kind == DimFact::Kind::kBroadcasts && a.is_const() && a.const_value() == 1) return;
  facts_.push_back({kind, a, b});
}

Status InferenceContext::InferSubgraph(Graph& body, const std::vector<ValueType>& inputs) const {
  if (!subgraphs_) return UnsupportedError("subgraphs cannot be inferred here");
  return subgraphs_(body, inputs);
}

// ---- op_util.h ---------------------------------------------------------------------------------

namespace ops {

OpDef MakeDef(std::string op_type, int since, int until, ShapeRule rule, int min_inputs,
              int max_inputs, int min_outputs, int max_outputs) {
  OpDef d;
  d.op_type = std::move(op_type);
  d.since_version = since;
  d.until_version = until;
  d.infer = rule;
  d.min_inputs = min_inputs;
  d.max_inputs = max_inputs;
  d.min_outputs = min_outputs;
  d.max_outputs = max_outputs;
  return d;
}

void MustRegister(OpRegistry& registry, OpDef def) {
  Status s = registry.Register(std::move(def));
  assert(s.ok());
  (void)s;
}

namespace {

// m is min(s, c) for a constant c >= 1. Broadcasting m with s then gives s whenever it is
// valid: m == s, or m < s, which needs m == 1 (s == 1 would make m == s).
bool IsClampOf(const DimExpr& m, const DimExpr& s) {
  if (m.kind() != DimExpr::Kind::kMin) return false;
  const DimExpr &p = m.operands()[0], &q = m.operands()[1];
  return (p == s && q.is_const() && q.const_value() >= 1) ||
         (q == s && p.is_const() && p.const_value() >= 1);
}

}  // namespace

StatusOr<SymbolicShape> Broadcast(InferenceContext& ctx, const SymbolicShape& a,
                                  const SymbolicShape& b) {
  size_t rank = std::max(a.size(), b.size());
  SymbolicShape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right.
    bool has_a = i + a.size() >= rank, has_b = i + b.size() >= rank;
    if (!has_a) {
      out[i] = b[i + b.size() - rank];
      continue;
    }
    if (!has_b) {
      out[i] = a[i + a.size() - rank];
      continue;
    }
    const DimExpr& x = a[i + a.size() - rank];
    const DimExpr& y = b[i + b.size() - rank];
    using K = DimFact::Kind;
    if (x == y || (y.is_const() && y.const_value() == 1)) {
      out[i] = x;
    } else if (x.is_const() && x.const_value() == 1) {
      out[i] = y;
    } else if (x.is_const() && y.is_const()) {
      return ctx.Error("cannot broadcast " + ShapeToString(a) + " with " + ShapeToString(b));
    } else if (x.is_const() || y.is_const()) {
      // A constant k != 1 against a symbolic s: s must be 1 or k.
      out[i] = x.is_const() ? x : y;
      ctx.Assume(K::kBroadcasts, x.is_const() ? y : x, out[i]);
    } else if (IsClampOf(y, x)) {
      // s against min(s, c), c >= 1 (a Slice clamped to a table, as position embeddings are):
      // when both broadcast, the result is s.
      out[i] = x;
      ctx.Assume(K::kBroadcasts, y, x);
    } else if (IsClampOf(x, y)) {
      out[i] = y;
      ctx.Assume(K::kBroadcasts, x, y);
    } else {
      out[i] = ctx.FreshDim();
      ctx.Assume(K::kBroadcasts, x, out[i]);
      ctx.Assume(K::kBroadcasts, y, out[i]);
    }
  }
  return out;
}

StatusOr<SymbolicShape> BroadcastInputs(InferenceContext& ctx, int first) {
  std::optional<SymbolicShape> acc;
  for (int i = first; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) continue;
    if (!acc) {
      acc = ctx.input_shape(i);
    } else {
      ASSIGN_OR_RETURN(acc, Broadcast(ctx, *acc, ctx.input_shape(i)));
    }
  }
  if (!acc) return ctx.Error("has no inputs");
  return *acc;
}

Status CheckUnidirectional(InferenceContext& ctx, const SymbolicShape& to,
                           const SymbolicShape& from, std::string_view what) {
  auto fail = [&] {
    return ctx.Error(std::string(what) + " " + ShapeToString(from) + " does not broadcast to " +
                     ShapeToString(to));
  };
  if (from.size() > to.size()) return fail();
  for (size_t i = 0; i < from.size(); ++i) {
    const DimExpr& f = from[from.size() - 1 - i];
    const DimExpr& t = to[to.size() - 1 - i];
    if (f.is_const() && t.is_const() && f.const_value() != 1 && f != t) return fail();
    ctx.Assume(DimFact::Kind::kBroadcasts, f, t);
  }
  return Status::Ok();
}

StatusOr<DimExpr> MergeDim(InferenceContext& ctx, const DimExpr& a, const DimExpr& b,
                           std::string_view what) {
  if (a == b) return a;
  if (a.is_const() && b.is_const())
    return ctx.Error(std::string(what) + ": " + a.ToString() + " vs " + b.ToString());
  ctx.Assume(DimFact::Kind::kEqual, a, b);
  if (b.is_const()) return b;
  return a;
}

DimExpr Product(const SymbolicShape& shape, int begin, int end) {
  DimExpr p(1);
  for (int i = begin; i < end; ++i) p = p * shape[i];
  return p;
}

Status CheckSameDType(const InferenceContext& ctx, int i, int j) {
  if (!ctx.has_input(i) || !ctx.has_input(j) || ctx.input_dtype(i) == ctx.input_dtype(j))
    return Status::Ok();
  return ctx.Error("input " + std::to_string(j) + " '" + ctx.input(j).name + "' has dtype " +
                   DTypeName(ctx.input_dtype(j)) + ", expected " + DTypeName(ctx.input_dtype(i)) +
                   " like input " + std::to_string(i) + " '" + ctx.input(i).name + "'");
}

Status CheckRank(const InferenceContext& ctx, int i, int rank, std::string_view what) {
  if (ctx.input_rank(i) == rank) return Status::Ok();
  return ctx.Error(std::string(what) + " '" + ctx.input(i).name + "' must have rank " +
                   std::to_string(rank) + ", has " + ShapeToString(ctx.input_shape(i)));
}

Status CheckMinRank(const InferenceContext& ctx, int i, int rank, std::string_view what) {
  if (ctx.input_rank(i) >= rank) return Status::Ok();
  return ctx.Error(std::string(what) + " '" + ctx.input(i).name + "' must have rank >= " +
                   std::to_string(rank) + ", has " + ShapeToString(ctx.input_shape(i)));
}

StatusOr<std::optional<std::vector<int64_t>>> IntsFromAttrOrInput(const InferenceContext& ctx,
                                                                  std::string_view attr,
                                                                  int input) {
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> a, ctx.GetInts(attr));
  if (a) return a;
  if (!ctx.has_input(input)) return std::optional<std::vector<int64_t>>();
  return ctx.InputConstInts(input);
}

StatusOr<std::vector<int>> NormalizeAxes(const InferenceContext& ctx,
                                         const std::vector<int64_t>& axes, int rank) {
  std::vector<int> out;
  for (int64_t a : axes) {
    ASSIGN_OR_RETURN(int n, ctx.NormalizeAxis(a, rank));
    if (std::find(out.begin(), out.end(), n) != out.end())
      return ctx.Error("axis " + std::to_string(a) + " is repeated in " + IntsToString(axes));
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

SymbolicShape FreshShape(InferenceContext& ctx, int rank) {
  SymbolicShape s;
  for (int i = 0; i < rank; ++i) s.push_back(ctx.FreshDim());
  return s;
}

Status SameAsInput0(InferenceContext& ctx) {
  ctx.SetOutput(0, ctx.input_dtype(0), ctx.input_shape(0));
  return Status::Ok();
}

std::string IntsToString(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(v[i]);
  }
  return s + "]";
}

}  // namespace ops
}  // namespace kiln::compiler
