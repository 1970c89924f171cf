// kiln's direct convolution for inputs of 1 to 4 channels (a network's first layer) on
// oneDNN's layouts (internal to external/onednn/run). oneDNN 2.6's jit:avx2 convolution runs
// some of these far below this core's FMA peak (espcn's 1-channel 5x5: ~5 GMAC/s of ~45;
// fast_style's 3-channel 9x9) while its 3x3 and 7x7 stride-2 stems run near it; this one
// vectorizes over 8 output channels and keeps 2 x 6 outputs in registers per pass over the
// input window: 2-2.3x oneDNN's on the former, slower on the latter (small_conv_bench), so the
// plan takes it only where it measured faster (plan_small_conv.cc).
#ifndef KILN_EXTERNAL_ONEDNN_RUN_SMALL_CONV_H_
#define KILN_EXTERNAL_ONEDNN_RUN_SMALL_CONV_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "external/onednn/run/avx2_post_ops.h"
#include "external/onednn/run/kiln_conv.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::internal {

/// Convolution of an f32 [N, C, H, W] tensor (C <= 4), plain (abcd) or in aBcd8b, with
/// constant weights [K, C, KH, KW] (any kernel size, group 1, stride 1 or 2 per axis, no
/// dilation, any zero padding), plus an optional bias and post-ops, into an aBcd8b
/// [N, K, OH, OW] tensor whose padded channels it writes as zeros. Every output is one sum
/// over c, kh, kw in that order by one thread: results do not depend on the team size.
/// Immutable; Run may be called from any number of threads at once (it needs no scratch).
class SmallConv {
 public:
  /// The largest input channel count it takes.
  static constexpr int64_t kMaxChannels = 4;

  /// The convolution of `spec`, or nullptr when it does not apply and oneDNN's primitive
  /// should run instead: a CPU without AVX2 and FMA, src not f32 abcd or aBcd8b 4-D, dst not
  /// f32 aBcd8b, more than kMaxChannels input channels, strides other than 1 or 2, dilations
  /// other than 0, or dims that do not agree. The weights are packed once (null: zeros).
  static std::shared_ptr<const SmallConv> Make(const KilnConvSpec& spec);

  /// dst = post_ops(conv(src) + bias) (bias: K floats, or null). src must not alias dst. Runs
  /// on OpenMP's team (at most `threads` of Make), as oneDNN's primitives do.
  void Run(const float* src, const float* bias, float* dst) const;

  /// "kiln:small_ic", the implementation name profiles show.
  const char* ImplName() const { return "kiln:small_ic"; }

  /// The geometry chosen at Make (public for the .cc's helpers).
  struct Geometry {
    int64_t n = 0, c = 0, k = 0, h = 0, w = 0, oh = 0, ow = 0, kh = 0, kw = 0;
    int64_t sh = 1, sw = 1, pt = 0, pl = 0;
    int64_t kb = 0;            // 8-channel output blocks
    bool blocked_src = false;  // src in aBcd8b rather than abcd
    int64_t plane = 0;         // floats between src's channel planes (abcd) or blocks (aBcd8b)
    int64_t image = 0;         // floats between src's images
    int64_t x_lo = 0, x_hi = 0;  // output columns whose window lies inside src's width
    int threads = 1;
  };
  const Geometry& geometry() const { return g_; }

 private:
  SmallConv(const Geometry& g, std::vector<WinogradPostOp> post_ops, const float* weights);

  Geometry g_;
  std::vector<WinogradPostOp> post_ops_;
  std::vector<float> w_;  // [kb rounded up to pairs][c][kh][kw][8], padded outputs zero
};

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_SMALL_CONV_H_
