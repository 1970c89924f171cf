// The plan builder's windowed ops: convolution and pooling (ONNX windows -> oneDNN paddings).
#include <algorithm>
#include <string>
#include <vector>

#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using dt = memory::data_type;

// ONNX window semantics (compiler/ops/nn.cc WindowOutput) -> oneDNN paddings and output dims.
StatusOr<Window> ResolveWindow(const Op& op, const Dims& in, const Dims& kernel, bool pool) {
  Window w;
  size_t n = in.size();
  for (size_t i = 0; i < n; ++i) {
    int64_t s = op.strides[i], d = op.dilations[i], ext = (kernel[i] - 1) * d + 1;
    int64_t pl = op.pads[i], pr = op.pads[i + n], out;
    if (op.auto_pad == AutoPad::kSameUpper || op.auto_pad == AutoPad::kSameLower) {
      out = (in[i] + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + ext - in[i]);
      pl = op.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      pr = total - pl;
    } else {
      if (op.auto_pad == AutoPad::kValid) pl = pr = 0;
      int64_t span = in[i] + pl + pr - ext;
      if (span < 0)
        return InvalidArgument("spatial dim " + std::to_string(i) + ": padded input " +
                               std::to_string(in[i] + pl + pr) +
                               " is smaller than the kernel extent " + std::to_string(ext));
      out = (pool && op.ceil_mode ? (span + s - 1) / s : span / s) + 1;
      if (pool && op.ceil_mode) {
        int64_t eff = (out - 1) * s + ext - in[i] - pl;
        if (eff > pr && op.pool == PoolAlg::kAvgIncludePad)
          return Unsupported("ceil_mode with count_include_pad");
        pr = std::max(pr, eff);
      }
    }
    w.strides.push_back(s);
    w.dilations.push_back(d - 1);
    w.pad_l.push_back(pl);
    w.pad_r.push_back(pr);
    w.out.push_back(out);
  }
  return w;
}

}  // namespace

// Checks a Conv's operands against each other (input channels against W and the group, a
// non-empty W that matches kernel_shape, one bias value per output channel) and resolves its
// window; `*out` receives the output dims.
StatusOr<Window> ConvWindow(const Op& op, const Dims& xd, const Dims& wd, const Dims* bias,
                            Dims* out) {
  int64_t g = op.group;
  if (xd[1] != wd[1] * g || wd[0] % g != 0)
    return InvalidArgument("input channels " + std::to_string(xd[1]) + " vs W " + DimsToString(wd) +
                           " with group " + std::to_string(g));
  Dims kernel = Sub(wd, 2, wd.size());
  if (std::find(kernel.begin(), kernel.end(), 0) != kernel.end() || wd[0] == 0)
    return InvalidArgument("W " + DimsToString(wd) + " is empty");
  if (!op.kernel.empty() && op.kernel != kernel)
    return InvalidArgument("kernel_shape does not match W " + DimsToString(wd));
  ASSIGN_OR_RETURN(Window win, ResolveWindow(op, Sub(xd, 2, xd.size()), kernel, false));
  *out = {xd[0], wd[0]};
  out->insert(out->end(), win.out.begin(), win.out.end());
  if (bias != nullptr && *bias != Dims{wd[0]})
    return InvalidArgument("bias " + DimsToString(*bias) + " for " + std::to_string(wd[0]) +
                           " output channels");
  return win;
}

Dims GroupedWeightDims(const Dims& wd, int64_t group) {
  if (group <= 1) return wd;
  Dims gw = {group, wd[0] / group};
  gw.insert(gw.end(), wd.begin() + 1, wd.end());
  return gw;
}

