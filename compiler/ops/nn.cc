// Neural-network ops: Conv, ConvTranspose, pooling, normalisation, Gemm, MatMul, Einsum,
// DepthToSpace/SpaceToDepth, Resize/Upsample, GridSample, RoiAlign, MaxUnpool, Col2Im, Det.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "compiler/ops/attributes.h"
#include "compiler/ops/op_util.h"

namespace kiln::compiler::ops {
namespace {

// ---- Sliding windows (Conv, ConvTranspose, pooling) ------------------------------------------

// The weights' spatial dims when they are all constant (they stand in for kernel_shape).
std::optional<std::vector<int64_t>> KernelFromWeights(const SymbolicShape& w) {
  if (!std::all_of(w.begin() + 2, w.end(), [](const DimExpr& d) { return d.is_const(); }))
    return std::nullopt;
  std::vector<int64_t> kernel;
  for (size_t i = 2; i < w.size(); ++i) kernel.push_back(w[i].const_value());
  return kernel;
}

// Output length of a window sliding over `in` (Conv and pooling). Error when a static input,
// padded, is shorter than the kernel's extent.
StatusOr<DimExpr> WindowOutput(const InferenceContext& ctx, const DimExpr& in,
                               const WindowAttributes& w, int i, bool ceil_mode) {
  DimExpr k_eff(w.extent(i));
  DimExpr s(w.strides[i]);
  if (w.same()) return CeilDiv(in, s);
  DimExpr padded = in;
  if (w.auto_pad == AutoPad::kNotSet)
    padded = padded + DimExpr(w.pads[i]) + DimExpr(w.pads[i + w.spatial()]);
  if (padded.is_const() && padded.const_value() < k_eff.const_value()) {
    return ctx.Error("spatial dim " + std::to_string(i) + ": padded input " + padded.ToString() +
                     " is smaller than the kernel extent " + k_eff.ToString());
  }
  DimExpr span = padded - k_eff;
  return (ceil_mode ? CeilDiv(span, s) : FloorDiv(span, s)) + DimExpr(1);
}

Status ConvRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 3, "X"));
  const SymbolicShape& x = ctx.input_shape(0);
  const SymbolicShape& w = ctx.input_shape(1);
  int spatial = static_cast<int>(x.size()) - 2;
  RETURN_IF_ERROR(CheckRank(ctx, 1, static_cast<int>(x.size()), "W"));
  ASSIGN_OR_RETURN(ConvAttributes conv,
                   ParseConvAttributes(ctx.node(), spatial, KernelFromWeights(w)));
  RETURN_IF_ERROR(
      MergeDim(ctx, x[1], w[1] * DimExpr(conv.group), "input channels vs W channels * group")
          .status());
  if (ctx.has_input(2)) {
    RETURN_IF_ERROR(CheckRank(ctx, 2, 1, "B"));
    RETURN_IF_ERROR(
        MergeDim(ctx, ctx.input_shape(2)[0], w[0], "B length vs output channels").status());
  }
  SymbolicShape out = {x[0], w[0]};
  for (int i = 0; i < spatial; ++i) {
    ASSIGN_OR_RETURN(DimExpr d, WindowOutput(ctx, x[i + 2], conv, i, /*ceil_mode=*/false));
    out.push_back(d);
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

Status ConvTransposeRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 3, "X"));
  const SymbolicShape& x = ctx.input_shape(0);
  const SymbolicShape& w = ctx.input_shape(1);
  int spatial = static_cast<int>(x.size()) - 2;
  RETURN_IF_ERROR(CheckRank(ctx, 1, static_cast<int>(x.size()), "W"));
  ASSIGN_OR_RETURN(ConvAttributes conv,
                   ParseConvAttributes(ctx.node(), spatial, KernelFromWeights(w)));
  RETURN_IF_ERROR(MergeDim(ctx, x[1], w[0], "input channels vs W dim 0").status());
  DimExpr channels = w[1] * DimExpr(conv.group);
  if (ctx.has_input(2)) {
    RETURN_IF_ERROR(CheckRank(ctx, 2, 1, "B"));
    RETURN_IF_ERROR(
        MergeDim(ctx, ctx.input_shape(2)[0], channels, "B length vs output channels").status());
  }
  SymbolicShape out = {x[0], channels};
  for (int i = 0; i < spatial; ++i) {
    if (std::optional<int64_t> size = conv.OutputSize(i)) {
      out.push_back(DimExpr(*size));
    } else if (conv.same()) {
      out.push_back(x[i + 2] * DimExpr(conv.strides[i]));
    } else {
      DimExpr pads = conv.auto_pad == AutoPad::kValid
                         ? DimExpr(0)
                         : DimExpr(conv.pads[i]) + DimExpr(conv.pads[i + spatial]);
      out.push_back(DimExpr(conv.strides[i]) * (x[i + 2] - DimExpr(1)) +
                    DimExpr(conv.output_padding[i]) + DimExpr(conv.extent(i)) - pads);
    }
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// MaxPool, AveragePool, LpPool. MaxPool's optional second output (Indices) is int64.
Status PoolRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 3, "X"));
  const SymbolicShape& x = ctx.input_shape(0);
  int spatial = static_cast<int>(x.size()) - 2;
  ASSIGN_OR_RETURN(PoolAttributes pool, ParsePoolAttributes(ctx.node(), spatial));
  SymbolicShape out = {x[0], x[1]};
  for (int i = 0; i < spatial; ++i) {
    ASSIGN_OR_RETURN(DimExpr d, WindowOutput(ctx, x[i + 2], pool, i, pool.ceil_mode));
    out.push_back(d);
  }
  ctx.SetOutput(0, ctx.input_dtype(0), out);
  ctx.SetOutput(1, DType::kI64, out);
  return Status::Ok();
}

