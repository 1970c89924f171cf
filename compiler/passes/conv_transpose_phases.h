// ConvTranspose with constant weights as ordinary convolutions, one per output phase (the
// "sub-pixel convolution" form): along a dim of stride s, the outputs o = s * q + r of one
// residue r read the input at q plus fixed offsets through a fixed subset of the taps, which
// is an ordinary stride-1 convolution of the input with those taps (flipped). The s x s phase
// convolutions, concatenated along the channels, are interleaved by DepthToSpace (DCR) into
// the output. Convolutions are what both back ends run fastest (oneDNN's blocked kernels and
// Winograd, the JIT's direct and GEMM convolutions); a DCGAN generator's ConvTranspose layers
// (4x4, stride 2, pad 1) ran 8x slower than ONNX Runtime through the JIT's ConvTranspose
// kernel, and oneDNN 2.6's own deconvolution is slower still on AVX2 (0.6-7 GMAC/s measured).
#ifndef KILN_COMPILER_PASSES_CONV_TRANSPOSE_PHASES_H_
#define KILN_COMPILER_PASSES_CONV_TRANSPOSE_PHASES_H_

#include "base/status.h"
#include "compiler/ir/graph.h"

namespace kiln::compiler {

/// Rewrites every default-domain ConvTranspose that has: a float32 X of rank 4 with a known
/// shape; constant float32 weights W [Cin, Cout / group, kh, kw]; an optional bias; dilations
/// 1; equal strides s in both dims; auto_pad NOTSET or VALID; no output_shape; and, per dim,
/// (k - pad_begin - pad_end + output_padding) a multiple of s (so the output is s times a
/// grid of H + delta positions, delta a constant: every common decoder layer, 2x2 / stride 2,
/// 4x4 / stride 2 / pad 1, 3x3 / stride 2 / pad 1 / output_padding 1, and any stride-1 one)
/// where every phase receives at least one tap and its convolution's pads are >= 0. It becomes
/// s x s Conv nodes (phase (r_h, r_w) in row-major order; weights [Cout, Cin / group, taps of
/// the phase...], a new constant each; the bias, group and zero-based pads of the phase), a
/// Concat along dim 1 and DepthToSpace(blocksize s, DCR) writing the ConvTranspose's output
/// value; with stride 1, a single Conv writing it. The sums are the same products in another
/// order (float rounding differs, within the usual convolution tolerance). A ConvTranspose
/// whose input is a constant 1 x 1 image, group 1, without pads or output_padding (a
/// generator's latent -> k x k layer) becomes Reshape [-1, Cin] -> Gemm (W's bytes as
/// [Cin, Cout * kh * kw], the bias repeated per tap) -> Reshape [-1, Cout, kh, kw] instead.
/// Before rewriting, a BatchNormalization (inference, constant statistics) that is the layer's
/// only reader is folded into the weights and bias, and then, for several phases or the
/// Gemm, an elementwise activation (Relu, LeakyRelu, Clip, Sigmoid, Tanh, ...) that is the
/// only reader is applied by each phase convolution (or the Gemm) instead: it commutes with
/// Concat, DepthToSpace and Reshape. The last node then writes that node's output value, and
/// the absorbed nodes are removed (NodeIds held across the call are stale). Everything else
/// stays. Runs on an inferred main graph; output shapes do not change. Returns how many
/// ConvTranspose nodes it rewrote.
StatusOr<int> ConvTransposeToPhaseConvs(Graph& graph);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_CONV_TRANSPOSE_PHASES_H_
