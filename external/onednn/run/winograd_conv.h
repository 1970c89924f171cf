// kiln's Winograd convolution for 3x3 stride-1 f32 convolutions on oneDNN's aBcd8b layout
// (internal to external/onednn/run). oneDNN 2.6's Winograd is AVX-512 only, and its AVX2 direct
// convolution already runs near this core's FMA peak, so fewer multiplies is the remaining
// win: F(2x2,3x3) does 2.25x fewer, F(4x4,3x3) 4x fewer, at the cost of transforms and larger
// rounding error (see winograd_conv.cc for the figures).
#ifndef KILN_EXTERNAL_ONEDNN_RUN_WINOGRAD_CONV_H_
#define KILN_EXTERNAL_ONEDNN_RUN_WINOGRAD_CONV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "external/onednn/run/avx2_post_ops.h"
#include "external/onednn/run/kiln_conv.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::internal {

/// Convolution of an f32 [N, C, H, W] tensor in aBcd8b (C padded to 8, padding zero as oneDNN
/// keeps it) with constant 3x3 weights [K, C, 3, 3] (group 1, stride 1, no dilation, any
/// zero padding), plus an optional bias and post-ops, into an aBcd8b [N, K, OH, OW] tensor
/// whose padded channels it writes as zeros. Numerics: Winograd's F(m x m, 3x3) rounds
/// differently from a direct convolution (errors grow with m; winograd_conv.cc). Immutable;
/// Run may be called from any number of threads at once, each with its own scratch.
class WinogradConv {
 public:
  /// F(m x m, 3x3) for `spec`, or nullptr when it does not apply and oneDNN's primitive
  /// should run instead: a CPU without AVX2 and FMA, src or dst not f32 aBcd8b 4-D, a kernel
  /// other than 3x3, strides other than 1, dilations other than 0, dims that do not agree, or
  /// `m` other than 2 or 4. The weights are transformed once (null: zeros); the scratch is
  /// sized for spec.threads.
  static std::shared_ptr<const WinogradConv> Make(const KilnConvSpec& spec, int m);

  /// dst = post_ops(conv(src) + bias) (bias: K floats, or null). `scratch` holds at least
  /// scratch_bytes() bytes, 64-byte aligned; src and scratch must not alias dst. Runs on
  /// OpenMP's team (at most `threads` of Make), as oneDNN's primitives do.
  void Run(const float* src, const float* bias, float* dst, void* scratch) const;

  /// The output tile m of F(m x m, 3x3): 2 or 4.
  int64_t tile() const { return g_.m; }
  /// Scratch bytes Run needs.
  size_t scratch_bytes() const { return scratch_bytes_; }
  /// "kiln:winograd_f2" or "kiln:winograd_f4", the implementation name profiles show.
  const char* ImplName() const;

  /// The geometry and blocking chosen at Make (public for the .cc's helpers).
  struct Geometry {
    int64_t n = 0, c = 0, k = 0, h = 0, w = 0, oh = 0, ow = 0, pt = 0, pl = 0;
    int64_t m = 2, alpha = 4, positions = 16;  // output tile, input tile, alpha^2
    int64_t cb = 0, kb16 = 0, kb8 = 0;         // 8-channel input blocks, 16- and 8-wide K blocks
    int64_t th = 0, tw = 0, tiles = 0;         // tiles down, across, in all
    int64_t block = 6;                         // tiles per block (a multiple of 6)
    bool k_sliced = false;  // weights outweigh data: threads share blocks, each a K slice
    int64_t kgroup = 1;     // k_sliced: 16-wide K blocks per GEMM pass
    int threads = 1;
  };
  /// The geometry and blocking Make chose (tests check which path a shape takes).
  const Geometry& geometry() const { return g_; }

 private:
  WinogradConv(const Geometry& g, std::vector<WinogradPostOp> post_ops);
  void TransformWeights(const float* weights);
  void RunBlock(const float* src, const float* bias, float* dst, float* v, float* mo,
                int64_t block) const;
  void RunSlice(const float* bias, float* dst, const float* v, float* mo, int64_t first,
                int64_t kb_begin, int64_t kb_end) const;

  Geometry g_;
  std::vector<WinogradPostOp> post_ops_;
  std::shared_ptr<float> u_;  // [positions][kb16][cb * 8][16]
  size_t shared_floats_ = 0;      // scratch all threads share (k_sliced: V)
  size_t per_thread_floats_ = 0;  // then each thread's own (V and M, or M)
  size_t scratch_bytes_ = 0;
};

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_WINOGRAD_CONV_H_
