// kiln's direct convolution for 1 to 4 OUTPUT channels (a network's last layer: an image,
// a mask, a waveform) on oneDNN's aBcd8b layout (internal to external/onednn/run). oneDNN
// 2.6's jit:avx2 convolution vectorizes over 8 output channels, so with 3 of them it runs
// fast_style's 16 -> 3 9x9 output layer at ~6 GMAC/s, a tenth of this core's FMA peak. This
// one vectorizes over the 8 input channels of src's blocks instead: per output pixel and
// output channel a ymm accumulates 8 channel-partial sums over the taps, summed across lanes
// once at the end (small_oc_conv.cc); the plan takes it where it measured faster
// (plan_small_oc_conv.cc).
#ifndef KILN_EXTERNAL_ONEDNN_RUN_SMALL_OC_CONV_H_
#define KILN_EXTERNAL_ONEDNN_RUN_SMALL_OC_CONV_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "external/onednn/run/avx2_post_ops.h"
#include "external/onednn/run/kiln_conv.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::internal {

/// Convolution of an f32 aBcd8b [N, C, H, W] tensor (any C; its padded channels, as oneDNN
/// and kiln's kernels leave them, zeros), or aBc8b [N, C, W] (1-D: one row), with constant
/// weights [K, C, KH, KW] ([K, C, KW]; K <= 4, any kernel size, group 1, stride 1 or 2 per
/// axis, no dilation, any zero padding), plus an optional bias and post-ops, into an aBcd8b
/// [N, K, OH, OW] (aBc8b [N, K, OW]) tensor whose padded channels it writes as zeros. Every
/// output is one sum in a fixed order (8 lane sums over the channel blocks and taps, then a
/// pairwise sum of the lanes) by one thread: results do not depend on the team size.
/// Immutable; Run may be called from any number of threads at once.
class SmallOcConv {
 public:
  /// The largest output channel count it takes.
  static constexpr int64_t kMaxOutputs = 4;

  /// The convolution of `spec`, or nullptr when it does not apply and oneDNN's primitive
  /// should run instead: a CPU without AVX2 and FMA, src or dst not f32 aBcd8b (or both
  /// aBc8b), more than kMaxOutputs output channels, strides other than 1 or 2, dilations
  /// other than 0, or dims that do not agree. The weights are packed once (null: zeros).
  static std::shared_ptr<const SmallOcConv> Make(const KilnConvSpec& spec);

  /// dst = post_ops(conv(src) + bias) (bias: K floats, or null). src must not alias dst. Runs
  /// on OpenMP's team (at most `threads` of Make), as oneDNN's primitives do.
  void Run(const float* src, const float* bias, float* dst) const;

  /// "kiln:small_oc", the implementation name profiles show.
  const char* ImplName() const { return "kiln:small_oc"; }

  /// The geometry chosen at Make (public for the .cc's helpers).
  struct Geometry {
    int64_t n = 0, c = 0, k = 0, h = 0, w = 0, oh = 0, ow = 0, kh = 0, kw = 0;
    int64_t sh = 1, sw = 1, pt = 0, pl = 0;
    int64_t cb = 0;              // src's 8-channel blocks
    int64_t x_lo = 0, x_hi = 0;  // output columns whose window lies inside src's width
    int threads = 1;
  };
  const Geometry& geometry() const { return g_; }

 private:
  SmallOcConv(const Geometry& g, std::vector<WinogradPostOp> post_ops, const float* weights);

  Geometry g_;
  std::vector<WinogradPostOp> post_ops_;
  std::vector<float> w_;  // [cb][kh][kw][k][8 channels], padded channels zero
};

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_SMALL_OC_CONV_H_
