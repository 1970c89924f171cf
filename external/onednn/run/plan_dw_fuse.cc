// The plan builder's fusion of a 1x1 convolution with the 3x3 depthwise convolution after it
// (an inverted residual block's expand -> act -> depthwise -> act) into one oneDNN primitive:
// the 1x1 with a depthwise post-op (dnnl::post_ops::append_dw), post-op chain [the 1x1's
// eltwise..., dw, the depthwise's eltwise...]. oneDNN 2.6's jit_1x1 (AVX2) then computes a few
// rows of the expanded tensor into a per-thread scratch buffer and runs its row-wise
// depthwise kernel on them: the expanded tensor (6x the block's channels) is never written to
// memory and read back, and at two threads both halves run on the thread that wrote their rows
// (unfused, jit_1x1 splits over positions and jit_dw over channel blocks, so the depthwise read
// half its input from the other core's cache).
//
// oneDNN declines the fusion (the builder then keeps two steps) unless: f32, 2-D, no AVX-512
// (jit_avx2_1x1 only), the expanded tensor larger than twice the L2 of the team (per-core L2
// x threads), its channels a multiple of 8, no sum post-op, kernel 3, pads 1, stride 1 or 2.
// A timed trial guards the rest (the fusion computes the 1x1 in the depthwise's row order and
// can lose at many channels), once per shape and team size in a process.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using dt = memory::data_type;

constexpr int kDwWeights = DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS;
constexpr int kDwBias = DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_BIAS;

// The trial's answers by shape (dims of the three tensors, stride, biases, post-ops, team
// size), once per process (ChoiceMemo).
ChoiceMemo<bool>& Memo() {
  static ChoiceMemo<bool>* memo = new ChoiceMemo<bool>();
  return *memo;
}

bool OnlyEltwise(const Op& op) {
  for (const PostOp& p : op.post_ops) {
    if (p.kind != PostOpKind::kEltwise) return false;
  }
  return true;
}

void AppendEltwise(const Op& op, dnnl::post_ops* po) {
  for (const PostOp& p : op.post_ops)
    po->append_eltwise(1.0f, EltwiseAlgorithm(p.eltwise), p.alpha, p.beta);
}

std::string PostOpKey(const Op& op) {
  std::string key;
  for (const PostOp& p : op.post_ops)
    key += std::to_string(static_cast<int>(p.eltwise)) + ":" + std::to_string(p.alpha) + ":" +
           std::to_string(p.beta) + ",";
  return key;
}

// oneDNN's implementation is reference code, or no JIT 1x1 with the depthwise kernel.
bool FusedJit(const dnnl::convolution_forward::primitive_desc& pd) {
  const std::string impl = pd.impl_info_str();
  return impl.rfind("jit_1x1", 0) == 0 && impl.find("ref") == std::string::npos;
}

// Runs `prim` on trial buffers for each of its operands in `pd` (weights and biases included:
// speed does not depend on their values); the fastest of three runs after a warm-up.
struct TrialRun {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
};

TrialRun TrialOf(const dnnl::convolution_forward::primitive_desc& pd,
                 std::vector<std::shared_ptr<void>>* owned, const std::vector<int>& extra,
                 memory src) {
  TrialRun t{dnnl::convolution_forward(pd), {}};
  auto add = [&](int arg, const memory::desc& md) {
    if (md.is_zero()) return;
    t.args.emplace(arg, memory(md, Engine(), TrialBuffer(md.get_size(), owned)));
  };
  if (src) {
    t.args.emplace(DNNL_ARG_SRC, src);
  } else {
    add(DNNL_ARG_SRC, pd.src_desc());
  }
  add(DNNL_ARG_WEIGHTS, pd.weights_desc());
  add(DNNL_ARG_BIAS, pd.bias_desc());
  add(DNNL_ARG_DST, pd.dst_desc());
  add(DNNL_ARG_SCRATCHPAD, pd.scratchpad_desc());
  for (int arg : extra) add(arg, pd.query_md(dnnl::query::exec_arg_md, arg));
  return t;
}

}  // namespace

