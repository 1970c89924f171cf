// The oneDNN codegen (compile side of BYOC): which graph nodes oneDNN can run, and a region of
// them -> the blob external/onednn/run/runtime.h runs. Depends on the graph IR only (no oneDNN).
#ifndef KILN_EXTERNAL_ONEDNN_COMPILE_CODEGEN_H_
#define KILN_EXTERNAL_ONEDNN_COMPILE_CODEGEN_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "compiler/external_compiler.h"
#include "compiler/ir/graph.h"

namespace kiln::onednn {

/// True when oneDNN runs `node` on its own: default domain; f32 data inputs and outputs with
/// known ranks (symbolic dims allowed, e.g. a dynamic batch); attributes in the supported
/// range. Supported: Conv (1-3 spatial dims, groups incl. depthwise, any strides, dilations,
/// pads, auto_pad; static kernel dims), MatMul (ranks >= 2), Gemm (constant C, or a C with
/// alpha == beta), MaxPool (no Indices output, storage_order 0), AveragePool (not ceil_mode
/// together with count_include_pad), GlobalAveragePool, GlobalMaxPool, Relu, LeakyRelu,
/// Sigmoid, Tanh, Clip (constant bounds), HardSwish, HardSigmoid (linear then clip), Elu, Exp, Log, Abs, Sqrt, Softplus, Neg,
/// Round, Softmax / LogSoftmax (any axis from opset 13, the last axis before), LayerNormalization
/// (Mean / InvStdDev unused, scale and bias of the normalized shape), Add / Sub / Mul / Div /
/// Max / Min (two inputs, one of them of the output's shape), Concat, Slice and Split of
/// channels (dim 1 of a rank 3-5 tensor, constant bounds / sizes, step 1: channel copies),
/// BatchNormalization
/// (inference: one output, training_mode 0), Flatten (a row-major view, so a Gemm after
/// GlobalAveragePool stays in the pooling's region), Resize / Upsample in nearest mode by whole
/// factors where ONNX's coordinate and rounding modes repeat each pixel (support.h,
/// UpsampleFactors; linear and the other modes stay on the JIT). Erf-based Gelu subgraphs are recognised by
/// Codegen when all their nodes are in the region (Erf alone is not supported), and so is
/// x * sigmoid(x) (SiLU: Sigmoid and Mul, the sigmoid read only by the product) as one swish.
bool IsSupported(const compiler::Graph& graph, compiler::NodeId node);

/// Groups of nodes oneDNN runs only together, for the partitioner to keep whole (each group
/// sorted by id): the erf-based Gelu, 0.5 * x * (1 + erf(x / sqrt(2))) in the forms
/// exporters emit (Div or Mul, Erf, Add, Mul, Mul), and the decomposed LayerNorm (see
/// IsLayerNormRoot), whose intermediates are read nowhere else. IsSupported is false for the
/// Erf, ReduceMean and Pow on their own; Codegen turns a whole Gelu group into one gelu_erf op
/// (or a post-op of the Conv / MatMul producing x) and a LayerNorm group into one layer norm.
std::vector<std::vector<compiler::NodeId>> FindComposites(const compiler::Graph& graph);

/// True when `node` is the final Add of a LayerNorm decomposed the way exporters emit it
/// (torch.nn.LayerNorm at opset < 17): Add(Mul(Div(Sub(x, ReduceMean(x)), Sqrt(Add(
/// ReduceMean(Pow(Sub, 2)), eps))), gamma), beta), Mul and Adds in either order, both means
/// over the last axis with keepdims, constant f32 gamma / beta of the last dim's size, and no
/// intermediate read elsewhere. Codegen runs such a group as one oneDNN layer normalization.
bool IsLayerNormRoot(const compiler::Graph& graph, compiler::NodeId node);

/// True when Reshape `node` ends ShuffleNet's channel shuffle of an f32 x [N, C, ...] (rank
/// 3-5, C constant): Reshape(Transpose(Reshape(x) -> [N, g, C/g, ...], perm swapping dims 1
/// and 2)) -> x's shape, no intermediate read elsewhere. Codegen runs it as one channel copy.
bool IsShuffleRoot(const compiler::Graph& graph, compiler::NodeId node);

/// True when QuantizeLinear `node` ends an int8 operation in the QDQ form that oneDNN runs on
/// integer primitives: Q(Relu?(Conv / MatMul / Gemm(DQ(x), DQ(W), DQ(bias)?))) with u8
/// activations (per-tensor), s8 constant weights (per channel, zero points 0), an s32 bias in
/// accumulator units, and no intermediate read elsewhere. Codegen runs it as one QConv /
/// QMatMul op whose result equals ONNX's definition of the float graph up to rounding ties.
bool IsInt8Root(const compiler::Graph& graph, compiler::NodeId node);

/// Serializes a region: `nodes` (any order; each must be IsSupported, or part of a composite
/// subgraph), `inputs` (values read from outside, in the order the VM passes them) and
/// `outputs` (values produced in the region that the rest of the program reads, in order).
/// Values read by the nodes that are neither inputs nor produced in the region must be
/// constants. Fusions: BatchNormalization into a preceding Conv whose output has no other user
/// (new weights); elementwise ops, erf-Gelu, and Add / Sub / Mul with a tensor into a preceding
/// Conv / MatMul / Gemm as post-ops (a same-shape Add is a residual sum), a constant broadcast
/// Add after MatMul or Conv as its bias; an unpadded AveragePool after a 1x1, stride-1 Conv
/// runs before it (they commute; the conv then sees a fraction of the pixels). A HardSigmoid (oneDNN 2.6 has none) is a linear and a
/// clip post-op, or two eltwise ops on its own.
/// Constants (compiler::ExternalConstant) are graph values with data, or new ones: Conv weights
/// and bias with a BatchNormalization folded in, Gemm weights / bias scaled by alpha / beta, a
/// broadcast bias reshaped to [C].
/// Errors: InvalidArgument naming the node or value (an unsupported node, a value that is not
/// available, an output not produced by the region); Internal if the generated region fails
/// validation (a bug).
StatusOr<compiler::ExternalCode> Codegen(const compiler::Graph& graph,
                                         const std::vector<compiler::NodeId>& nodes,
                                         const std::vector<compiler::ValueId>& inputs,
                                         const std::vector<compiler::ValueId>& outputs);

}  // namespace kiln::onednn

#endif  // KILN_EXTERNAL_ONEDNN_COMPILE_CODEGEN_H_
