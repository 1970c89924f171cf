// The oneDNN vendor's annotation rules for compiler/passes/partition (compile side): which nodes
// it claims, its composite patterns and the ops that make a region worth offloading.
#ifndef KILN_EXTERNAL_ONEDNN_COMPILE_RULES_H_
#define KILN_EXTERNAL_ONEDNN_COMPILE_RULES_H_

#include "base/status.h"
#include "compiler/external_compiler.h"
#include "compiler/passes/partition.h"

namespace kiln::onednn {

/// vendor "onednn"; supported = IsSupported (codegen.h); composites: the erf forms of Gelu
/// (0.5 * x * (1 + erf(x / sqrt 2)) in the two operand orders exporters write), whose Erf
/// and Div oneDNN does not run alone, and int8 operations in the QDQ form (IsInt8Root, an
/// anchor of its own through its QuantizeLinear); anchors: Conv, ConvTranspose, MatMul, Gemm, pools,
/// Softmax, LogSoftmax, LayerNormalization, BatchNormalization.
struct RulesOptions {
  /// Claim MatMul / Gemm whose B is a matrix known at compile time. Off by default: kiln's JIT
  /// runs them on weights prepacked at compile time (compiler/passes/pack_weights.h), which on
  /// AVX2 beats oneDNN 2.6's GEMM (it repacks B on every call) by up to 1.5x at small M and
  /// matches it at large M. MatMuls of two run-time tensors (attention) stay oneDNN's.
  bool constant_weight_gemms = false;
  /// Keep regions with no Conv / ConvTranspose (nor, with constant_weight_gemms, MatMul / Gemm):
  /// LayerNorms, Softmaxes, attention products of two run-time tensors, pools on their own. Off
  /// by default: each region call costs oneDNN's per-primitive overhead, more than the JIT's
  /// fused kernels at BERT-sized tensors (the BERT-like encoder, seq 16, 1 thread: 2.34 ms
  /// all-JIT vs 2.56 ms with its 13 such regions; even at seq 128). Inside a conv region these
  /// ops are claimed either way.
  bool regions_without_conv = false;
};
compiler::VendorRules Rules(RulesOptions options = {});

/// RulesOptions from string vendor options (CompileOptions::external_options): keys
/// "constant_weight_gemms" and "regions_without_conv", values 0 / 1 / false / true; absent keys
/// keep their defaults. InvalidArgument naming the key for an unknown key or another value.
StatusOr<RulesOptions> ParseRulesOptions(const compiler::ExternalOptions& options);

}  // namespace kiln::onednn

#endif  // KILN_EXTERNAL_ONEDNN_COMPILE_RULES_H_
