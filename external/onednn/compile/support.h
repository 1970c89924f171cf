// Internal to the oneDNN codegen (not a public header): the graph and attribute helpers, the
// eltwise / binary mapping and the Gelu and LayerNorm matchers that both the support predicates
// (support.cc: IsSupported, FindComposites, IsLayerNormRoot) and the Generator (codegen.cc)
// read. Everything takes the graph by reference and returns values or pointers it owns.
#ifndef KILN_EXTERNAL_ONEDNN_COMPILE_SUPPORT_H_
#define KILN_EXTERNAL_ONEDNN_COMPILE_SUPPORT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/graph.h"
#include "compiler/ops/attributes.h"
#include "external/onednn/region.h"

namespace kiln::onednn::internal {

// The graph IR's names, within this namespace only.
using compiler::DimExpr;
using compiler::Graph;
using compiler::kNoValue;
using compiler::Node;
using compiler::NodeId;
using compiler::SymbolicShape;
using compiler::TensorData;
using compiler::ValueId;

// ---- Attribute and value helpers -----------------------------------------------------------

/// The int attribute `name` of `n`; `def` when absent or not an int.
int64_t GetInt(const Node& n, const char* name, int64_t def);
/// The float attribute `name` of `n`; `def` when absent or not a float.
float GetFloat(const Node& n, const char* name, float def);
/// The string attribute `name` of `n`; `def` when absent or not a string.
std::string GetString(const Node& n, const char* name, const std::string& def);
/// Input `i` of `n`, or kNoValue when absent.
ValueId In(const Node& n, size_t i);
/// The value's data when it is known at compile time (owned by the graph), else nullptr; a
/// graph input's initializer is an overridable default, so not known.
const TensorData* Data(const Graph& g, ValueId v);
/// The value's inferred shape (owned by the graph), nullptr when unknown.
const SymbolicShape* ShapeOf(const Graph& g, ValueId v);
/// The rank of `v`, whose shape must be known.
int RankOf(const Graph& g, ValueId v);
/// `v` is a value (not kNoValue) of dtype f32 with a known shape of rank at most 8.
bool IsF32(const Graph& g, ValueId v);
/// A negative axis counted from the end (axis + rank); no range check.
int64_t NormalizeAxis(int64_t axis, int rank);
/// `small` broadcasts into `big` by oneDNN's rule: after rank alignment each dim is 1 or equal.
bool BroadcastsInto(const SymbolicShape& small, const SymbolicShape& big);

// ---- Eltwise and binary ops -----------------------------------------------------------------

/// An eltwise algorithm and its parameters, as a region Op or post-op carries them.
struct EltwiseSpec {
  EltwiseAlg alg;
  float alpha = 0.0f, beta = 0.0f;
};

/// The eltwise oneDNN runs for `n` on its data operand (DataInput): a unary op, or a binary
/// with a constant scalar side and an output of the other side's shape (x + c -> linear, max(x,
/// c) -> clip, ...). nullopt when there is none (e.g. a Clip with run-time bounds). With
/// `scalar_binaries` false a binary op is never an eltwise one: post-op fusion keeps scalar
/// binaries in their binary form (as eltwise linear / clip post-ops on a conv, the zoo's
/// hand-written hardsigmoid came out wrong).
std::optional<EltwiseSpec> EltwiseOf(const Graph& g, const Node& n, bool scalar_binaries = true);
/// The operand an eltwise from EltwiseOf applies to: input 0, or the non-constant side of a
/// scalar binary.
ValueId DataInput(const Graph& g, const Node& n);
/// The binary algorithm of ONNX op type `op` (Add, Sub, Mul, Div, Max, Min), else nullopt.
std::optional<BinaryAlg> BinaryOf(const std::string& op);
/// a op b == b op a (all but Sub and Div).
bool IsCommutative(BinaryAlg a);

// ---- Windows --------------------------------------------------------------------------------

/// A Conv node's attributes as compiler/ops parses them for shape inference and lowering (one
/// parser for all three); a Conv without kernel_shape takes its weights' spatial dims. nullopt
/// when malformed.
std::optional<compiler::ConvAttributes> ConvOf(const Graph& g, const Node& n, int spatial);

// ---- Erf-based Gelu: 0.5 * x * (1 + erf(x / sqrt(2))) ---------------------------------------

/// A Gelu found by MatchGelu: its input, its output and every node of the pattern.
struct GeluMatch {
  ValueId x = kNoValue, out = compiler::kNoValue;
  std::set<NodeId> nodes;
};

/// The other input of binary node `n` when one input is `v` (for Div and Sub only when `v` is
/// the first), else nullopt.
std::optional<ValueId> Other(const Node& n, ValueId v);

/// Matches 0.5 * x * (1 + erf(x / sqrt(2))) (the forms exporters emit) around Erf node
/// `erf_id`. `allowed` says which nodes may be part of it; `escapes` marks values read outside
/// (those cannot be intermediates). x itself may have other users.
std::optional<GeluMatch> MatchGelu(const Graph& g, NodeId erf_id,
                                   const std::function<bool(NodeId)>& allowed,
                                   const std::function<bool(ValueId)>& escapes);

// ---- Decomposed LayerNorm: (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps) * g + b --------

/// A LayerNorm found by MatchLayerNorm: input x, constant gamma and beta, the output, epsilon
/// and every node of the pattern.
struct LnMatch {
  ValueId x = kNoValue, gamma = kNoValue, beta = kNoValue, out = compiler::kNoValue;
  float epsilon = 0.0f;
  std::set<NodeId> nodes;
};

/// Matches the decomposed LayerNorm exporters emit for torch.nn.LayerNorm at its root, the last
/// Add: Add(Mul(Div(Sub(x, ReduceMean(x)), Sqrt(Add(ReduceMean(Pow(Sub, 2)), eps))), g), b) with
/// Mul and both Adds in either operand order, reductions over the last axis, and constant g, b
/// of the last dim's size. Intermediates must have their readers inside the pattern; `allowed`
/// and `escapes` as for MatchGelu.
std::optional<LnMatch> MatchLayerNorm(const Graph& g, NodeId root,
                                      const std::function<bool(NodeId)>& allowed,
                                      const std::function<bool(ValueId)>& escapes);

// ---- Channel copies: Slice on dim 1 and ShuffleNet's channel shuffle -------------------------

/// The channels [start, start + count) a Slice node takes: opset >= 10 with constant starts,
/// ends and axes naming only dim 1 (steps absent or 1), of a rank 3-5 f32 input whose dim 1
/// is a constant C; ONNX's clamping applied; nullopt otherwise or when it takes nothing.
std::optional<std::pair<int64_t, int64_t>> ChannelSlice(const Graph& g, const Node& n);

/// The channel ranges {start, count} of a Split node's outputs (torch.chunk / split as newer
/// exporters write them): axis 1 of a rank 3-5 f32 input whose dim 1 is a constant C, the
/// sizes from a constant `split` input (opset 13+) or attribute, else C / outputs (the last
/// smaller, as num_outputs defines it); nullopt otherwise or when a part is empty.
std::optional<std::vector<std::pair<int64_t, int64_t>>> ChannelSplit(const Graph& g,
                                                                     const Node& n);

// ---- Nearest upsampling by whole factors: Resize / Upsample ---------------------------------

/// The factors per spatial dim of a Resize or Upsample node that repeats each pixel s times
/// per dim (region op kResize), or nullopt: mode nearest; an f32 input of rank 3-5; roi,
/// scales and sizes absent or constant; scales (or sizes over constant input dims) whole
/// numbers in [1, kMaxUpsampleFactor], 1 for N and C; and a coordinate transformation and
/// nearest mode that pick input o / s exactly for such scales (Upsample and Resize-10:
/// always; Resize-11+: asymmetric or tf_half_pixel_for_nn with floor, half_pixel,
/// pytorch_half_pixel or half_pixel_symmetric with round_prefer_floor / _ceil).
std::optional<std::vector<int64_t>> UpsampleFactors(const Graph& g, const Node& n);

/// A channel shuffle found by MatchShuffle: Reshape(x [N, C, ...]) -> [N, g, C/g, ...],
/// Transpose swapping dims 1 and 2, Reshape back to x's shape.
struct ShuffleMatch {
  ValueId x = kNoValue, out = kNoValue;
  int64_t group = 1;
  std::set<NodeId> nodes;  // the two Reshapes and the Transpose
};

/// Matches at the final Reshape `root`; the intermediates must have their one reader in the
/// pattern; `allowed` and `escapes` as for MatchGelu. x is f32 of rank 3-5 with constant
/// channels, and the result has x's shape.
std::optional<ShuffleMatch> MatchShuffle(const Graph& g, NodeId root,
                                         const std::function<bool(NodeId)>& allowed,
                                         const std::function<bool(ValueId)>& escapes);

/// Whether matcher `match` (MatchLayerNorm, MatchShuffle, MatchInt8) finds its pattern at
/// `node` in the whole graph, as the partitioner sees it before regions exist: every node
/// allowed, only graph outputs escaping.
template <typename Matcher>
bool MatchesInGraph(const Graph& g, NodeId node, Matcher match) {
  const std::vector<ValueId>& outs = g.outputs();
  return match(
             g, node, [](NodeId) { return true; },
             [&](ValueId v) { return std::find(outs.begin(), outs.end(), v) != outs.end(); })
      .has_value();
}

// ---- Int8 in the QDQ form: Q(Relu?(Conv / MatMul / Gemm(DQ(x), DQ(W)[, DQ(bias)]))) --------

/// An int8 operation found by MatchInt8 (int8.cc). x and y are u8 with per-tensor scale and
/// zero point; W is a constant s8 (zero points 0) with per-output-channel or per-tensor scales;
/// the bias (optional) a constant s32 [O] with scales x_scale * w_scale[o] (accumulator
/// units). The weight and bias DQs are constants (folded), so not among `nodes`.
struct Int8Match {
  NodeId anchor = compiler::kNoNode;
  ValueId x_q = kNoValue, w_q = kNoValue, bias_q = kNoValue, out = kNoValue;
  float x_scale = 1.0f, y_scale = 1.0f;
  int32_t x_zero = 0, y_zero = 0;
  std::vector<double> w_scales;  // one per output channel
  bool conv = false, relu = false, trans_b = false;
  std::set<NodeId> nodes;  // the Q (root), the Relu, the anchor and x's DQ
};

/// Matches at QuantizeLinear `q`; `allowed` and `escapes` as for MatchGelu. MatMul's W is a
/// matrix (a batched A is fine); Gemm has transA 0, alpha = beta = 1.
std::optional<Int8Match> MatchInt8(const Graph& g, NodeId q,
                                   const std::function<bool(NodeId)>& allowed,
                                   const std::function<bool(ValueId)>& escapes);

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_COMPILE_SUPPORT_H_
