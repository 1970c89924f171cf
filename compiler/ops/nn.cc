// Neural-network ops: Conv, ConvTranspose, pooling, normalisation, Gemm, MatMul, Einsum,
// DepthToSpace/SpaceToDepth, Resize/Upsample.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

#include "compiler/ops/op_util.h"

namespace kiln::compiler::ops {
namespace {

// ---- Sliding windows (Conv, ConvTranspose, pooling) ------------------------------------------

struct Window {
  std::vector<int64_t> kernel, strides, dilations, pads;  // pads: all begins, then all ends
  std::string auto_pad;
  bool ceil_mode = false;
};

// Reads kernel_shape/strides/dilations/pads/auto_pad for `spatial` dims. `kernel_from_weights`
// supplies the kernel when the attribute is absent (Conv); pooling requires the attribute.
StatusOr<Window> ReadWindow(const InferenceContext& ctx, int spatial,
                            std::optional<std::vector<int64_t>> kernel_from_weights) {
  Window w;
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> k, ctx.GetInts("kernel_shape"));
  if (!k) k = kernel_from_weights;
  if (!k) return ctx.Error("kernel_shape is required");
  w.kernel = *k;
  auto list = [&](const char* name, int64_t fill, size_t n) -> StatusOr<std::vector<int64_t>> {
    ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> v, ctx.GetInts(name));
    if (!v || v->empty()) return std::vector<int64_t>(n, fill);
    if (v->size() != n)
      return ctx.Error(std::string(name) + " " + IntsToString(*v) + " must have " +
                       std::to_string(n) + " values");
    return *v;
  };
  if (w.kernel.size() != static_cast<size_t>(spatial))
    return ctx.Error("kernel_shape " + IntsToString(w.kernel) + " does not match " +
                     std::to_string(spatial) + " spatial dims");
  ASSIGN_OR_RETURN(w.strides, list("strides", 1, spatial));
  ASSIGN_OR_RETURN(w.dilations, list("dilations", 1, spatial));
  ASSIGN_OR_RETURN(w.pads, list("pads", 0, 2 * spatial));
  ASSIGN_OR_RETURN(w.auto_pad, ctx.GetString("auto_pad", "NOTSET"));
  ASSIGN_OR_RETURN(int64_t ceil_mode, ctx.GetInt("ceil_mode", 0));
  w.ceil_mode = ceil_mode != 0;
  for (int i = 0; i < spatial; ++i) {
    if (w.kernel[i] <= 0 || w.strides[i] <= 0 || w.dilations[i] <= 0)
      return ctx.Error("kernel_shape, strides and dilations must be positive");
    if (w.pads[i] < 0 || w.pads[i + spatial] < 0) return ctx.Error("pads must be non-negative");
  }
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" &&
      w.auto_pad != "VALID")
    return ctx.Error("unknown auto_pad '" + w.auto_pad + "'");
  return w;
}

// (kernel - 1) * dilation + 1, saturating (attributes are untrusted).
DimExpr KernelExtent(const Window& w, int i) {
  return (DimExpr(w.kernel[i]) - DimExpr(1)) * DimExpr(w.dilations[i]) + DimExpr(1);
}

// Output length of a window sliding over `in` (Conv and pooling). Error when a static input,
// padded, is shorter than the kernel's extent.
StatusOr<DimExpr> WindowOutput(const InferenceContext& ctx, const DimExpr& in, const Window& w,
                               int i, int spatial) {
  DimExpr k_eff = KernelExtent(w, i);
  DimExpr s(w.strides[i]);
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") return CeilDiv(in, s);
  DimExpr padded = in;
  if (w.auto_pad == "NOTSET") padded = padded + DimExpr(w.pads[i]) + DimExpr(w.pads[i + spatial]);
  if (padded.is_const() && padded.const_value() < k_eff.const_value()) {
    return ctx.Error("spatial dim " + std::to_string(i) + ": padded input " + padded.ToString() +
                     " is smaller than the kernel extent " + k_eff.ToString());
  }
  DimExpr span = padded - k_eff;
  return (w.ceil_mode ? CeilDiv(span, s) : FloorDiv(span, s)) + DimExpr(1);
}