bool Builder::DwFused(const Op& op, bool plain) {
  const KernelMode mode = KernelModeFromEnv("KILN_ONEDNN_DW_FUSE");
  const size_t next_index = static_cast<size_t>(op_index_) + 1;
  if (mode == KernelMode::kOff || plain || next_index >= r_.ops.size()) return false;
  const Op& dw = r_.ops[next_index];
  // The 1x1: f32 2-D, constant weights, group 1, stride 1, no padding, eltwise post-ops only.
  if (op.inputs.size() < 2 || dw.kind != OpKind::kConv || dw.inputs.size() < 2 ||
      op.group != 1 || !OnlyEltwise(op) || !OnlyEltwise(dw))
    return false;
  const int32_t x = op.inputs[0], w = op.inputs[1], dw_w = dw.inputs[1];
  const Dims& xd = dims_[x];
  const Dims& wd = dims_[w];
  if (xd.size() != 4 || wd.size() != 4 || wd[2] != 1 || wd[3] != 1 ||
      r_.tensors[x].dtype != DType::kF32 || r_.tensors[w].dtype != DType::kF32 ||
      d_.constant_data[w] == nullptr)
    return false;
  const Dims* bias = op.inputs.size() == 3 ? &dims_[op.inputs[2]] : nullptr;
  Dims mid;
  StatusOr<Window> win = ConvWindow(op, xd, wd, bias, &mid);
  if (!win.ok()) return false;  // Conv reports it
  for (size_t i = 0; i < 2; ++i) {
    if (win->strides[i] != 1 || win->pad_l[i] != 0 || win->pad_r[i] != 0) return false;
  }
  // The intermediate: read by the depthwise alone (no other op, post-op or region output).
  if (dw.inputs[0] != op.output || readers_[op.output] != 1 || output_index_[op.output] >= 0)
    return false;
  // The depthwise: 3x3 over every channel, constant f32 weights, pads 1, stride 1 or 2,
  // dilation 1.
  const Dims& dwd = dims_[dw_w];
  const int64_t c = mid[1];
  if (dw.group != c || dwd != Dims{c, 1, 3, 3} || r_.tensors[dw_w].dtype != DType::kF32 ||
      d_.constant_data[dw_w] == nullptr)
    return false;
  if (dw.inputs.size() == 3 && r_.tensors[dw.inputs[2]].dtype != DType::kF32) return false;
  const Dims* dw_bias = dw.inputs.size() == 3 ? &dims_[dw.inputs[2]] : nullptr;
  Dims out;
  StatusOr<Window> dw_win = ConvWindow(dw, mid, dwd, dw_bias, &out);
  if (!dw_win.ok()) return false;
  const int64_t stride = dw_win->strides[0];
  if (stride != 1 && stride != 2) return false;
  for (size_t i = 0; i < 2; ++i) {
    if (dw_win->strides[i] != stride || dw_win->dilations[i] != 0 || dw_win->pad_l[i] != 1 ||
        dw_win->pad_r[i] != 1)
      return false;
  }

  memory::desc bias_md = bias != nullptr ? PlainMd({wd[0]}) : memory::desc();
  dnnl::convolution_forward::primitive_desc fused;
  try {
    dnnl::primitive_attr attr = Attr();
    dnnl::post_ops po;
    AppendEltwise(op, &po);
    po.append_dw(dt::f32, dw_bias != nullptr ? dt::f32 : dt::undef, dt::f32, 3, stride, 1, 0, {});
    AppendEltwise(dw, &po);
    attr.set_post_ops(po);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
        memory::desc(xd, dt::f32, memory::format_tag::any),
        memory::desc(wd, dt::f32, memory::format_tag::any), bias_md,
        memory::desc(mid, dt::f32, memory::format_tag::any), win->strides, win->dilations,
        win->pad_l, win->pad_r);
    fused = dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
    if (!FusedJit(fused) || fused.dst_desc().dims() != out) return false;
  } catch (const dnnl::error&) {
    return false;  // oneDNN declines the fusion here
  }

  if (mode == KernelMode::kTrial) {
    const std::string key = DimsToString(xd) + DimsToString(mid) + DimsToString(out) +
                            (bias ? "b" : "") + (dw_bias ? "b" : "") + PostOpKey(op) + "|" +
                            PostOpKey(dw) + "/" + std::to_string(omp_get_max_threads());
    bool faster = false;
    if (!Memo().Find(key, &faster)) {
      faster = FusionFaster(op, dw, fused, *win, *dw_win, mid, out);
      Memo().Record(key, faster);
    }
    if (!faster) return false;
  }

  // The step: src in the layout the fused primitive asked for, both ops' constant weights in
  // theirs (cached per op), dst the depthwise's output.
  dims_[op.output] = mid;
  dims_[dw.output] = out;
  Args args;
  args.push_back({DNNL_ARG_SRC, CurrentAs(x, false, fused.src_desc())});
  args.push_back({DNNL_ARG_WEIGHTS, Weights(w, PlainMd(wd), fused.weights_desc())});
  if (bias != nullptr) args.push_back({DNNL_ARG_BIAS, Plain(op.inputs[2])});
  {
    // The depthwise's weights under its own op in the weight cache (Weights files them under
    // op_index_, the 1x1's).
    Slot s{fused.query_md(dnnl::query::exec_arg_md, kDwWeights), Slot::Kind::kConst};
    plan_->weights.push_back(weights_.Share(static_cast<int>(next_index),
                                            PlainMd({c, 1, 1, 3, 3}), d_.constant_data[dw_w],
                                            s.md, primitives_));
    s.ptr = plan_->weights.back().get();
    args.push_back({kDwWeights, AddSlot(s)});
  }
  if (dw_bias != nullptr) args.push_back({kDwBias, Plain(dw.inputs[2])});
  args.push_back({DNNL_ARG_DST, Define(dw.output, fused.dst_desc())});
  AddPrimitive(dnnl::convolution_forward(fused), fused.scratchpad_desc().get_size(),
               std::move(args));
  plan_->steps.back().fused_dw = static_cast<int>(next_index);
  skip_next_ = true;
  return true;
}

