// Control flow: If and Loop, whose bodies are inferred as subgraphs in the node's scope.
#include "compiler/ops/op_util.h"

namespace kiln::compiler::ops {
namespace {

ValueType TypeOf(const Value& v) { return {v.dtype, v.shape ? *v.shape : SymbolicShape()}; }

// Merges the types two paths give one value: same dtype and rank required; dims that differ
// become fresh. Sets *changed when any dim differed.
StatusOr<ValueType> Join(InferenceContext& ctx, const ValueType& a, const ValueType& b,
                         const std::string& what, bool* changed) {
  if (a.dtype != b.dtype)
    return ctx.Error(what + " has dtype " + DTypeName(a.dtype) + " on one path and " +
                     DTypeName(b.dtype) + " on the other");
  if (a.shape.size() != b.shape.size())
    return ctx.UnsupportedError(what + " has shape " + ShapeToString(a.shape) +
                                " on one path and " + ShapeToString(b.shape) +
                                " on the other (rank must not change)");
  ValueType out = a;
  for (size_t i = 0; i < a.shape.size(); ++i) {
    if (a.shape[i] != b.shape[i]) {
      out.shape[i] = ctx.FreshDim();
      *changed = true;
    }
  }
  return out;
}

Status IfRule(InferenceContext& ctx) {
  if (ctx.input_dtype(0) != DType::kBool || ctx.input_rank(0) > 1)
    return ctx.Error("cond must be a bool scalar");
  ASSIGN_OR_RETURN(Graph * then_g, ctx.GetGraph("then_branch"));
  ASSIGN_OR_RETURN(Graph * else_g, ctx.GetGraph("else_branch"));
  // A cond known at compile time (exporters guard code on ranks and static dims) takes one
  // branch; the other may be one kiln cannot type (another rank) and is never inferred or
  // emitted.
  if (const Graph* known = ConstantIfBranch(ctx.graph(), ctx.node())) {
    Graph* taken = known == then_g ? then_g : else_g;
    if (!taken->inputs().empty()) return ctx.Error("branches must not have inputs");
    RETURN_IF_ERROR(ctx.InferSubgraph(*taken, {}));
    if (static_cast<int>(taken->outputs().size()) != ctx.num_outputs())
      return ctx.Error("a branch has " + std::to_string(taken->outputs().size()) +
                       " outputs, the node has " + std::to_string(ctx.num_outputs()));
    for (int i = 0; i < ctx.num_outputs(); ++i) {
      ValueType t = TypeOf(taken->value(taken->outputs()[i]));
      ctx.SetOutput(i, t.dtype, t.shape);
    }
    return Status::Ok();
  }
  for (Graph* g : {then_g, else_g}) {
    if (!g->inputs().empty()) return ctx.Error("branches must not have inputs");
    RETURN_IF_ERROR(ctx.InferSubgraph(*g, {}));
    if (static_cast<int>(g->outputs().size()) != ctx.num_outputs())
      return ctx.Error("a branch has " + std::to_string(g->outputs().size()) +
                       " outputs, the node has " + std::to_string(ctx.num_outputs()));
  }
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    bool differ = false;
    ASSIGN_OR_RETURN(ValueType t, Join(ctx, TypeOf(then_g->value(then_g->outputs()[i])),
                                       TypeOf(else_g->value(else_g->outputs()[i])),
                                       "output " + std::to_string(i), &differ));
    if (differ) ctx.MarkDataDependent();  // the shape depends on which branch runs
    ctx.SetOutput(i, t.dtype, t.shape);
  }
  return Status::Ok();
}

// Loop(M, cond, v_initial...) with body(iter_num, cond, v...) -> (cond, v..., scan...).
// Loop-carried values whose shape changes across iterations are generalised to fresh dims and
// the body is inferred again until the types are stable.
Status LoopRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(Graph * body, ctx.GetGraph("body"));
  int n_carried = ctx.num_inputs() - 2;
  if (n_carried < 0) return ctx.Error("needs the M and cond inputs (they may be empty)");
  if (static_cast<int>(body->inputs().size()) != 2 + n_carried)
    return ctx.Error("body has " + std::to_string(body->inputs().size()) + " inputs, expected " +
                     std::to_string(2 + n_carried));
  int n_scan = static_cast<int>(body->outputs().size()) - 1 - n_carried;
  if (n_scan < 0 || ctx.num_outputs() > n_carried + n_scan)
    return ctx.Error("body outputs do not match the loop's carried values and outputs");
  if (ctx.has_input(0) && (ctx.input_dtype(0) != DType::kI64 || ctx.input_rank(0) > 1))
    return ctx.Error("M must be an int64 scalar");
  if (ctx.has_input(1) && (ctx.input_dtype(1) != DType::kBool || ctx.input_rank(1) > 1))
    return ctx.Error("cond must be a bool scalar");

