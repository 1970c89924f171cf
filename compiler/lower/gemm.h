// Facts about the JIT's GEMM that compiler passes need (compiler/passes/pack_weights).
#ifndef KILN_COMPILER_LOWER_GEMM_H_
#define KILN_COMPILER_LOWER_GEMM_H_

#include <cstdint>

namespace kiln::compiler {

/// Width, in f32 columns, of the register tiles and B panels of the JIT's GEMM for a large n on
/// the compiling host: 16 with AVX2 (two 8-lane vectors), 64 with AVX-512. kiln::PackedMatMul's
/// weights are packed in panels of this width.
int64_t GemmPanelCols();

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_LOWER_GEMM_H_