// Times the fused primitive against the two it replaces (the 1x1 with its post-ops, then the
// depthwise with its own on the 1x1's output layout, as Conv would build them), each on trial
// buffers at the real shapes; true when the fused one is more than 5% faster. Where it wins it
// wins by more (mobilenet_v2's 16 -> 96 at 112x112 then a stride-2 depthwise, one thread:
// 760-830 us fused, 925 us as two steps; `kiln profile --iters 30`, chrt -f 50); at 56x56x144
// it measured 0.98-1.04 of the two steps, where a trial under load picks either way.
bool Builder::FusionFaster(const Op& op, const Op& dw,
                           const dnnl::convolution_forward::primitive_desc& fused,
                           const Window& win, const Window& dw_win, const Dims& mid,
                           const Dims& out) {
  const Dims& wd = dims_[op.inputs[1]];
  const Dims gw = {mid[1], 1, 1, 3, 3};
  std::vector<std::shared_ptr<void>> owned;
  TrialRun one, two, both;
  try {
    auto make = [&](const Op& o, const memory::desc& src, const memory::desc& wmd,
                    const Dims& dst, const Window& w) {
      dnnl::primitive_attr attr = Attr();
      dnnl::post_ops po;
      AppendEltwise(o, &po);
      attr.set_post_ops(po);
      memory::desc b = o.inputs.size() == 3 ? PlainMd({wmd.dims()[0]}) : memory::desc();
      dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wmd, b,
          memory::desc(dst, dt::f32, memory::format_tag::any), w.strides, w.dilations, w.pad_l,
          w.pad_r);
      return dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
    };
    auto pd1 = make(op, fused.src_desc(), memory::desc(wd, dt::f32, memory::format_tag::any),
                    mid, win);
    auto pd2 = make(dw, pd1.dst_desc(), memory::desc(gw, dt::f32, memory::format_tag::any), out,
                    dw_win);
    one = TrialOf(pd1, &owned, {}, memory());
    two = TrialOf(pd2, &owned, {}, one.args.at(DNNL_ARG_DST));
    both = TrialOf(fused, &owned, {kDwWeights, kDwBias}, memory());
    if (dw.inputs.size() != 3) both.args.erase(kDwBias);
  } catch (const dnnl::error&) {
    return false;  // nothing to hold it against: keep the two steps
  }
  dnnl::stream stream(Engine());
  auto run_apart = [&] {
    one.prim.execute(stream, one.args);
    two.prim.execute(stream, two.args);
    stream.wait();
  };
  auto run_fused = [&] { both.prim.execute(stream, both.args), stream.wait(); };
  // In turns, so a burst of load on a shared host slows both sides rather than one.
  double apart = 1e30, fused_seconds = 1e30;
  for (int round = 0; round < 3; ++round) {
    apart = std::min(apart, Fastest(run_apart, 1));
    fused_seconds = std::min(fused_seconds, Fastest(run_fused, 1));
  }
  return fused_seconds < 0.95 * apart;
}

}  // namespace kiln::onednn::internal