  std::vector<ValueType> carried;
  std::vector<std::vector<bool>> general;  // dims already generalised to "varies per iteration"
  for (int j = 0; j < n_carried; ++j) {
    carried.push_back(TypeOf(ctx.input(2 + j)));
    general.emplace_back(carried.back().shape.size(), false);
  }
  bool generalised = false;
  for (int round = 0;; ++round) {
    std::vector<ValueType> inputs = {{DType::kI64, {}}, {DType::kBool, {}}};
    inputs.insert(inputs.end(), carried.begin(), carried.end());
    RETURN_IF_ERROR(ctx.InferSubgraph(*body, inputs));
    bool changed = false;
    for (int j = 0; j < n_carried; ++j) {
      ValueType next = TypeOf(body->value(body->outputs()[1 + j]));
      // A generalised dim stays generalised whatever the body makes of it.
      for (size_t i = 0; i < general[j].size() && i < next.shape.size(); ++i)
        if (general[j][i]) next.shape[i] = carried[j].shape[i];
      bool differ = false;
      ASSIGN_OR_RETURN(carried[j], Join(ctx, carried[j], next,
                                        "loop-carried value " + std::to_string(j), &differ));
      for (size_t i = 0; differ && i < general[j].size(); ++i)
        general[j][i] = general[j][i] || carried[j].shape[i].is_fresh_symbol();
      changed = changed || differ;
    }
    if (!changed) break;
    generalised = true;
    if (round == 8) return ctx.UnsupportedError("loop-carried shapes do not settle");
  }
  if (generalised) ctx.MarkDataDependent();
  for (int j = 0; j < n_carried; ++j) ctx.SetOutput(j, carried[j].dtype, carried[j].shape);

  // Scan outputs stack one body value per iteration. The trip count is M only for a for-loop
  // (no cond input); otherwise it is known at run time.
  std::optional<DimExpr> trips;
  if (!ctx.has_input(1))
    if (std::optional<std::vector<DimExpr>> m = ctx.InputValues(0); m && m->size() == 1)
      trips = (*m)[0];
  if (n_scan > 0 && (!trips || trips->HasFreshSymbol())) ctx.MarkDataDependent();
  if (!trips) trips = ctx.FreshDim();
  for (int k = 0; k < n_scan; ++k) {
    ValueType t = TypeOf(body->value(body->outputs()[1 + n_carried + k]));
    t.shape.insert(t.shape.begin(), *trips);
    ctx.SetOutput(n_carried + k, t.dtype, t.shape);
  }
  return Status::Ok();
}

}  // namespace

void RegisterControlFlowOps(OpRegistry& r) {
  MustRegister(r, MakeDef("If", 1, kLatestOpset, IfRule, 1, 1, 1, kVariadic));
  // M and cond may both be omitted (""), so no input is required by position.
  MustRegister(r, MakeDef("Loop", 1, kLatestOpset, LoopRule, 0, kVariadic, 1, kVariadic));
}

}  // namespace kiln::compiler::ops
