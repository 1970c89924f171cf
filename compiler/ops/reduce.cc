// Reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,LogSum,LogSumExp,SumSquare}, ArgMax, ArgMin.
#include <algorithm>

#include "compiler/ops/op_util.h"

namespace kiln::compiler::ops {
namespace {

// Axes come from the `axes` attribute (all reductions before opset 13, and every reduction but
// ReduceSum through opset 17) or from input 1 (ReduceSum from opset 13, every reduction from
// 18; with noop_with_empty_axes). No axes: reduce everything.
Status ReduceRule(InferenceContext& ctx) {
  const SymbolicShape& x = ctx.input_shape(0);
  int rank = static_cast<int>(x.size());
  ASSIGN_OR_RETURN(int64_t keepdims, ctx.GetInt("keepdims", 1));
  ASSIGN_OR_RETURN(int64_t noop, ctx.GetInt("noop_with_empty_axes", 0));
  bool axes_input = ctx.has_input(1);
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, IntsFromAttrOrInput(ctx, "axes", 1));
  if (axes_input && !axes) {
    // Axes known only at run time: with keepdims the rank is still known; without, the number
    // of axes (a constant length of the axes input) fixes it. Repeated axes are an error the
    // run-time shape function reports.
    int out_rank = rank;
    if (!keepdims) {
      const SymbolicShape& a = ctx.input_shape(1);
      if (a.size() != 1 || !a[0].is_const())
        return ctx.UnsupportedError("keepdims=0 needs axes of a length known at compile time");
      int64_t n = a[0].const_value();
      if (n > rank) return ctx.Error("more axes than dims");
      out_rank = n == 0 ? (noop ? rank : 0) : rank - static_cast<int>(n);
    }
    ctx.MarkDataDependent();
    ctx.SetOutput(0, ctx.input_dtype(0), FreshShape(ctx, out_rank));
    return Status::Ok();
  }
  if (!axes || axes->empty()) {
    // ONNX: empty or omitted axes with noop_with_empty_axes leave the input unchanged.
    if (noop) return SameAsInput0(ctx);
    axes.emplace();
    for (int i = 0; i < rank; ++i) axes->push_back(i);
  }
  ASSIGN_OR_RETURN(std::vector<int> norm, NormalizeAxes(ctx, *axes, rank));
  SymbolicShape out;
  for (int i = 0; i < rank; ++i) {
    bool reduced = std::binary_search(norm.begin(), norm.end(), i);
    if (!reduced) {
      out.push_back(x[i]);
    } else if (keepdims) {
      out.push_back(DimExpr(1));
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  // ReduceProd of a shape vector is its element count.
  if (ctx.node().op_type == "ReduceProd" && rank == 1 && !keepdims) {
    if (std::optional<std::vector<DimExpr>> v = ctx.InputValues(0)) {
      DimExpr p(1);
      for (const DimExpr& d : *v) p = p * d;
      ctx.SetOutputValues(0, {p});
    }
  }
  return Status::Ok();
}

Status ArgRule(InferenceContext& ctx) {
  SymbolicShape out = ctx.input_shape(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", 0));
  ASSIGN_OR_RETURN(int64_t keepdims, ctx.GetInt("keepdims", 1));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, static_cast<int>(out.size())));
  if (keepdims) {
    out[axis] = DimExpr(1);
  } else {
    out.erase(out.begin() + axis);
  }
  ctx.SetOutput(0, DType::kI64, std::move(out));
  return Status::Ok();
}

}  // namespace

void RegisterReduceOps(OpRegistry& r) {
  const char* kReductions[] = {"ReduceMean",   "ReduceMax",       "ReduceMin",
                               "ReduceProd",   "ReduceL1",        "ReduceL2",
                               "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"};
  for (const char* name : kReductions) {
    OpDef d = MakeDef(name, 1, 17, ReduceRule);
    d.input0_types = kNumericTypes;
    MustRegister(r, d);
    OpDef axes_input = MakeDef(name, 18, kLatestOpset, ReduceRule, 1, 2);
    axes_input.input0_types = kNumericTypes;
    MustRegister(r, axes_input);
  }
  OpDef sum_attr = MakeDef("ReduceSum", 1, 12, ReduceRule);
  sum_attr.input0_types = kNumericTypes;
  MustRegister(r, sum_attr);
  OpDef sum_input = MakeDef("ReduceSum", 13, kLatestOpset, ReduceRule, 1, 2);
  sum_input.input0_types = kNumericTypes;
  MustRegister(r, sum_input);
  for (const char* name : {"ArgMax", "ArgMin"}) {
    OpDef d = MakeDef(name, 1, kLatestOpset, ArgRule);
    d.input0_types = kNumericTypes;
    MustRegister(r, d);
  }
}

}  // namespace kiln::compiler::ops
