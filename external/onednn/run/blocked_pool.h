// kiln's own 2-D max pooling on oneDNN's channel-blocked layouts (internal to
// external/onednn/run). oneDNN 2.6's jit:avx2 max pooling runs ~5x slower than a plain
// vectorized loop on these layouts (googlenet's nine 3x3 stride-1 pools: 13% of its time,
// ONNX Runtime's take under 2%), so a region's MaxPool between blocked convolutions runs here.
#ifndef KILN_EXTERNAL_ONEDNN_RUN_BLOCKED_POOL_H_
#define KILN_EXTERNAL_ONEDNN_RUN_BLOCKED_POOL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::internal {

/// Max pooling of an f32 [N, C, H, W] tensor stored as [N, C/b, H, W, b] (oneDNN's aBcd8b or
/// aBcd16b; C padded to b) into the same layout. Numerics are oneDNN's: each output is the
/// largest element of its window inside the input, compared in the same way (a NaN element
/// never wins), so the result is bitwise what oneDNN's primitive writes, except the sign of a
/// zero maximum when a window holds both +0 and -0 (oneDNN keeps the first in row-major order,
/// this kernel the first down the columns; equal values either way). Immutable; Run may be
/// called from any number of threads at once.
class BlockedMaxPool {
 public:
  /// The pooling of `src` into `dst` with window `kernel` ([kh, kw]), `strides` and the left
  /// paddings `pad_l` (the right ones follow from dst's dims), or nullptr when this kernel does
  /// not apply and oneDNN's primitive should run instead: a CPU without AVX2, not 2-D, src and
  /// dst not both f32 aBcd8b or both aBcd16b, dilated windows, a window lying wholly in the
  /// padding, or a row wider than the kernel's stack buffer.
  static std::shared_ptr<const BlockedMaxPool> Make(const dnnl::memory::desc& src,
                                                    const dnnl::memory::desc& dst,
                                                    const std::vector<int64_t>& kernel,
                                                    const std::vector<int64_t>& strides,
                                                    const std::vector<int64_t>& dilations,
                                                    const std::vector<int64_t>& pad_l);

  /// dst = the pooling of src (the layouts Make was given; neither may alias the other). Runs
  /// on OpenMP's team (as oneDNN's primitives do) over channel blocks and output rows.
  void Run(const float* src, float* dst) const;

  /// "kiln:avx2", the implementation name profiles show for it.
  static const char* ImplName();

  /// The pooling's geometry (dims of one channel block's plane, window, strides, paddings).
  struct Geometry {
    int64_t planes = 0;  // N * C / block
    int64_t block = 8, h = 0, w = 0, oh = 0, ow = 0;
    int64_t kh = 0, kw = 0, sh = 1, sw = 1, ph = 0, pw = 0;
  };


 private:
  explicit BlockedMaxPool(const Geometry& g) : g_(g) {}

  Geometry g_;
};

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_BLOCKED_POOL_H_