namespace {

// ONNX weights `w` [O, I / g, k...] of `g` groups as the weights of g / 2 groups, each pair of
// groups one block-diagonal group with zeros across the pair: [O, 2 * I / g, k...].
std::vector<float> PairGroups(const float* w, const Dims& wd, int64_t g) {
  int64_t per_group = wd[0] / g, in = wd[1], k = Product(Sub(wd, 2, wd.size()));
  std::vector<float> paired(static_cast<size_t>(wd[0] * 2 * in * k), 0.0f);
  for (int64_t o = 0; o < wd[0]; ++o) {
    int64_t half = (o / per_group) % 2;
    std::copy(w + o * in * k, w + (o + 1) * in * k, paired.begin() + (o * 2 + half) * in * k);
  }
  return paired;
}

// Whether a binary post-op of `op` (a kBinary, or a sum after another sum, which PostOps adds
// as one) has an operand of the output's full shape `out`.
bool HasFullBinaryOperand(const Op& op, const Dims& out, const std::vector<Dims>& dims) {
  bool sum = false;
  for (const PostOp& p : op.post_ops) {
    const bool binary = p.kind == PostOpKind::kBinary || (p.kind == PostOpKind::kSum && sum);
    sum = sum || p.kind == PostOpKind::kSum;
    if (binary && AlignRank(dims[p.tensor], out.size()) == out) return true;
  }
  return false;
}

// oneDNN 2.6 on AVX2 has blocked (8-channel) grouped convolutions only for multiples of 8
// channels per group; with 4 (resnext50_32x4d's first stage: 128 channels in 32 groups) it runs
// gemm on plain layouts with reorders around. Pairing groups gives 8: twice the multiply-adds
// (the zeros), yet 1.4 ms instead of 2.3 ms plus two reorders for resnext's 56x56 ones. A
// non-finite input then also reaches the paired group's outputs (0 x Inf): those are NaN
// where they would be finite.
bool PairingGroupsPays(const Op& op, const Dims& wd, bool plain, bool constant) {
  int64_t g = op.group;
  return !plain && constant && g >= 2 && g % 2 == 0 && wd[1] % 8 != 0 && (2 * wd[1]) % 8 == 0 &&
         (2 * wd[0] / g) % 8 == 0;
}

// oneDNN picked a JIT convolution (not gemm, not reference code).
bool DirectJit(const dnnl::convolution_forward::primitive_desc& pd) {
  std::string impl = pd.impl_info_str();
  return impl.rfind("jit", 0) == 0;
}

// Whether a convolution with src dims `xd` and window `win` may run on a copy of its input
// padded beforehand: it is 1-D or 2-D, has some padding, and the copy is at most twice the
// input or the pads are asymmetric. (A causal TCN's dilated Conv1d pads only on the left:
// gemm on plain layouts too. Simplify folds such a Pad into the Conv, which would otherwise
// have been that same copy, so it is made whatever its size.)
// oneDNN 2.6's AVX2 direct convolution takes kernels wider than 7 only without padding (or at
// stride 1); otherwise it runs gemm on plain layouts. AlexNet's first layer (11x11, stride 4,
// pads 2, 3 -> 64 channels at 224x224) as gemm: 2.6 ms at one thread, 11 ms at two (loaded
// host, fastest of 30); on a padded copy as jit:avx2: 1.5 / 2.0 ms, and its output is
// channel-blocked, so the max pool after it runs blocked too (was oneDNN's simple_nchw).
bool ExplicitPaddingPays(const Dims& xd, const Window& win) {
  if (xd.size() != 3 && xd.size() != 4) return false;
  int64_t padded = xd[0] * xd[1], plain = Product(xd);
  bool any = false, asymmetric = false;
  for (size_t i = 0; i + 2 < xd.size(); ++i) {
    any = any || win.pad_l[i] != 0 || win.pad_r[i] != 0;
    asymmetric = asymmetric || win.pad_l[i] != win.pad_r[i];
    padded *= xd[i + 2] + win.pad_l[i] + win.pad_r[i];
  }
  return any && (padded <= 2 * plain || asymmetric);
}

// The window of a convolution run on a copy of its input (dims `xd`, window `win`) padded
// beforehand: no padding; `*padded` receives the copy's dims, `*offsets` the input's place.
Window Unpadded(const Dims& xd, const Window& win, Dims* padded, Dims* offsets) {
  Window unpadded = win;
  *padded = xd;
  offsets->assign(xd.size(), 0);
  for (size_t i = 0; i + 2 < xd.size(); ++i) {
    (*padded)[i + 2] += win.pad_l[i] + win.pad_r[i];
    (*offsets)[i + 2] = win.pad_l[i];
    unpadded.pad_l[i] = unpadded.pad_r[i] = 0;
  }
  return unpadded;
}

}  // namespace

int Builder::PadExplicitly(int32_t x, const Dims& xd, const MakeConvWindow& make, Window* win,
                           dnnl::convolution_forward::primitive_desc* pd) {
  if (r_.tensors[x].dtype != DType::kF32 || !ExplicitPaddingPays(xd, *win)) return -1;
  Dims padded, offsets;
  Window unpadded = Unpadded(xd, *win, &padded, &offsets);
  dnnl::convolution_forward::primitive_desc ppd;
  try {
    ppd = make(memory::desc(padded, dt::f32, memory::format_tag::any), unpadded);
  } catch (const dnnl::error&) {
    return -1;
  }
  if (!DirectJit(ppd)) return -1;
  // The border is the zeroed workspace's, never written: no other intermediate shares it.
  int buffer = NewWork(ppd.src_desc());
  pinned_.push_back(plan_->slots[buffer].buffer);
  AddReorder(Current(x, false), View(buffer, ppd.src_desc().submemory_desc(xd, offsets)));
  *win = unpadded;
  *pd = ppd;
  return buffer;
}

