// kiln's own channel copy for oneDNN regions (internal to external/onednn/run): a channel Slice
// and ShuffleNet's channel shuffle (region op kChannels) on the layout the tensor already has,
// plain or channel-blocked, so neither leaves the region. oneDNN has no primitive for either on
// blocked layouts (a shuffle moves single channels between blocks, a slice at an offset that is
// not a multiple of the block has no submemory); outside the region each cost two reorders.
#ifndef KILN_EXTERNAL_ONEDNN_RUN_CHANNEL_GATHER_H_
#define KILN_EXTERNAL_ONEDNN_RUN_CHANNEL_GATHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::internal {

/// y[:, c] = x[:, p(start + c)] for the channels c of y (dim 1), where x is the concatenation
/// of the inputs along dim 1 (C channels in all) and p the channel shuffle of `group` groups,
/// p(i * group + j) = j * (C / group) + i (group 1: the identity). f32 tensors of rank 3-5. A
/// copy: bitwise the input's values. Immutable; Run may be called from any number of threads
/// at once.
class ChannelGather {
 public:
  /// The copy of `srcs` into `dst` (dims [N, C_k, ...] and [N, count, ...] with the same N and
  /// spatial dims), or nullptr when this kernel does not apply: not all f32 and all plain
  /// row-major or all channel-blocked by the same 8 or 16 (aBcd8b, aBcde16b, ...), C not a
  /// multiple of `group`, or channels [start, start + count) not within [0, C). Padding lanes
  /// of a blocked dst (channels count..rounded up) are written as zeros, as oneDNN's
  /// primitives leave them.
  static std::shared_ptr<const ChannelGather> Make(const std::vector<dnnl::memory::desc>& srcs,
                                                   const dnnl::memory::desc& dst, int64_t group,
                                                   int64_t start);

  /// dst = the copy of srcs[0..] (the layouts Make was given; dst overlaps none of them). Runs
  /// on OpenMP's team (as oneDNN's primitives do) over the output's channel blocks.
  void Run(const float* const* srcs, float* dst) const;

  /// "kiln:channels", the implementation name profiles show for it.
  static const char* ImplName();

 private:
  ChannelGather() = default;

  struct Source {
    int input;        // which of srcs
    int64_t channel;  // its channel
  };
  int64_t batch_ = 1, pixels_ = 1;         // N, product of the spatial dims
  int64_t block_ = 1;                      // 1 (plain), 8 or 16
  std::vector<int64_t> src_batch_stride_;  // per input, floats per image
  int64_t dst_batch_stride_ = 0;
  int64_t dst_blocks_ = 0;      // output channels rounded up to the block, / block
  int64_t count_ = 0;           // output channels
  std::vector<Source> source_;  // per output channel
  // Block 8 on AVX2: per output block, the input blocks its lanes come from, each with the
  // permutation that moves their lanes into place and the mask of the lanes they fill.
  struct Piece {
    int input;
    int64_t block;    // the input's channel block
    int32_t lane[8];  // output lane l <- input lane lane[l]
    int32_t mask[8];  // -1 where this piece fills lane l
  };
  std::vector<Piece> pieces_;
  std::vector<size_t> first_piece_;  // per output block, its first piece; one past the end last
  void RunAvx2(const float* const* srcs, float* dst, int64_t n, int64_t ob) const;
};

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_CHANNEL_GATHER_H_