Status GlobalPoolRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 3, "X"));
  SymbolicShape out = ctx.input_shape(0);
  for (size_t i = 2; i < out.size(); ++i) out[i] = DimExpr(1);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// ---- Normalisation -------------------------------------------------------------------------

// Inputs [from, to) are per-channel vectors of length C = X's dim 1.
Status CheckChannelVectors(InferenceContext& ctx, int from, int to) {
  const DimExpr& c = ctx.input_shape(0)[1];
  for (int i = from; i < to; ++i) {
    if (!ctx.has_input(i)) continue;
    RETURN_IF_ERROR(CheckRank(ctx, i, 1, "per-channel input"));
    RETURN_IF_ERROR(MergeDim(ctx, ctx.input_shape(i)[0], c,
                             "per-channel input '" + ctx.input(i).name + "' length vs channels")
                        .status());
  }
  return Status::Ok();
}

// BatchNormalization: Y like X; running/saved statistics (optional outputs) are [C].
Status BatchNormRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 2, "X"));
  RETURN_IF_ERROR(CheckChannelVectors(ctx, 1, 5));
  RETURN_IF_ERROR(SameAsInput0(ctx));
  DType stats = ctx.input_dtype(ctx.num_inputs() > 3 ? 3 : 0);
  for (int i = 1; i < ctx.num_outputs(); ++i) ctx.SetOutput(i, stats, {ctx.input_shape(0)[1]});
  return Status::Ok();
}

Status InstanceNormRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 3, "X"));
  RETURN_IF_ERROR(CheckChannelVectors(ctx, 1, 3));
  return SameAsInput0(ctx);
}

// LayerNormalization (opset 17): Mean and InvStdDev keep dims before `axis`, 1 from there, in
// the stash_type dtype.
Status LayerNormRule(InferenceContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, ctx.GetInt("axis", -1));
  ASSIGN_OR_RETURN(int axis, ctx.NormalizeAxis(axis_attr, rank));
  for (int i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    RETURN_IF_ERROR(CheckSameDType(ctx, 0, i));
    SymbolicShape norm(ctx.input_shape(0).begin() + axis, ctx.input_shape(0).end());
    RETURN_IF_ERROR(CheckUnidirectional(ctx, norm, ctx.input_shape(i), i == 1 ? "Scale" : "B"));
  }
  RETURN_IF_ERROR(SameAsInput0(ctx));
  ASSIGN_OR_RETURN(int64_t stash, ctx.GetInt("stash_type", 1));
  StatusOr<DType> stash_dtype = DTypeFromOnnx(stash);
  if (!stash_dtype.ok()) return ctx.Error("stash_type: " + stash_dtype.status().message());
  SymbolicShape reduced = ctx.input_shape(0);
  for (int i = axis; i < rank; ++i) reduced[i] = DimExpr(1);
  ctx.SetOutput(1, *stash_dtype, reduced);
  ctx.SetOutput(2, *stash_dtype, reduced);
  return Status::Ok();
}

// ---- Matrix products -----------------------------------------------------------------------

