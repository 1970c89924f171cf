// What kiln's own convolutions on oneDNN's layouts (small_conv.h, winograd_conv.h) are made
// from (internal to external/onednn/run): one description, so the plan builder fills it once
// per Conv step and each kernel's Make checks the parts it supports.
#ifndef KILN_EXTERNAL_ONEDNN_RUN_KILN_CONV_H_
#define KILN_EXTERNAL_ONEDNN_RUN_KILN_CONV_H_

#include <cstdint>
#include <vector>

#include "external/onednn/run/avx2_post_ops.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::internal {

/// A convolution as oneDNN's primitive for it sees it: its src and dst descriptors (layouts
/// included), constant weights, window, post-ops and team bound.
struct KilnConvSpec {
  dnnl::memory::desc src, dst;
  /// Plain [K, C, KH, KW] floats, read only during Make; null makes a convolution of zero
  /// weights, as fast as the real one, for timing without packing or transforming.
  const float* weights = nullptr;
  std::vector<int64_t> weight_dims;  // [K, C, KH, KW]
  std::vector<int64_t> strides;
  std::vector<int64_t> dilations;  // oneDNN's: 0 is dense
  std::vector<int64_t> pad_l;      // top and left (the others follow from dst's dims)
  std::vector<WinogradPostOp> post_ops;
  int threads = 1;  // bounds the OpenMP team Run uses
};

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_KILN_CONV_H_