int Builder::PairedGroups(const Op& op, const MakeConv& make, const memory::desc& src_md,
                          dnnl::convolution_forward::primitive_desc* pd) {
  const Dims& wd = dims_[op.inputs[1]];
  Dims paired = wd;
  paired[1] *= 2;
  Dims gw = GroupedWeightDims(paired, op.group / 2);
  dnnl::convolution_forward::primitive_desc ppd;
  try {
    ppd = make(src_md, memory::desc(gw, dt::f32, memory::format_tag::any));
  } catch (const dnnl::error&) {
    return -1;  // the groups as they are
  }
  // A plain weights layout would be used in place (WeightCache), and the pairs are temporary.
  if (!DirectJit(ppd) || ppd.weights_desc() == PlainMd(gw)) return -1;
  std::vector<float> data =
      PairGroups(static_cast<const float*>(d_.constant_data[op.inputs[1]]), wd, op.group);
  Slot s{ppd.weights_desc(), Slot::Kind::kConst};
  s.ptr = weights_.Get(op_index_, PlainMd(gw), data.data(), ppd.weights_desc(), primitives_);
  *pd = ppd;
  return AddSlot(s);
}

memory::desc Builder::FullOperandLayout(const Op& op, const MakeConv& make,
                                        const MakeConvWindow& make_unpadded,
                                        const memory::desc& src_md, const memory::desc& w_md,
                                        const Window& win) {
  dnnl::convolution_forward::primitive_desc pd = make(src_md, w_md);
  const Dims& xd = dims_[op.inputs[0]];
  if (DirectJit(pd) || r_.tensors[op.inputs[0]].dtype != DType::kF32 ||
      !ExplicitPaddingPays(xd, win))
    return pd.dst_desc();
  Dims padded, offsets;
  Window unpadded = Unpadded(xd, win, &padded, &offsets);
  try {
    auto ppd = make_unpadded(memory::desc(padded, dt::f32, memory::format_tag::any), unpadded);
    if (DirectJit(ppd)) return ppd.dst_desc();
  } catch (const dnnl::error&) {
  }
  return pd.dst_desc();
}

// A depthwise 1-D convolution with constant weights and eltwise post-ops only (Conformer's
// and QuartzNet's): oneDNN 2.6 has no JIT depthwise kernel for 1-D and runs it as a gemm
// convolution on plain layouts (144 channels x 49 frames, kernel 15: 405 us a call); described
// as 2-D with H = 1 and on a copy padded beforehand (its depthwise kernel refuses pads of 7
// for a kernel of 15), it gets that kernel (10 us). A 3-D tensor [N, C, W] in abc or aBc8b
// holds the same bytes as [N, C, 1, W] in abcd or aBcd8b, so dst is a view; the padded copy
// is the reorder of src's view into the middle of a zeroed buffer, as PadExplicitly's. Returns
// false, having changed nothing, when the op is not one or oneDNN would not run it as a JIT
// kernel (the caller builds it as any other Conv).
bool Builder::DepthwiseConv1d(const Op& op, bool plain) {
  const int32_t x = op.inputs[0], w = op.inputs[1];
  const Dims& xd = dims_[x];
  const Dims& wd = dims_[w];
  if (plain || xd.size() != 3 || wd.size() != 3 || op.group < 2 || op.group != xd[1] ||
      wd[0] != op.group || wd[1] != 1 || d_.constant_data[w] == nullptr ||
      r_.tensors[x].dtype != DType::kF32)
    return false;
  for (const PostOp& p : op.post_ops) {
    if (p.kind != PostOpKind::kEltwise) return false;
  }
  const Dims* bias = op.inputs.size() == 3 ? &dims_[op.inputs[2]] : nullptr;
  Dims out;
  StatusOr<Window> win = ConvWindow(op, xd, wd, bias, &out);
  if (!win.ok()) return false;
  dnnl::primitive_attr attr = Attr();
  Args args;
  int32_t residual = -1;
  if (!PostOps(op, out, &attr, &args, &residual).ok() || residual >= 0 || !args.empty())
    return false;
  const int64_t pl = win->pad_l[0], pr = win->pad_r[0];
  const Dims x4 = {xd[0], xd[1], 1, xd[2]}, padded = {xd[0], xd[1], 1, xd[2] + pl + pr};
  const Dims o4 = {out[0], out[1], 1, out[2]}, gw = {op.group, 1, 1, 1, wd[2]};
  const int cur = Current(x, false);
  dnnl::convolution_forward::primitive_desc pd;
  memory::desc cur4, into, dst3;
  try {
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        memory::desc(padded, dt::f32, memory::format_tag::any),
        memory::desc(gw, dt::f32, memory::format_tag::any),
        bias != nullptr ? PlainMd({wd[0]}) : memory::desc(),
        memory::desc(o4, dt::f32, memory::format_tag::any), Dims{1, win->strides[0]},
        Dims{0, win->dilations[0]}, Dims{0, 0}, Dims{0, 0});
    pd = dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
    if (!DirectJit(pd)) return false;
    cur4 = Md(cur).reshape(x4);
    into = pd.src_desc().submemory_desc(x4, {0, 0, 0, pl});
    dst3 = pd.dst_desc().reshape(out);
  } catch (const dnnl::error&) {
    return false;
  }
  dims_[op.output] = out;
  // The border is the zeroed workspace's, never written: no other intermediate shares it.
  const int src = NewWork(pd.src_desc());
  pinned_.push_back(plan_->slots[src].buffer);
  AddReorder(View(cur, cur4), View(src, into));
  if (bias != nullptr) args.push_back({DNNL_ARG_BIAS, Plain(op.inputs[2])});
  args.push_back({DNNL_ARG_SRC, src});
  const int dst = Define(op.output, dst3);
  args.push_back({DNNL_ARG_DST, View(dst, pd.dst_desc())});
  args.push_back({DNNL_ARG_WEIGHTS, Weights(w, PlainMd(gw), pd.weights_desc())});
  AddPrimitive(dnnl::convolution_forward(pd), pd.scratchpad_desc().get_size(), std::move(args));
  return true;
}