Status GemmRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  RETURN_IF_ERROR(CheckRank(ctx, 0, 2, "A"));
  RETURN_IF_ERROR(CheckRank(ctx, 1, 2, "B"));
  ASSIGN_OR_RETURN(int64_t trans_a, ctx.GetInt("transA", 0));
  ASSIGN_OR_RETURN(int64_t trans_b, ctx.GetInt("transB", 0));
  const SymbolicShape& a = ctx.input_shape(0);
  const SymbolicShape& b = ctx.input_shape(1);
  DimExpr m = a[trans_a ? 1 : 0], k = a[trans_a ? 0 : 1];
  DimExpr kb = b[trans_b ? 1 : 0], n = b[trans_b ? 0 : 1];
  RETURN_IF_ERROR(
      MergeDim(ctx, k, kb, "inner dims of A " + ShapeToString(a) + " and B " + ShapeToString(b))
          .status());
  SymbolicShape out = {m, n};
  if (ctx.has_input(2)) {
    RETURN_IF_ERROR(CheckSameDType(ctx, 0, 2));
    RETURN_IF_ERROR(CheckUnidirectional(ctx, out, ctx.input_shape(2), "C"));
  } else if (ctx.opset() < 11) {
    return ctx.Error("input C is required before opset 11");
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// MatMul (numpy matmul): 1-D operands get a dim prepended/appended and removed again; batch
// dims broadcast.
Status MatMulRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  SymbolicShape a = ctx.input_shape(0), b = ctx.input_shape(1);
  if (a.empty() || b.empty()) return ctx.Error("operands must have rank >= 1");
  bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), DimExpr(1));
  if (b_vec) b.push_back(DimExpr(1));
  RETURN_IF_ERROR(MergeDim(ctx, a.back(), b[b.size() - 2],
                           "inner dims of " + ShapeToString(ctx.input_shape(0)) + " and " +
                               ShapeToString(ctx.input_shape(1)))
                      .status());
  SymbolicShape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  ASSIGN_OR_RETURN(SymbolicShape out, Broadcast(ctx, batch_a, batch_b));
  if (!a_vec) out.push_back(a[a.size() - 2]);
  if (!b_vec) out.push_back(b.back());
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// kiln::PackedMatMul (compiler/passes/pack_weights): A [..., K] times B packed into column
// panels Bp [ceil(n / cols), K, cols], attribute n; optional C broadcast into a 2-D result.
Status PackedMatMulRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  RETURN_IF_ERROR(CheckRank(ctx, 1, 3, "packed B"));
  const SymbolicShape& a = ctx.input_shape(0);
  const SymbolicShape& bp = ctx.input_shape(1);
  if (a.size() < 2) return ctx.Error("A must have rank >= 2");
  ASSIGN_OR_RETURN(int64_t n, ctx.GetInt("n", -1));
  if (n < 1) return ctx.Error("attribute n must be >= 1");
  RETURN_IF_ERROR(MergeDim(ctx, a.back(), bp[1],
                           "inner dims of A " + ShapeToString(a) + " and packed B " +
                               ShapeToString(bp))
                      .status());
  if (!bp[2].is_const() || !bp[0].is_const() ||
      bp[0].const_value() * bp[2].const_value() < n ||
      (bp[0].const_value() - 1) * bp[2].const_value() >= n)
    return ctx.Error("packed B " + ShapeToString(bp) + " does not hold n = " + std::to_string(n) +
                     " columns in its panels");
  SymbolicShape out(a.begin(), a.end() - 1);
  out.push_back(DimExpr(n));
  if (ctx.has_input(2)) {
    if (a.size() != 2) return ctx.Error("C needs a 2-D A");
    RETURN_IF_ERROR(CheckSameDType(ctx, 0, 2));
    RETURN_IF_ERROR(CheckUnidirectional(ctx, out, ctx.input_shape(2), "C"));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// kiln::RecurrentSequence (compiler/onnx/expand_rnn): every step of an LSTM (kind 0), GRU with
// linear_before_reset (1) or RNN (2) layer. XW [seq, batch, directions * gates * hidden] (the
// input projection with its biases), R packed [directions, panels, hidden, gates, width],
// optional H0 / C0 [directions, batch, hidden] and (GRU) the recurrent h-gate bias
// [directions, hidden]; outputs Y [seq, directions, batch, hidden], Y_h and (LSTM) Y_c
// [directions, batch, hidden], all present.
Status RecurrentSequenceRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(int64_t kind, ctx.GetInt("kind", -1));
  ASSIGN_OR_RETURN(int64_t hidden, ctx.GetInt("hidden_size", -1));
  ASSIGN_OR_RETURN(int64_t dirs, ctx.GetInt("directions", 1));
  if (kind < 0 || kind > 2) return ctx.Error("attribute kind must be 0 (LSTM), 1 (GRU) or 2 (RNN)");
  if (hidden < 1) return ctx.Error("attribute hidden_size must be >= 1");
  if (dirs != 1 && dirs != 2) return ctx.Error("attribute directions must be 1 or 2");
  const int64_t gates = kind == 0 ? 4 : kind == 1 ? 3 : 1;
  const int outs = kind == 0 ? 3 : 2;
  if (ctx.num_outputs() != outs) {
    return ctx.Error("needs " + std::to_string(outs) + " outputs, has " +
                     std::to_string(ctx.num_outputs()));
  }
  for (int i = 0; i < outs; ++i) {
    if (!ctx.has_output(i)) return ctx.Error("output " + std::to_string(i) + " must be present");
  }
  RETURN_IF_ERROR(CheckRank(ctx, 0, 3, "XW"));
  RETURN_IF_ERROR(CheckRank(ctx, 1, 5, "packed R"));
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  const SymbolicShape& xw = ctx.input_shape(0);
  const SymbolicShape& rp = ctx.input_shape(1);
  if (xw[2].is_const() && xw[2].const_value() != dirs * gates * hidden) {
    return ctx.Error("XW " + ShapeToString(xw) + " does not hold " + std::to_string(dirs) +
                     " x " + std::to_string(gates) + " gates of " + std::to_string(hidden));
  }
  for (const DimExpr& d : rp) {
    if (!d.is_const()) return ctx.Error("packed R " + ShapeToString(rp) + " must be static");
  }
  const int64_t panels = rp[1].const_value(), width = rp[4].const_value();
  if (rp[0].const_value() != dirs || rp[2].const_value() != hidden ||
      rp[3].const_value() != gates || width < 1 || panels * width < hidden ||
      (panels - 1) * width >= hidden) {
    return ctx.Error("packed R " + ShapeToString(rp) + " is not [" + std::to_string(dirs) +
                     ", panels, " + std::to_string(hidden) + ", " + std::to_string(gates) +
                     ", width] with panels * width just covering " + std::to_string(hidden));
  }
  SymbolicShape state = {DimExpr(dirs), xw[1], DimExpr(hidden)};
  auto check_state = [&](int i, const char* what) -> Status {
    if (!ctx.has_input(i)) return Status::Ok();
    RETURN_IF_ERROR(CheckSameDType(ctx, 0, i));
    RETURN_IF_ERROR(CheckRank(ctx, i, 3, what));
    for (int d = 0; d < 3; ++d) {
      RETURN_IF_ERROR(MergeDim(ctx, ctx.input_shape(i)[d], state[d],
                               std::string(what) + " " + ShapeToString(ctx.input_shape(i)) +
                                   " and the state " + ShapeToString(state))
                          .status());
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(check_state(2, "H0"));
  if (ctx.has_input(3) && kind != 0) return ctx.Error("C0 is for LSTM only");
  RETURN_IF_ERROR(check_state(3, "C0"));
  if (ctx.has_input(4)) {
    if (kind != 1) return ctx.Error("the h-gate bias is for GRU only");
    RETURN_IF_ERROR(CheckSameDType(ctx, 0, 4));
    RETURN_IF_ERROR(CheckRank(ctx, 4, 2, "h-gate bias"));
    const SymbolicShape& rb = ctx.input_shape(4);
    if (!rb[0].is_const() || rb[0].const_value() != dirs || !rb[1].is_const() ||
        rb[1].const_value() != hidden) {
      return ctx.Error("h-gate bias " + ShapeToString(rb) + " is not [" + std::to_string(dirs) +
                       ", " + std::to_string(hidden) + "]");
    }
  }
  DType t = ctx.input_dtype(0);
  ctx.SetOutput(0, t, {xw[0], DimExpr(dirs), xw[1], DimExpr(hidden)});
  for (int i = 1; i < outs; ++i) ctx.SetOutput(i, t, state);
  return Status::Ok();
}

// Einsum: "ij,jk->ik", "...ii->...i", implicit output (labels used once, sorted). Ellipsis
// dims broadcast across operands.
Status EinsumRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(EinsumEquation eq, ParseEinsumEquation(ctx.node()));
  std::map<char, DimExpr> label_dim;
  std::optional<SymbolicShape> ellipsis;
  for (int t = 0; t < ctx.num_inputs(); ++t) {
    RETURN_IF_ERROR(CheckSameDType(ctx, 0, t));
    const EinsumEquation::Term& term = eq.inputs[t];
    const SymbolicShape& shape = ctx.input_shape(t);
    std::optional<int> ell_rank = term.EllipsisRank(static_cast<int>(shape.size()));
    if (!ell_rank) {
      return ctx.Error("equation '" + eq.text + "': operand " + std::to_string(t) +
                       " does not match shape " + ShapeToString(shape));
    }
    // In the order of the term (the order of the facts MergeDim and Broadcast record).
    int dim = 0;
    for (size_t c = 0; c <= term.labels.size(); ++c) {
      if (static_cast<int>(c) == term.ellipsis_at) {
        SymbolicShape e(shape.begin() + dim, shape.begin() + dim + *ell_rank);
        if (ellipsis) {
          ASSIGN_OR_RETURN(ellipsis, Broadcast(ctx, *ellipsis, e));
        } else {
          ellipsis = e;
        }
        dim += *ell_rank;
      }
      if (c == term.labels.size()) break;
      char l = term.labels[c];
      auto it = label_dim.find(l);
      if (it == label_dim.end()) {
        label_dim.emplace(l, shape[dim]);
      } else {
        ASSIGN_OR_RETURN(it->second,
                         MergeDim(ctx, it->second, shape[dim], std::string("label '") + l + "'"));
      }
      ++dim;
    }
  }
  SymbolicShape out;
  for (size_t c = 0; c <= eq.output.labels.size(); ++c) {
    if (static_cast<int>(c) == eq.output.ellipsis_at && ellipsis)
      out.insert(out.end(), ellipsis->begin(), ellipsis->end());
    if (c < eq.output.labels.size()) out.push_back(label_dim.at(eq.output.labels[c]));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// ---- Layout and resampling -------------------------------------------------------------------

StatusOr<DimExpr> DivideDim(const InferenceContext& ctx, const DimExpr& d, int64_t k,
                            std::string_view what) {
  if (d.is_const() && d.const_value() % k != 0)
    return ctx.Error(std::string(what) + " " + d.ToString() + " is not divisible by " +
                     std::to_string(k));
  return FloorDiv(d, DimExpr(k));
}

Status DepthToSpaceRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckRank(ctx, 0, 4, "input"));
  ASSIGN_OR_RETURN(int64_t b, ctx.GetRequiredInt("blocksize"));
  if (b <= 0 || b > (1 << 20))
    return ctx.Error("blocksize " + std::to_string(b) + " is out of range");
  const SymbolicShape& x = ctx.input_shape(0);
  ASSIGN_OR_RETURN(DimExpr c, DivideDim(ctx, x[1], b * b, "channels"));
  ctx.SetOutput(0, ctx.input_dtype(0), {x[0], c, x[2] * DimExpr(b), x[3] * DimExpr(b)});
  return Status::Ok();
}

Status SpaceToDepthRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckRank(ctx, 0, 4, "input"));
  ASSIGN_OR_RETURN(int64_t b, ctx.GetRequiredInt("blocksize"));
  if (b <= 0 || b > (1 << 20))
    return ctx.Error("blocksize " + std::to_string(b) + " is out of range");
  const SymbolicShape& x = ctx.input_shape(0);
  ASSIGN_OR_RETURN(DimExpr h, DivideDim(ctx, x[2], b, "height"));
  ASSIGN_OR_RETURN(DimExpr w, DivideDim(ctx, x[3], b, "width"));
  ctx.SetOutput(0, ctx.input_dtype(0), {x[0], x[1] * DimExpr(b * b), h, w});
  return Status::Ok();
}

