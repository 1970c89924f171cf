// The oneDNN vendor's annotation rules for compiler/passes/partition (compile side): which nodes
// it claims, its composite patterns and the ops that make a region worth offloading.
#ifndef KILN_EXTERNAL_ONEDNN_RULES_H_
#define KILN_EXTERNAL_ONEDNN_RULES_H_

#include "compiler/passes/partition.h"

namespace kiln::onednn {

/// vendor "onednn"; supported = IsSupported (codegen.h); composites: the erf forms of Gelu
/// (0.5 * x * (1 + erf(x / sqrt 2)) in the two operand orders exporters write), whose Erf
/// and Div oneDNN does not run alone; anchors: Conv, ConvTranspose, MatMul, Gemm, pools,
/// Softmax, LogSoftmax, LayerNormalization, BatchNormalization.
compiler::VendorRules Rules();

}  // namespace kiln::onednn

#endif  // KILN_EXTERNAL_ONEDNN_RULES_H_