Status Builder::Conv(const Op& op, bool plain) {
  if (DepthwiseConv1d(op, plain) || DwFused(op, plain)) return Status::Ok();
  int32_t x = op.inputs[0], w = op.inputs[1];
  const Dims& xd = dims_[x];
  Dims wd = dims_[w];
  const Dims* bias = op.inputs.size() == 3 ? &dims_[op.inputs[2]] : nullptr;
  Dims out;
  ASSIGN_OR_RETURN(Window win, ConvWindow(op, xd, wd, bias, &out));
  dims_[op.output] = out;
  std::optional<PrunedTaps> pruned;
  if (d_.constant_data[w] != nullptr) pruned = PadOnlyTaps(xd, wd, &win);
  if (pruned) wd = pruned->wd;
  Dims gw = GroupedWeightDims(wd, op.group);
  memory::desc w_plain = PlainMd(gw);
  memory::desc any_src(xd, dt::f32, memory::format_tag::any);
  memory::desc any_dst(out, dt::f32, memory::format_tag::any);
  memory::desc bias_md = op.inputs.size() == 3 ? PlainMd({wd[0]}) : memory::desc();
  dnnl::primitive_attr attr = Attr();
  Args args;
  int32_t residual = -1;
  auto make = [&](const memory::desc& src, const memory::desc& wmd) {
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference,
                                         dnnl::algorithm::convolution_direct, src, wmd, bias_md,
                                         any_dst, win.strides, win.dilations, win.pad_l, win.pad_r);
    return dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
  };
  auto make_unpadded = [&](const memory::desc& src, const Window& w) {
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src,
        memory::desc(gw, dt::f32, memory::format_tag::any), bias_md, any_dst, w.strides,
        w.dilations, w.pad_l, w.pad_r);
    return dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
  };
  memory::desc src_md = plain ? PlainMd(xd) : any_src;
  memory::desc w_md(gw, dt::f32, memory::format_tag::any);
  // oneDNN's JIT convolutions take a binary post-op operand of dst's full shape only in dst's
  // own layout; a row-major one (a residual added after a Relu, which cannot be a sum post-op
  // there: a TCN block) leaves only the gemm convolution, whose post-ops run element by element
  // (70 ms instead of 0.4 ms for 48x48x3 over 2000 steps). Such operands are reordered into
  // the layout the convolution picks without post-ops.
  memory::desc full_operand_md;
  if (!plain && HasFullBinaryOperand(op, out, dims_))
    full_operand_md = FullOperandLayout(op, make, make_unpadded, src_md, w_md, win);
  RETURN_IF_ERROR(PostOps(op, out, &attr, &args, &residual, /*collapsed=*/false,
                          full_operand_md.is_zero() ? nullptr : &full_operand_md));
  dnnl::convolution_forward::primitive_desc pd;
  int wts = -1;
  if (!pruned && PairingGroupsPays(op, wd, plain, d_.constant_data[w] != nullptr))
    wts = PairedGroups(op, make, src_md, &pd);
  memory::desc preferred;
  if (wts >= 0) {
    // pd runs the paired groups
  } else if (!pruned && !plain && d_.constant_data[w] &&
             weights_.Preferred(op_index_, &preferred)) {
    try {
      pd = make(src_md, preferred);
    } catch (const dnnl::error&) {
      pd = make(src_md, w_md);
    }
  } else {
    pd = make(src_md, plain ? w_plain : w_md);
  }
  int src = -1;
  if (wts < 0 && !pruned && !plain && !DirectJit(pd))
    src = PadExplicitly(x, xd, make_unpadded, &win, &pd);
  const bool padded = src >= 0;
  if (!padded) src = CurrentAs(x, plain, pd.src_desc());
  // Constant weights are no workspace buffer (DefineAccumulator need not see them): they are
  // placed once dst is, and a convolution split over output channels slices its own.
  const bool constant_w = d_.constant_data[w] != nullptr;
  if (!constant_w) wts = Weights(w, w_plain, pd.weights_desc());
  if (op.inputs.size() == 3) args.push_back({DNNL_ARG_BIAS, Plain(op.inputs[2])});
  args.push_back({DNNL_ARG_SRC, src});
  if (!constant_w) args.push_back({DNNL_ARG_WEIGHTS, wts});
  int dst = DefineAccumulator(op, pd.dst_desc(), residual, args);
  args.push_back({DNNL_ARG_DST, dst});
  if (constant_w) {
    if (wts < 0 && !pruned && !padded && !plain && SplitOverChannels(op, pd, attr, args))
      return Status::Ok();
    if (wts < 0 && pruned) {
      const float* full = static_cast<const float*>(d_.constant_data[w]);
      wts = OwnedWeights(w_plain, SliceTaps(full, dims_[w], *pruned), pd.weights_desc());
    }
    if (wts < 0) wts = Weights(w, w_plain, pd.weights_desc());
    args.push_back({DNNL_ARG_WEIGHTS, wts});
  }
  AddPrimitive(dnnl::convolution_forward(pd), pd.scratchpad_desc().get_size(), args);
  if (!pruned && !padded && op.group == 1 && d_.constant_data[w] != nullptr &&
      !SmallIc(op, pd, win) && !SmallOc(op, pd, win) && !plain)
    Winograd(op, pd, win);
  return Status::Ok();
}