// floor(d * scale) symbolically: exact for a constant d, an integral scale, or scale == 1/k.
std::optional<DimExpr> ScaleDim(const DimExpr& d, double scale) {
  if (d.is_const()) {
    double v = std::floor(static_cast<double>(d.const_value()) * scale);
    if (!(v < 4e18)) return std::nullopt;  // inf or too large: leave it to the run time
    return DimExpr(static_cast<int64_t>(v));
  }
  if (scale >= 1 && scale == std::floor(scale) && scale < 1e9)
    return d * DimExpr(static_cast<int64_t>(scale));
  double inv = 1.0 / scale;
  if (scale > 0 && inv == std::floor(inv) && inv < 1e9 && scale * inv == 1.0)
    return FloorDiv(d, DimExpr(static_cast<int64_t>(inv)));
  return std::nullopt;
}

Status ScaledOutput(InferenceContext& ctx, const std::vector<double>& scales) {
  const SymbolicShape& x = ctx.input_shape(0);
  if (scales.size() != x.size())
    return ctx.Error("has " + std::to_string(scales.size()) + " scales for rank " +
                     std::to_string(x.size()));
  SymbolicShape out;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(scales[i] > 0)) return ctx.Error("scales must be positive");
    std::optional<DimExpr> d = ScaleDim(x[i], scales[i]);
    out.push_back(d ? *d : ctx.FreshDim());
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// keep_aspect_ratio_policy's output length: round(scale * in), halves up (ONNX reference).
int64_t PolicyLength(double scale, int64_t in) {
  return static_cast<int64_t>(std::floor(scale * static_cast<double>(in) + 0.5));
}

