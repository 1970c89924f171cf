// Attribute structs parsed once per node and read by shape inference (compiler/ops), lowering
// (compiler/lower) and vendor codegens alike: the sliding window of Conv, ConvTranspose and the
// pools, Resize's opset 18 options, Col2Im's window, and the Einsum equation. Each Parse function
// validates everything that does not need input shapes; its errors name the node and the attribute.
#ifndef KILN_COMPILER_OPS_ATTRIBUTES_H_
#define KILN_COMPILER_OPS_ATTRIBUTES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "compiler/ir/graph.h"
#include "compiler/ops/node_context.h"

namespace kiln::compiler {

// ---- Sliding windows (Conv, ConvTranspose, MaxPool, AveragePool, LpPool) ---------------------

/// ONNX auto_pad.
enum class AutoPad {
  kNotSet,     // the explicit `pads`
  kSameUpper,  // output = ceil(input / stride); an odd total pad puts the extra one at the end
  kSameLower,  // ... at the beginning
  kValid,      // no padding
};

/// The window attributes shared by convolutions and pools, over `spatial()` dims. Every list
/// has its default filled in; kernel, strides and dilations are positive, pads non-negative.
struct WindowAttributes {
  std::vector<int64_t> kernel;     // kernel_shape (Conv: the weights' spatial dims if absent)
  std::vector<int64_t> strides;    // default 1
  std::vector<int64_t> dilations;  // default 1
  std::vector<int64_t> pads;       // begins then ends, default 0; used when auto_pad is kNotSet
  AutoPad auto_pad = AutoPad::kNotSet;

  int spatial() const { return static_cast<int>(kernel.size()); }
  bool same() const { return auto_pad == AutoPad::kSameUpper || auto_pad == AutoPad::kSameLower; }
  /// The span one window covers in dim i: (kernel - 1) * dilation + 1.
  int64_t extent(int i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

/// Conv and ConvTranspose. How auto_pad resolves: for SAME_*, the total padding of dim i is
/// max(0, (out - 1) * stride + extent(i) - in) (Conv; ConvTranspose: stride * (in - 1) +
/// output_padding + extent(i) - out), of which SAME_UPPER puts floor(total / 2) at the
/// beginning and SAME_LOWER total - floor(total / 2).
struct ConvAttributes : WindowAttributes {
  int64_t group = 1;  // positive
  // ConvTranspose only (empty for Conv):
  std::vector<int64_t> output_padding;  // per spatial dim, default 0
  std::vector<int64_t> output_shape;    // empty, the spatial dims, or the whole output shape
  /// Output spatial dim i from output_shape, if it was given.
  std::optional<int64_t> OutputSize(int i) const;
};

/// MaxPool, AveragePool and LpPool.
struct PoolAttributes : WindowAttributes {
  bool ceil_mode = false;          // output length rounds up
  bool count_include_pad = false;  // AveragePool: padding counts in the divisor
  int64_t storage_order = 0;       // MaxPool's Indices: 0 row-major, 1 column-major
  int64_t p = 2;                   // LpPool's norm
};

/// Reads a Conv or ConvTranspose node's window for `spatial` dims. `kernel_from_weights` (the
/// weights' spatial dims, when constant) stands in for an absent kernel_shape and must agree
/// with a present one. InvalidFormat naming node and attribute: a wrong type or length, a
/// non-positive kernel/stride/dilation/group, a negative pad, an unknown auto_pad, no kernel.
StatusOr<ConvAttributes> ParseConvAttributes(
    const Node& node, int spatial, const std::optional<std::vector<int64_t>>& kernel_from_weights);

/// Reads a pooling node's window (kernel_shape required) for `spatial` dims, as
/// ParseConvAttributes does, plus ceil_mode, count_include_pad, storage_order and p.
StatusOr<PoolAttributes> ParsePoolAttributes(const Node& node, int spatial);

// ---- Resize (opset 18+) and Col2Im ----------------------------------------------------------

/// ONNX Resize keep_aspect_ratio_policy (opset 18), applied when `sizes` gives the output.
enum class AspectPolicy {
  kStretch,     // every resized dim gets its own scale sizes[i] / in
  kNotLarger,   // one scale, the smallest sizes[i] / in over the axes; out = round(scale * in)
  kNotSmaller,  // one scale, the largest
};

/// The Resize attributes that shape inference, the shape function and the lowering all read.
struct ResizeAttributes {
  /// Dims that scales / sizes / roi describe, in their order (attribute `axes`, normalized; all
  /// dims 0..rank-1 when absent). Dims not listed keep their length and are copied.
  std::vector<int> axes;
  bool axes_given = false;
  AspectPolicy policy = AspectPolicy::kStretch;
  bool antialias = false;
  /// Position of dim d in `axes` (the index into scales / sizes / roi starts), or -1.
  int SlotOf(int d) const;
};

/// Reads antialias, keep_aspect_ratio_policy and axes for an input of `rank` (they are absent,
/// so default, before opset 18). InvalidFormat naming node and attribute: an unknown policy, an
/// axis out of range or repeated, antialias with mode "nearest" (ONNX defines it for linear and
/// cubic only).
StatusOr<ResizeAttributes> ParseResizeAttributes(const Node& node, int rank);

/// Col2Im's window over `spatial` dims, defaults filled in: dilations and strides positive
/// (default 1), pads (begins then ends) non-negative (default 0).
struct Col2ImAttributes {
  std::vector<int64_t> dilations, strides, pads;
};
/// InvalidFormat naming node and attribute on a wrong length or value.
StatusOr<Col2ImAttributes> ParseCol2ImAttributes(const Node& node, int spatial);

// ---- DFT ----------------------------------------------------------------------------------------

/// DFT's axis for an input of `rank`: the `axis` attribute (default 1) before opset 20, from
/// opset 20 input 2 (`axis_input`, its compile-time value; default -2), normalized. Error when it
/// names the last dim (re/im) or is out of range; Unsupported when input 2 is a run-time value.
StatusOr<int> DftAxis(const NodeContextBase& ctx, int rank,
                      const std::optional<std::vector<int64_t>>& axis_input);

// ---- Einsum ---------------------------------------------------------------------------------

/// A parsed Einsum equation ("bij,bjk->bik", "...ii->...i", "ij,jk" with an implicit output).
struct EinsumEquation {
  /// One operand (or the output): its letter labels in order, and where "..." stands.
  struct Term {
    std::vector<char> labels;  // letters only
    int ellipsis_at = -1;      // number of labels before "...", -1 when there is none
    bool has_ellipsis() const { return ellipsis_at >= 0; }
    /// The number of dims "..." stands for in an operand of rank `rank`; nullopt when the rank
    /// does not fit the term (fewer dims than letters, or extra dims and no "...").
    std::optional<int> EllipsisRank(int rank) const;
  };
  std::string text;          // the equation, spaces removed (for messages)
  std::vector<Term> inputs;  // one per node input
  /// The output. An implicit one ("ij,jk") is made explicit here: "..." first when any input
  /// has one, then the labels used exactly once, in alphabetical order.
  Term output;
  bool implicit_output = false;
};

/// Reads the `equation` attribute. InvalidFormat naming node and attribute: a term count other
/// than the node's input count, a character that is not a letter outside "...", more than one
/// "..." in a term, an output label that no input has.
StatusOr<EinsumEquation> ParseEinsumEquation(const Node& node);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_OPS_ATTRIBUTES_H_