Status Builder::Pool(const Op& op, bool plain) {
  int32_t x = op.inputs[0];
  const Dims& xd = dims_[x];
  size_t spatial = xd.size() - 2;
  Op window = op;
  Dims kernel = op.kernel;
  if (op.global) {
    kernel = Sub(xd, 2, xd.size());
    window.strides.assign(spatial, 1);
    window.dilations.assign(spatial, 1);
    window.pads.assign(2 * spatial, 0);
    window.auto_pad = AutoPad::kNotSet;
    window.ceil_mode = false;
  }
  ASSIGN_OR_RETURN(Window win, ResolveWindow(window, Sub(xd, 2, xd.size()), kernel, true));
  Dims out = {xd[0], xd[1]};
  out.insert(out.end(), win.out.begin(), win.out.end());
  dims_[op.output] = out;
  dnnl::algorithm alg = op.pool == PoolAlg::kMax ? dnnl::algorithm::pooling_max
                        : op.pool == PoolAlg::kAvgIncludePad
                            ? dnnl::algorithm::pooling_avg_include_padding
                            : dnnl::algorithm::pooling_avg_exclude_padding;
  int src = Current(x, plain);
  dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, Md(src),
                                      memory::desc(out, dt::f32, memory::format_tag::any),
                                      win.strides, kernel, win.dilations, win.pad_l, win.pad_r);
  dnnl::pooling_v2_forward::primitive_desc pd(desc, Attr(), Engine());
  int dst = Define(op.output, pd.dst_desc());
  AddPrimitive(dnnl::pooling_v2_forward(pd), pd.scratchpad_desc().get_size(),
               {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  if (op.pool == PoolAlg::kMax) {
    plan_->steps.back().max_pool =
        BlockedMaxPool::Make(Md(src), Md(dst), kernel, win.strides, win.dilations, win.pad_l);
  }
  return Status::Ok();
}

}  // namespace kiln::onednn::internal