// Resize with constant sizes: the given lengths (stretch), or one scale over the axes, the
// smallest (not_larger) or largest (not_smaller) sizes[i] / in, which needs those input dims
// constant too; otherwise their lengths are known at run time only.
void SizedOutput(InferenceContext& ctx, const ResizeAttributes& a,
                 const std::vector<DimExpr>& sizes, SymbolicShape& out) {
  const size_t n = a.axes.size();
  if (a.policy == AspectPolicy::kStretch) {
    for (size_t i = 0; i < n; ++i) out[a.axes[i]] = sizes[i];
    return;
  }
  bool known = true;
  double scale = a.policy == AspectPolicy::kNotLarger ? INFINITY : 0;
  for (size_t i = 0; i < n && known; ++i) {
    const DimExpr& in = out[a.axes[i]];
    known = in.is_const() && sizes[i].is_const() && in.const_value() > 0;
    if (!known) break;
    double r = static_cast<double>(sizes[i].const_value()) / in.const_value();
    scale = a.policy == AspectPolicy::kNotLarger ? std::min(scale, r) : std::max(scale, r);
  }
  for (size_t i = 0; i < n; ++i) {
    DimExpr& d = out[a.axes[i]];
    if (!known) {
      d = ctx.FreshDim();
      ctx.MarkDataDependent();
    } else {
      d = DimExpr(PolicyLength(scale, d.const_value()));
    }
  }
}

