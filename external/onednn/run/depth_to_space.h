// kiln's DepthToSpace for oneDNN regions (region op kDepthToSpace; internal to
// external/onednn/run): ONNX DepthToSpace on the layout the tensor already has, plain or
// channel-blocked, so it does not end the region. oneDNN has no primitive for it. A ConvTranspose
// compiled as phase convolutions (compiler/passes/conv_transpose_phases.h) ends in one: outside
// the region, each DCGAN layer paid the region's output reorders, the JIT's DepthToSpace and
// the next region's input reorders.
#ifndef KILN_EXTERNAL_ONEDNN_RUN_DEPTH_TO_SPACE_H_
#define KILN_EXTERNAL_ONEDNN_RUN_DEPTH_TO_SPACE_H_

#include <cstdint>
#include <memory>

#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::internal {

/// y[n, c, h * s + i, w * s + j] = x[n, channel(c, i, j), h, w] for x [N, C * s * s, H, W] and
/// y [N, C, H * s, W * s], where channel is (i * s + j) * C + c in DCR mode and
/// c * s * s + i * s + j in CRD mode (ONNX DepthToSpace). f32, rank 4. A copy: bitwise the
/// input's values. Immutable; Run may be called from any number of threads at once.
class DepthToSpace {
 public:
  /// The copy of `src` into `dst`, or nullptr when this kernel does not apply: not f32 rank 4,
  /// dims that do not match (above), or layouts other than both plain row-major or both
  /// channel-blocked by the same 8 or 16 (aBcd8b, aBcd16b). Padding lanes of a blocked dst
  /// (channels C..rounded up) are written as zeros, as oneDNN's primitives leave them.
  static std::shared_ptr<const DepthToSpace> Make(const dnnl::memory::desc& src,
                                                  const dnnl::memory::desc& dst, int64_t blocksize,
                                                  bool crd);

  /// dst = the rearranged src (the layouts Make was given; they do not overlap). Runs on
  /// OpenMP's team (as oneDNN's primitives do) over output rows.
  void Run(const float* src, float* dst) const;

  /// "kiln:depth_to_space", the implementation name profiles show for it.
  static const char* ImplName();

 private:
  DepthToSpace() = default;

  int64_t batch_ = 1, channels_ = 0, height_ = 0, width_ = 0;  // the input's N, C * s * s, H, W
  int64_t s_ = 1;
  bool crd_ = false;
  int64_t block_ = 1;  // 1 (plain), 8 or 16
  // Blocked DCR with C a multiple of the block: every output block is one input block.
  bool whole_blocks_ = false;

  int64_t InChannel(int64_t c, int64_t i, int64_t j) const;
};

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_DEPTH_TO_SPACE_H_