Status ConvRule(InferenceContext& ctx) {
  RETURN_IF_ERROR(CheckSameDType(ctx, 0, 1));
  RETURN_IF_ERROR(CheckMinRank(ctx, 0, 3, "X"));
  const SymbolicShape& x = ctx.input_shape(0);
  const SymbolicShape& w = ctx.input_shape(1);
  int spatial = static_cast<int>(x.size()) - 2;
  RETURN_IF_ERROR(CheckRank(ctx, 1, static_cast<int>(x.size()), "W"));
  ASSIGN_OR_RETURN(int64_t group, ctx.GetInt("group", 1));
  if (group <= 0) return ctx.Error("group must be positive");
  RETURN_IF_ERROR(
      MergeDim(ctx, x[1], w[1] * DimExpr(group), "input channels vs W channels * group").status());
  std::optional<std::vector<int64_t>> kernel;
  bool static_kernel =
      std::all_of(w.begin() + 2, w.end(), [](const DimExpr& d) { return d.is_const(); });
  if (static_kernel) {
    kernel.emplace();
    for (int i = 0; i < spatial; ++i) kernel->push_back(w[i + 2].const_value());
  }
  ASSIGN_OR_RETURN(Window win, ReadWindow(ctx, spatial, kernel));
  if (kernel && win.kernel != *kernel)
    return ctx.Error("kernel_shape " + IntsToString(win.kernel) + " does not match W " +
                     ShapeToString(w));
  if (ctx.has_input(2)) {
    RETURN_IF_ERROR(CheckRank(ctx, 2, 1, "B"));
    RETURN_IF_ERROR(
        MergeDim(ctx, ctx.input_shape(2)[0], w[0], "B length vs output channels").status());
  }
  SymbolicShape out = {x[0], w[0]};
  for (int i = 0; i < spatial; ++i) {
    ASSIGN_OR_RETURN(DimExpr d, WindowOutput(ctx, x[i + 2], win, i, spatial));
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
  ASSIGN_OR_RETURN(int64_t group, ctx.GetInt("group", 1));
  if (group <= 0) return ctx.Error("group must be positive");
  RETURN_IF_ERROR(MergeDim(ctx, x[1], w[0], "input channels vs W dim 0").status());
  std::optional<std::vector<int64_t>> kernel;
  if (std::all_of(w.begin() + 2, w.end(), [](const DimExpr& d) { return d.is_const(); })) {
    kernel.emplace();
    for (int i = 0; i < spatial; ++i) kernel->push_back(w[i + 2].const_value());
  }
  ASSIGN_OR_RETURN(Window win, ReadWindow(ctx, spatial, kernel));
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> output_padding,
                   ctx.GetInts("output_padding"));
  if (!output_padding || output_padding->empty()) output_padding = std::vector<int64_t>(spatial, 0);
  if (output_padding->size() != static_cast<size_t>(spatial))
    return ctx.Error("output_padding has the wrong length");
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> output_shape, ctx.GetInts("output_shape"));
  DimExpr channels = w[1] * DimExpr(group);
  if (ctx.has_input(2)) {
    RETURN_IF_ERROR(CheckRank(ctx, 2, 1, "B"));
    RETURN_IF_ERROR(
        MergeDim(ctx, ctx.input_shape(2)[0], channels, "B length vs output channels").status());
  }
  SymbolicShape out = {x[0], channels};
  for (int i = 0; i < spatial; ++i) {
    if (output_shape && !output_shape->empty()) {
      // Either the spatial dims only, or the full output shape.
      size_t off = output_shape->size() == static_cast<size_t>(spatial) + 2 ? 2 : 0;
      if (output_shape->size() != static_cast<size_t>(spatial) + off)
        return ctx.Error("output_shape " + IntsToString(*output_shape) + " has the wrong length");
      out.push_back(DimExpr((*output_shape)[i + off]));
    } else if (win.auto_pad == "SAME_UPPER" || win.auto_pad == "SAME_LOWER") {
      out.push_back(x[i + 2] * DimExpr(win.strides[i]));
    } else {
      DimExpr pads = win.auto_pad == "VALID"
                         ? DimExpr(0)
                         : DimExpr(win.pads[i]) + DimExpr(win.pads[i + spatial]);
      out.push_back(DimExpr(win.strides[i]) * (x[i + 2] - DimExpr(1)) +
                    DimExpr((*output_padding)[i]) + KernelExtent(win, i) - pads);
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
  ASSIGN_OR_RETURN(Window win, ReadWindow(ctx, spatial, std::nullopt));
  SymbolicShape out = {x[0], x[1]};
  for (int i = 0; i < spatial; ++i) {
    ASSIGN_OR_RETURN(DimExpr d, WindowOutput(ctx, x[i + 2], win, i, spatial));
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

// Einsum: "ij,jk->ik", "...ii->...i", implicit output (labels used once, sorted).
Status EinsumRule(InferenceContext& ctx) {
  ASSIGN_OR_RETURN(std::string eq, ctx.GetString("equation", ""));
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  size_t arrow = eq.find("->");
  std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t start = 0;;) {
    size_t comma = lhs.find(',', start);
    terms.push_back(
        lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (static_cast<int>(terms.size()) != ctx.num_inputs())
    return ctx.Error("equation '" + eq + "' has " + std::to_string(terms.size()) +
                     " operands, the node has " + std::to_string(ctx.num_inputs()) + " inputs");
  std::map<char, DimExpr> label_dim;
  std::map<char, int> label_count;
  std::optional<SymbolicShape> ellipsis;
  for (int t = 0; t < ctx.num_inputs(); ++t) {
    RETURN_IF_ERROR(CheckSameDType(ctx, 0, t));
    const std::string& term = terms[t];
    const SymbolicShape& shape = ctx.input_shape(t);
    size_t dots = term.find("...");
    int letters = static_cast<int>(term.size()) - (dots == std::string::npos ? 0 : 3);
    int ell_rank = static_cast<int>(shape.size()) - letters;
    if (ell_rank < 0 || (dots == std::string::npos && ell_rank != 0))
      return ctx.Error("operand " + std::to_string(t) + " '" + term + "' does not match shape " +
                       ShapeToString(shape));
    int dim = 0;
    for (size_t c = 0; c < term.size(); ++c) {
      if (c == dots) {
        SymbolicShape e(shape.begin() + dim, shape.begin() + dim + ell_rank);
        if (ellipsis) {
          ASSIGN_OR_RETURN(ellipsis, Broadcast(ctx, *ellipsis, e));
        } else {
          ellipsis = e;
        }
        dim += ell_rank;
        c += 2;
        continue;
      }
      char l = term[c];
      if (!std::isalpha(static_cast<unsigned char>(l)))
        return ctx.Error("bad equation '" + eq + "'");
      auto it = label_dim.find(l);
      if (it == label_dim.end()) {
        label_dim.emplace(l, shape[dim]);
      } else {
        ASSIGN_OR_RETURN(it->second,
                         MergeDim(ctx, it->second, shape[dim], std::string("label '") + l + "'"));
      }
      ++label_count[l];
      ++dim;
    }
  }
  SymbolicShape out;
  if (arrow == std::string::npos) {
    if (ellipsis) out = *ellipsis;
    for (auto& [l, n] : label_count)
      if (n == 1) out.push_back(label_dim[l]);
  } else {
    std::string rhs = eq.substr(arrow + 2);
    for (size_t c = 0; c < rhs.size(); ++c) {
      if (rhs.compare(c, 3, "...") == 0) {
        if (ellipsis) out.insert(out.end(), ellipsis->begin(), ellipsis->end());
        c += 2;
        continue;
      }
      auto it = label_dim.find(rhs[c]);
      if (it == label_dim.end())
        return ctx.Error(std::string("output label '") + rhs[c] + "' is not an input label");
      out.push_back(it->second);
    }
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

// Resize: opset 10 (X, scales); 11+ (X, roi, scales, sizes). Output from constant sizes, else
// from constant scales; otherwise data-dependent.
Status ResizeRule(InferenceContext& ctx) {
  int rank = ctx.input_rank(0);
  int scales_in = ctx.opset() < 11 ? 1 : 2, sizes_in = 3;
  if (ctx.opset() >= 11 && ctx.has_input(sizes_in) && ctx.input_rank(sizes_in) == 1 &&
      ctx.input_shape(sizes_in)[0] != DimExpr(0)) {
    if (std::optional<std::vector<DimExpr>> sizes = ctx.InputValues(sizes_in)) {
      if (static_cast<int>(sizes->size()) != rank)
        return ctx.Error("sizes has " + std::to_string(sizes->size()) + " values for rank " +
                         std::to_string(rank));
      ctx.SetOutput(0, ctx.input_dtype(0), *sizes);
      return Status::Ok();
    }
  } else if (const TensorData* scales = ctx.input_data(scales_in)) {
    return ScaledOutput(ctx, scales->ToDoubles());
  }
  ctx.MarkDataDependent();
  ctx.SetOutput(0, ctx.input_dtype(0), FreshShape(ctx, rank));
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
  add(MakeDef("LpPool", 1, kLatestOpset, PoolRule), kFloatTypes);
  for (const char* name : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
    add(MakeDef(name, 1, kLatestOpset, GlobalPoolRule), kFloatTypes);
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
  add(MakeDef("DepthToSpace", 1, kLatestOpset, DepthToSpaceRule), kAllTypes);
  add(MakeDef("SpaceToDepth", 1, kLatestOpset, SpaceToDepthRule), kAllTypes);
  add(MakeDef("Resize", 10, 10, ResizeRule, 2, 2), kAllTypes);
  add(MakeDef("Resize", 11, kLatestOpset, ResizeRule, 1, 4), kAllTypes);
  add(MakeDef("Upsample", 7, 9, UpsampleRule, 1, 2), kAllTypes);
}

}  // namespace kiln::compiler::ops