// Resize: opset 10 (X, scales); 11+ (X, roi, scales, sizes); 18+ the `axes` scales, sizes and
// roi describe (other dims are kept) and keep_aspect_ratio_policy. Output from constant sizes,
// else from constant scales; otherwise data-dependent.
Status ResizeRule(InferenceContext& ctx) {
  int rank = ctx.input_rank(0);
  ASSIGN_OR_RETURN(ResizeAttributes a, ParseResizeAttributes(ctx.node(), rank));
  const size_t n = a.axes.size();
  int scales_in = ctx.opset() < 11 ? 1 : 2, sizes_in = 3;
  SymbolicShape out = ctx.input_shape(0);
  if (ctx.opset() >= 11 && ctx.has_input(sizes_in) && ctx.input_rank(sizes_in) == 1 &&
      ctx.input_shape(sizes_in)[0] != DimExpr(0)) {
    if (std::optional<std::vector<DimExpr>> sizes = ctx.InputValues(sizes_in)) {
      if (sizes->size() != n)
        return ctx.Error("sizes has " + std::to_string(sizes->size()) + " values for " +
                         std::to_string(n) + " axes");
      SizedOutput(ctx, a, *sizes, out);
      ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
      return Status::Ok();
    }
  } else if (const TensorData* scales = ctx.input_data(scales_in)) {
    std::vector<double> given = scales->ToDoubles();
    if (given.size() != n)
      return ctx.Error("has " + std::to_string(given.size()) + " scales for " + std::to_string(n) +
                       " axes");
    std::vector<double> full(rank, 1.0);
    for (size_t i = 0; i < n; ++i) full[a.axes[i]] = given[i];
    return ScaledOutput(ctx, full);
  }
  ctx.MarkDataDependent();
  for (int d : a.axes) out[d] = ctx.FreshDim();
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

Status UpsampleRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(std::optional<std::vector<float>> attr, ctx.GetFloats("scales"));
  if (attr) return ScaledOutput(ctx, std::vector<double>(attr->begin(), attr->end()));
  if (const TensorData* scales = ctx.input_data(1)) return ScaledOutput(ctx, scales->ToDoubles());
  ctx.MarkDataDependent();
  ctx.SetOutput(0, ctx.input_dtype(0), FreshShape(ctx, ctx.input_rank(0)));
  return Status::Ok();
}

// ---- Sampling and linear algebra (GridSample, RoiAlign, MaxUnpool, Det) ---------------------

// GridSample: X [N, C, H, W] sampled at grid [N, Ho, Wo, 2] -> [N, C, Ho, Wo]. kiln implements
// the 2-D form (opset 20 also defines N-d).
Status GridSampleRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckRank(ctx, 0, 4, "X"));
  RETURN_IF_ERROR(CheckRank(ctx, 1, 4, "grid"));
  const SymbolicShape& x = ctx.input_shape(0);
  const SymbolicShape& g = ctx.input_shape(1);
  ASSIGN_OR_RETURN(DimExpr n, MergeDim(ctx, x[0], g[0], "X batch vs grid batch"));
  RETURN_IF_ERROR(MergeDim(ctx, g[3], DimExpr(2), "grid's last dim").status());
  ctx.SetOutput(0, ctx.input_dtype(0), {n, x[1], g[1], g[2]});
  return Status::Ok();
}

