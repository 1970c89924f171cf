// The plan builder's 1x1 convolutions on small images split over output channels: one
// primitive per thread, each computing its own channel range, run side by side (Step::team).
#include <omp.h>

#include <string>
#include <vector>

#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using Kind = Slot::Kind;

// Below this many output positions (N * H * W) and above this many weights, oneDNN 2.6's AVX2
// 1x1 convolution splits the positions over the team, so every thread streams all the weights
// (400 KB and more: most of a 512 KiB L2 on this class of core); a thread per channel range
// streams only its share. Thread CPU time per run at 2 threads (OMP_WAIT_POLICY=passive, so a
// host at load 8-14 from other processes counts little), slowest thread: regnet_x_400mf's
// 400 -> 400 at 7x7 103 -> 92 us, efficientnet_v2_s's 1536 -> 256 at 6x6 174 -> 157 us,
// 1280 -> 320 at 7x7 270 -> 231 us; 224 -> 224 at 7x7 (50 K weights) and 960 -> 160 at 12x12
// gained nothing.
constexpr int64_t kMaxPositions = 64;
constexpr int64_t kMinWeights = 100 * 1024;

// The conv's src is [1, C, H, W] read with a 1x1 kernel at stride 1 without padding, groups 1.
bool PointwiseSingleImage(const Op& op, const Dims& xd, const Dims& wd) {
  if (xd.size() != 4 || xd[0] != 1 || op.group != 1 || wd[2] != 1 || wd[3] != 1) return false;
  for (int64_t s : op.strides) {
    if (s != 1) return false;
  }
  for (int64_t p : op.pads) {
    if (p != 0) return false;
  }
  return op.auto_pad == AutoPad::kNotSet || op.auto_pad == AutoPad::kValid;
}

}  // namespace

bool SplitOverChannelsPays(const Op& op, const Dims& xd, const Dims& wd, int threads) {
  if (threads < 2 || !PointwiseSingleImage(op, xd, wd)) return false;
  const int64_t positions = xd[2] * xd[3], blocks = wd[0] / 8;
  return wd[0] % 8 == 0 && blocks >= threads && positions <= kMaxPositions &&
         wd[0] * wd[1] >= kMinWeights;
}

std::vector<int64_t> ChannelSplit(int64_t channels, int parts) {
  std::vector<int64_t> bounds = {0};
  const int64_t blocks = channels / 8;
  for (int p = 1; p <= parts; ++p) bounds.push_back(blocks * p / parts * 8);
  return bounds;
}

int Builder::SliceOf(int slot, const memory::desc& md, size_t bytes) {
  Slot s = plan_->slots[slot];
  if (s.kind == Kind::kConst) {
    s.ptr = static_cast<uint8_t*>(s.ptr) + bytes;
  } else if (s.kind == Kind::kWork && s.buffer >= 0) {
    s.within += bytes;
  } else {
    return -1;  // a caller's tensor, bound per call
  }
  s.md = md;
  return AddSlot(s);
}

bool Builder::SplitOverChannels(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                                const dnnl::primitive_attr& attr, const Args& args) {
  const Dims& xd = dims_[op.inputs[0]];
  const Dims& wd = dims_[op.inputs[1]];
  const int threads = omp_get_max_threads();
  if (d_.constant_data[op.inputs[1]] == nullptr || !SplitOverChannelsPays(op, xd, wd, threads))
    return false;
  const Dims out = pd.dst_desc().dims();
  int src = -1, dst = -1, bias = -1;
  for (const auto& [arg, slot] : args) {
    if (arg == DNNL_ARG_SRC) src = slot;
    else if (arg == DNNL_ARG_DST) dst = slot;
    else if (arg == DNNL_ARG_BIAS) bias = slot;
    else if (arg != DNNL_ARG_WEIGHTS) return false;  // a binary post-op's operand
  }
  if (pd.dst_desc() != memory::desc(out, dt::f32, memory::format_tag::aBcd8b)) return false;
  // dst and bias are sliced by offset: an intermediate or a constant, not a caller's tensor.
  auto sliceable = [&](int slot) {
    const Slot& s = plan_->slots[slot];
    return s.kind == Kind::kConst || (s.kind == Kind::kWork && s.buffer >= 0);
  };
  if (src < 0 || dst < 0 || !sliceable(dst) || (bias >= 0 && !sliceable(bias))) return false;
  const std::vector<int64_t> bounds = ChannelSplit(wd[0], threads);
  auto dst_md = [&](int p) {
    return memory::desc({1, bounds[p + 1] - bounds[p], out[2], out[3]}, dt::f32,
                        memory::format_tag::aBcd8b);
  };
  auto bias_md = [&](int p) {
    return bias >= 0 ? PlainMd({bounds[p + 1] - bounds[p]}) : memory::desc();
  };
  std::vector<dnnl::convolution_forward::primitive_desc> parts;
  for (int p = 0; p < threads; ++p) {
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, pd.src_desc(),
        memory::desc({bounds[p + 1] - bounds[p], wd[1], 1, 1}, dt::f32, memory::format_tag::any),
        bias_md(p), dst_md(p), {1, 1}, {0, 0}, {0, 0});
    parts.emplace_back(desc, attr, Engine());
    // Parts run at once: they must not share the scratchpad, so none may need one.
    if (std::string(parts.back().impl_info_str()).rfind("jit_1x1", 0) != 0 ||
        parts.back().scratchpad_desc().get_size() != 0)
      return false;
  }
  const int64_t plane = out[2] * out[3];
  const float* w = static_cast<const float*>(d_.constant_data[op.inputs[1]]);
  for (int p = 0; p < threads; ++p) {
    const int64_t o0 = bounds[p], n = bounds[p + 1] - bounds[p];
    Args part_args = {{DNNL_ARG_SRC, src},
                      {DNNL_ARG_DST, SliceOf(dst, dst_md(p), o0 * plane * sizeof(float))}};
    if (bias >= 0)
      part_args.push_back({DNNL_ARG_BIAS, SliceOf(bias, bias_md(p), o0 * sizeof(float))});
    std::vector<float> rows(w + o0 * wd[1], w + (o0 + n) * wd[1]);
    part_args.push_back(
        {DNNL_ARG_WEIGHTS,
         OwnedWeights(PlainMd({n, wd[1], 1, 1}), std::move(rows), parts[p].weights_desc())});
    AddPrimitive(dnnl::convolution_forward(parts[p]), 0, std::move(part_args));
    plan_->steps.back().team = threads;
  }
  return true;
}

}  // namespace kiln::onednn::internal
