// Normalisation lowerings: BatchNormalization (inference, and training at opset 14+),
// InstanceNormalization, LayerNormalization, MeanVarianceNormalization, LpNormalization, LRN.
#include <set>

#include "compiler/lower/nn_internal.h"
#include "jit/compute.h"

namespace kiln::compiler::nn {

using jit::Cast;
using jit::Let;
using jit::Load;
using jit::Select;
using jit::Store;

namespace {

// Statistics of one slice of X (the reduced axes at one kept index), for the callbacks below.
struct SliceStats {
  std::vector<Expr> kept;  // the kept index, in X's dims (reduced dims null)
  Expr mean, inv_std;      // acc dtype
};

// For every index of the kept axes (parallel, flattened), computes the mean and 1/sqrt(var + eps)
// of X over `reduced` (two passes: mean, then the centred squares), then runs `write` for each
// element of the slice (reduced axes innermost and vectorized) and `after` once per slice.
Stmt NormalizeSlices(const LowerContext& ctx, const std::set<int>& reduced, DType acc,
                     const std::function<Expr(const Expr& var)>& inv_std_of,
                     const std::function<Stmt(const SliceStats&, const std::vector<Expr>& full,
                                              const Expr& x)>& write,
                     const std::function<Stmt(const SliceStats&)>& after) {
  const int rank = ctx.input_rank(0);
  Buffer X = ctx.in(0);
  std::vector<int> kept_axes;
  std::vector<Expr> kept_extents, red_extents;
  Expr count = I(1);
  for (int d = 0; d < rank; ++d) {
    if (reduced.count(d)) {
      red_extents.push_back(ctx.InputDim(0, d));
      count = count * ctx.InputDim(0, d);
    } else {
      kept_axes.push_back(d);
      kept_extents.push_back(ctx.InputDim(0, d));
    }
  }
  // Every kept dim goes into the one parallel loop: with ParallelNest the innermost kept dim
  // stayed a serial loop inside it, so LayerNorm over [1, L, C] (kept [1, L]) ran on one thread.
  return ParallelFlat(
      kept_extents,
      [&](const std::vector<Expr>& kidx) {
        SliceStats st;
        st.kept.assign(rank, Expr());
        for (size_t i = 0; i < kept_axes.size(); ++i) st.kept[kept_axes[i]] = kidx[i];
        auto slice_load = [&](const std::vector<Var>& vars) {
          std::vector<Expr> index = st.kept;
          size_t r = 0;
          for (int d = 0; d < rank; ++d)
            if (reduced.count(d)) index[d] = vars[r++];
          return index;
        };
        std::vector<Var> v1, v2;
        std::vector<jit::IterVar> a1, a2;
        for (size_t r = 0; r < red_extents.size(); ++r) {
          v1.emplace_back("r" + std::to_string(r));
          v2.emplace_back("q" + std::to_string(r));
          a1.push_back({v1.back(), red_extents[r]});
          a2.push_back({v2.back(), red_extents[r]});
        }
        Var mean("mean", acc), inv("inv_std", acc);
        Expr n = Cast(acc, count);
        Expr sum = jit::Sum(a1, Cast(acc, Load(X, slice_load(v1))));
        Expr centred = jit::Sub(Cast(acc, Load(X, slice_load(v2))), mean);
        Expr var = jit::Div(jit::Sum(a2, jit::Mul(centred, centred)), n);
        st.mean = mean;
        st.inv_std = inv;
        Stmt body = SerialNest(red_extents, [&](const std::vector<Expr>& ridx) {
          std::vector<Expr> full = st.kept;
          size_t r = 0;
          for (int d = 0; d < rank; ++d)
            if (reduced.count(d)) full[d] = ridx[r++];
          return write(st, full, Cast(acc, Load(X, full)));
        });
        if (after) body = jit::Seq({body, after(st)});
        return Let(mean, jit::Div(sum, n), Let(inv, inv_std_of(var), body));
      });
}

std::function<Expr(const Expr&)> InvStd(DType acc, double epsilon) {
  return [acc, epsilon](const Expr& var) {
    return jit::Div(jit::Const(acc, 1), jit::Sqrt(jit::Add(var, jit::Const(acc, epsilon))));
  };
}

Expr ChannelLoad(const LowerContext& ctx, int input, const Expr& c, DType acc) {
  return Cast(acc, Load(ctx.in(input), {c}));
}

}  // namespace

Status LowerBatchNorm(LowerContext& ctx) {
  ASSIGN_OR_RETURN(float epsilon, ctx.GetFloat("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(float momentum, ctx.GetFloat("momentum", 0.9f));
  ASSIGN_OR_RETURN(int64_t training_mode, ctx.GetInt("training_mode", 0));
  DType dtype = ctx.output_dtype(0), acc = AccType(dtype);
  bool extra_outputs =
      ctx.has_output(1) || ctx.has_output(2) || ctx.has_output(3) || ctx.has_output(4);
  if (ctx.opset() < 14 && extra_outputs) {
    return ctx.UnsupportedError("training-mode outputs before opset 14 are not supported");
  }
  const int rank = ctx.input_rank(0);
  if (training_mode == 0) {
    // y = x * a[c] + b[c] with a = scale / sqrt(var + eps), b = bias - mean * a.
    ctx.SetCompute(0, [&](const std::vector<Expr>& idx) {
      Expr c = idx[1];
      Expr a = jit::Div(ChannelLoad(ctx, 1, c, acc),
                        jit::Sqrt(jit::Add(ChannelLoad(ctx, 4, c, acc), jit::Const(acc, epsilon))));
      Expr x = Cast(acc, Load(ctx.in(0), idx));
      return jit::MulAdd(jit::Sub(x, ChannelLoad(ctx, 3, c, acc)), a, ChannelLoad(ctx, 2, c, acc));
    });
    return Status::Ok();
  }
  // Training (opset 14+): normalise with the batch statistics (population variance) and update
  // the running ones: running = input_running * momentum + current * (1 - momentum).
  std::set<int> reduced;
  for (int d = 0; d < rank; ++d)
    if (d != 1) reduced.insert(d);
  ctx.SetBody(NormalizeSlices(
      ctx, reduced, acc,
      [acc, epsilon](const Expr& var) {
        // Keep the variance itself for the running update: inv_std is recomputed below.
        (void)acc;
        (void)epsilon;
        return var;
      },
      [&](const SliceStats& st, const std::vector<Expr>& full, const Expr& x) {
        Expr c = st.kept[1];
        Expr inv =
            jit::Div(jit::Const(acc, 1), jit::Sqrt(jit::Add(st.inv_std, jit::Const(acc, epsilon))));
        Expr y = jit::MulAdd(jit::Mul(jit::Sub(x, st.mean), inv), ChannelLoad(ctx, 1, c, acc),
                             ChannelLoad(ctx, 2, c, acc));
        return Store(ctx.out(0), full, Cast(dtype, y));
      },
      [&](const SliceStats& st) {
        Expr c = st.kept[1];
        std::vector<Stmt> s;
        Expr m = jit::Const(acc, momentum), m1 = jit::Const(acc, 1.0 - momentum);
        if (ctx.has_output(1)) {
          s.push_back(Store(
              ctx.out(1), {c},
              Cast(ctx.output_dtype(1),
                   jit::Add(jit::Mul(ChannelLoad(ctx, 3, c, acc), m), jit::Mul(st.mean, m1)))));
        }
        if (ctx.has_output(2)) {
          s.push_back(Store(
              ctx.out(2), {c},
              Cast(ctx.output_dtype(2),
                   jit::Add(jit::Mul(ChannelLoad(ctx, 4, c, acc), m), jit::Mul(st.inv_std, m1)))));
        }
        return jit::Seq(s);
      }));
  return Status::Ok();
}

Status LowerInstanceNorm(LowerContext& ctx) {
  ASSIGN_OR_RETURN(float epsilon, ctx.GetFloat("epsilon", 1e-5f));
  DType dtype = ctx.output_dtype(0), acc = AccType(dtype);
  std::set<int> reduced;
  for (int d = 2; d < ctx.input_rank(0); ++d) reduced.insert(d);
  ctx.SetBody(NormalizeSlices(
      ctx, reduced, acc, InvStd(acc, epsilon),
      [&](const SliceStats& st, const std::vector<Expr>& full, const Expr& x) {
        Expr c = st.kept[1];
        Expr y = jit::MulAdd(jit::Mul(jit::Sub(x, st.mean), st.inv_std),
                             ChannelLoad(ctx, 1, c, acc), ChannelLoad(ctx, 2, c, acc));
        return Store(ctx.out(0), full, Cast(dtype, y));
      },
      nullptr));
  return Status::Ok();
}

Status LowerLayerNorm(LowerContext& ctx) {
  ASSIGN_OR_RETURN(float epsilon, ctx.GetFloat("epsilon", 1e-5f));
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", -1));
  const int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  DType dtype = ctx.output_dtype(0);
  DType acc = dtype == DType::kF64 ? DType::kF64 : DType::kF32;
  std::set<int> reduced;
  for (int d = axis; d < rank; ++d) reduced.insert(d);
  SymbolicShape norm_shape(ctx.input_shape(0).begin() + axis, ctx.input_shape(0).end());
  auto param = [&](int input, const std::vector<Expr>& full) {
    std::vector<Expr> tail(full.begin() + axis, full.end());
    return Cast(acc, jit::BroadcastLoad(ctx.in(input), tail,
                                        BroadcastHints(ctx.input_shape(input), norm_shape)));
  };
  ctx.SetBody(NormalizeSlices(
      ctx, reduced, acc, InvStd(acc, epsilon),
      [&](const SliceStats& st, const std::vector<Expr>& full, const Expr& x) {
        Expr y = jit::Mul(jit::Mul(jit::Sub(x, st.mean), st.inv_std), param(1, full));
        if (ctx.has_input(2)) y = jit::Add(y, param(2, full));
        return Store(ctx.out(0), full, Cast(dtype, y));
      },
      [&](const SliceStats& st) {
        std::vector<Stmt> s;
        std::vector<Expr> idx = st.kept;
        for (int d = axis; d < rank; ++d) idx[d] = I(0);
        if (ctx.has_output(1)) {
          s.push_back(Store(ctx.out(1), idx, Cast(ctx.output_dtype(1), st.mean)));
        }
        if (ctx.has_output(2)) {
          s.push_back(Store(ctx.out(2), idx, Cast(ctx.output_dtype(2), st.inv_std)));
        }
        return jit::Seq(s);
      }));
  return Status::Ok();
}

Status LowerMeanVarianceNorm(LowerContext& ctx) {
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> axes, ctx.GetInts("axes"));
  const int rank = ctx.input_rank(0);
  std::vector<int64_t> list = axes ? *axes : std::vector<int64_t>{0, 2, 3};
  std::set<int> reduced;
  for (int64_t a : list) {
    ASSIGN_OR_RETURN(int d, ctx.NormalizeAxis(a, rank, "axes"));
    reduced.insert(d);
  }
  DType dtype = ctx.output_dtype(0), acc = AccType(dtype);
  // (x - mean) / (sqrt(var) + 1e-9), as the ONNX function body.
  auto inv_std = [acc](const Expr& var) {
    return jit::Div(jit::Const(acc, 1), jit::Add(jit::Sqrt(var), jit::Const(acc, 1e-9)));
  };
  ctx.SetBody(NormalizeSlices(
      ctx, reduced, acc, inv_std,
      [&](const SliceStats& st, const std::vector<Expr>& full, const Expr& x) {
        return Store(ctx.out(0), full, Cast(dtype, jit::Mul(jit::Sub(x, st.mean), st.inv_std)));
      },
      nullptr));
  return Status::Ok();
}

Status LowerLpNorm(LowerContext& ctx) {
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", -1));
  ASSIGN_OR_RETURN(int64_t p, ctx.GetInt("p", 2));
  if (p != 1 && p != 2) return ctx.Error("p must be 1 or 2");
  const int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  DType dtype = ctx.output_dtype(0), acc = AccType(dtype);
  ctx.SetCompute(0, [&](const std::vector<Expr>& idx) {
    Var r("r");
    std::vector<Expr> src = idx;
    src[axis] = r;
    Expr v = Cast(acc, Load(ctx.in(0), src));
    Expr norm = jit::Sum({{r, ctx.InputDim(0, axis)}}, p == 1 ? jit::Abs(v) : jit::Mul(v, v));
    if (p == 2) norm = jit::Sqrt(norm);
    Expr x = Cast(acc, Load(ctx.in(0), idx));
    // A zero norm gives 0 (as ONNX Runtime), not NaN.
    return Select(jit::Eq(norm, jit::Const(acc, 0)), jit::Const(acc, 0), jit::Div(x, norm));
  });
  return Status::Ok();
}

Status LowerLrn(LowerContext& ctx) {
  ASSIGN_OR_RETURN(float alpha, ctx.GetFloat("alpha", 1e-4f));
  ASSIGN_OR_RETURN(float beta, ctx.GetFloat("beta", 0.75f));
  ASSIGN_OR_RETURN(float bias, ctx.GetFloat("bias", 1.0f));
  ASSIGN_OR_RETURN(int64_t size, ctx.GetInt("size", 0));
  if (size <= 0) return ctx.Error("size must be positive");
  DType dtype = ctx.output_dtype(0), acc = AccType(dtype);
  Expr channels = ctx.InputDim(0, 1);
  ctx.SetCompute(0, [&](const std::vector<Expr>& idx) {
    Var r("r");
    Expr c = idx[1] - I((size - 1) / 2) + r;
    std::vector<Expr> src = idx;
    src[1] = Clamp(c, channels);
    Expr v = Cast(acc, Load(ctx.in(0), src));
    Expr sq =
        jit::Sum({{r, I(size)}}, Select(InBounds(c, channels), jit::Mul(v, v), jit::Const(acc, 0)));
    Expr denom =
        jit::Pow(jit::Add(jit::Const(acc, bias), jit::Mul(jit::Const(acc, alpha / size), sq)),
                 jit::Const(acc, beta));
    return jit::Div(Cast(acc, Load(ctx.in(0), idx)), denom);
  });
  return Status::Ok();
}

}  // namespace kiln::compiler::nn