// RoiAlign: X [N, C, H, W], rois [R, 4], batch_indices [R] -> [R, C, output_height,
// output_width].
Status RoiAlignRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckRank(ctx, 0, 4, "X"));
  RETURN_IF_ERROR(CheckRank(ctx, 1, 2, "rois"));
  RETURN_IF_ERROR(CheckRank(ctx, 2, 1, "batch_indices"));
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  const SymbolicShape& rois = ctx.input_shape(1);
  RETURN_IF_ERROR(MergeDim(ctx, rois[1], DimExpr(4), "rois' last dim").status());
  ASSIGN_OR_RETURN(DimExpr r, MergeDim(ctx, rois[0], ctx.input_shape(2)[0],
                                       "rois count vs batch_indices count"));
  ASSIGN_OR_RETURN(int64_t oh, ctx.GetInt("output_height", 1));
  ASSIGN_OR_RETURN(int64_t ow, ctx.GetInt("output_width", 1));
  if (oh < 1 || ow < 1) return ctx.Error("output_height and output_width must be >= 1");
  ctx.SetOutput(0, ctx.input_dtype(0), {r, ctx.input_shape(0)[1], DimExpr(oh), DimExpr(ow)});
  return Status::Ok();
}

// MaxUnpool: output_shape (input 2) when given, else per spatial dim
// (in - 1) * stride + kernel - pad_begin - pad_end.
Status MaxUnpoolRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 3, "X"));
  int rank = ctx.input_rank(0);
  RETURN_IF_ERROR(CheckRank(ctx, 1, rank, "I"));
  if (ctx.has_input(2)) {
    if (std::optional<std::vector<DimExpr>> shape = ctx.InputValues(2)) {
      if (static_cast<int>(shape->size()) != rank) return ctx.Error("output_shape length");
      ctx.SetOutput(0, ctx.input_dtype(0), *shape);
    } else {
      ctx.MarkDataDependent();
      ctx.SetOutput(0, ctx.input_dtype(0), FreshShape(ctx, rank));
    }
    return Status::Ok();
  }
  ASSIGN_OR_RETURN(PoolAttributes a, ParsePoolAttributes(ctx.node(), rank - 2));
  const SymbolicShape& x = ctx.input_shape(0);
  SymbolicShape out = {x[0], x[1]};
  for (int i = 0; i < rank - 2; ++i) {
    out.push_back((x[i + 2] - DimExpr(1)) * DimExpr(a.strides[i]) +
                  DimExpr(a.kernel[i] - a.pads[i] - a.pads[i + rank - 2]));
  }
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// Col2Im-18: input [N, C * prod(block_shape), L] with the blocks of an image of image_shape
// (both 1-D int64 inputs of one length S) -> [N, C, image_shape...]. L must be the block count,
// prod over d of (image + pads - dilation * (block - 1) - 1) / stride + 1. Data-dependent when
// image_shape or block_shape is only known at run time.
Status Col2ImRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckRank(ctx, 0, 3, "input"));
  RETURN_IF_ERROR(CheckRank(ctx, 1, 1, "image_shape"));
  RETURN_IF_ERROR(CheckRank(ctx, 2, 1, "block_shape"));
  const DimExpr& len = ctx.input_shape(1)[0];
  if (!len.is_const())
    return ctx.UnsupportedError("image_shape needs a length known at compile time");
  ASSIGN_OR_RETURN(DimExpr s, MergeDim(ctx, len, ctx.input_shape(2)[0],
                                       "image_shape length vs block_shape length"));
  const int spatial = static_cast<int>(s.const_value());
  if (spatial < 1) return ctx.Error("image_shape must not be empty");
  ASSIGN_OR_RETURN(Col2ImAttributes attrs, ParseCol2ImAttributes(ctx.node(), spatial));
  const SymbolicShape& x = ctx.input_shape(0);
  std::optional<std::vector<DimExpr>> image = ctx.InputValues(1);
  std::optional<std::vector<int64_t>> block = ctx.InputConstInts(2);
  SymbolicShape out = {x[0], x[1]};
  if (!block) out[1] = ctx.FreshDim();
  if (block) {
    int64_t product = 1;
    for (int64_t b : *block) {
      if (b <= 0) return ctx.Error("block_shape " + IntsToString(*block) + " must be positive");
      product *= b;
    }
    ASSIGN_OR_RETURN(out[1], DivideDim(ctx, x[1], product, "channels"));
  }
  if (block && image) {
    DimExpr blocks(1);
    for (int d = 0; d < spatial; ++d) {
      DimExpr span = (*image)[d] + DimExpr(attrs.pads[d] + attrs.pads[d + spatial] -
                                           attrs.dilations[d] * ((*block)[d] - 1) - 1);
      DimExpr positions = FloorDiv(span, DimExpr(attrs.strides[d])) + DimExpr(1);
      if (positions.is_const() && positions.const_value() < 1)
        return ctx.Error("image dim " + std::to_string(d) + " (" + (*image)[d].ToString() +
                         ", padded) is smaller than its block");
      blocks = blocks * positions;
    }
    RETURN_IF_ERROR(MergeDim(ctx, x[2], blocks, "L vs the image's block count").status());
  } else {
    ctx.MarkDataDependent();
  }
  for (int d = 0; d < spatial; ++d) out.push_back(image ? (*image)[d] : ctx.FreshDim());
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(out));
  return Status::Ok();
}

// Det: [*, M, M] -> [*].
Status DetRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 2, "X"));
  SymbolicShape x = ctx.input_shape(0);
  RETURN_IF_ERROR(MergeDim(ctx, x[x.size() - 2], x[x.size() - 1], "rows vs columns").status());
  x.resize(x.size() - 2);
  ctx.SetOutput(0, ctx.input_dtype(0), std::move(x));
  return Status::Ok();
}

}  // namespace

void RegisterNnOps(OpRegistry& r) {
  auto add = [&r](OpDef d, DTypeSet types) {
    d.input0_types = types;
    MustRegister(r, std::move(d));
  };
  add(MakeDef("Conv", 1, kLatestOpset, ConvRule, 2, 3), kFloatTypes);
  add(MakeDef("ConvTranspose", 1, kLatestOpset, ConvTransposeRule, 2, 3), kFloatTypes);
  add(MakeDef("MaxPool", 1, kLatestOpset, PoolRule, 1, 1, 1, 2),
      kFloatTypes | DTypeBit(DType::kI8) | DTypeBit(DType::kU8));
  add(MakeDef("AveragePool", 1, kLatestOpset, PoolRule), kFloatTypes);
  // LpPool-1 and GlobalLpPool-1 take `p` as a float; kiln implements the integer `p` of 2+.
  add(MakeDef("LpPool", 2, kLatestOpset, PoolRule), kFloatTypes);
  for (const char* name : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
    add(MakeDef(name, name[6] == 'L' ? 2 : 1, kLatestOpset, GlobalPoolRule), kFloatTypes);
  add(MakeDef("BatchNormalization", 7, 13, BatchNormRule, 5, 5, 1, 5), kFloatTypes);
  add(MakeDef("BatchNormalization", 14, kLatestOpset, BatchNormRule, 5, 5, 1, 3), kFloatTypes);
  add(MakeDef("InstanceNormalization", 1, kLatestOpset, InstanceNormRule, 3, 3), kFloatTypes);
  add(MakeDef("LayerNormalization", 17, kLatestOpset, LayerNormRule, 2, 3, 1, 3), kFloatTypes);
  for (const char* name : {"LRN", "MeanVarianceNormalization", "LpNormalization"})
    add(MakeDef(name, name[0] == 'M' ? 9 : 1, kLatestOpset, SameAsInput0), kFloatTypes);
  add(MakeDef("Gemm", 7, kLatestOpset, GemmRule, 2, 3), kNumericTypes);
  add(MakeDef("MatMul", 1, kLatestOpset, MatMulRule, 2, 2), kNumericTypes);
  add(MakeDef("Einsum", 12, kLatestOpset, EinsumRule, 1, kVariadic), kNumericTypes);
  OpDef packed = MakeDef("PackedMatMul", 1, kLatestOpset, PackedMatMulRule, 2, 3);
  packed.domain = kKilnDomain;
  add(std::move(packed), DTypeBit(DType::kF32));
  OpDef recurrent = MakeDef("RecurrentSequence", 1, kLatestOpset, RecurrentSequenceRule, 2, 5, 2, 3);
  recurrent.domain = kKilnDomain;
  add(std::move(recurrent), kFloatTypes);
  add(MakeDef("DepthToSpace", 1, kLatestOpset, DepthToSpaceRule), kAllTypes);
  add(MakeDef("SpaceToDepth", 1, kLatestOpset, SpaceToDepthRule), kAllTypes);
  add(MakeDef("Resize", 10, 10, ResizeRule, 2, 2), kAllTypes);
  add(MakeDef("Resize", 11, kLatestOpset, ResizeRule, 1, 4), kAllTypes);
  add(MakeDef("Upsample", 7, 9, UpsampleRule, 1, 2), kAllTypes);
  add(MakeDef("GridSample", 16, kLatestOpset, GridSampleRule, 2, 2), kFloatTypes);
  add(MakeDef("RoiAlign", 10, kLatestOpset, RoiAlignRule, 3, 3), kFloatTypes);
  add(MakeDef("MaxUnpool", 9, kLatestOpset, MaxUnpoolRule, 2, 3), kFloatTypes);
  add(MakeDef("Det", 11, kLatestOpset, DetRule), kFloatTypes);
  add(MakeDef("Col2Im", 18, kLatestOpset, Col2ImRule, 3, 3), kNumericTypes);
}

}  // namespace kiln::compiler::ops
