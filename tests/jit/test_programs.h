// Small executables built in code around JIT kernels, for tests and the fixture programs that
// need a kernel stored as kernel IR (no compiler, no ONNX).
#ifndef KILN_TESTS_JIT_TEST_PROGRAMS_H_
#define KILN_TESTS_JIT_TEST_PROGRAMS_H_

#include <cstdint>
#include <vector>

#include "base/dtype.h"
#include "jit/kernel_ir.h"
#include "vm/builder.h"

namespace kiln::jit::testing {

/// `k` stored as kernel IR (kPayloadFormat) with the given dtype signature, no dispatch hints.
KernelDef KirKernel(const Kernel& k, std::vector<DType> ins, std::vector<DType> outs);
/// The shape function `k` (a kernel writing i64[rank]) stored as kernel IR.
ShapeFunctionDef KirShapeFunction(const Kernel& k, int ins = 1, int outs = 1);

/// Adds to `b` one kernel and @main(x: f32[3]) -> (y: f32[3]) = x + x through it, on a 12-byte
/// storage.
void AddTwicePlusProgram(ExecutableBuilder& b);

/// Adds to `b` one kernel and @main(x: f32[n, m]) -> (y: f32[n, m]) = exp(x) through it (vector
/// math: a compile of tens of ms), its output on a storage of `storage_bytes` (>= 4 n m).
void AddExpProgram(ExecutableBuilder& b, int64_t storage_bytes);

}  // namespace kiln::jit::testing

#endif  // KILN_TESTS_JIT_TEST_PROGRAMS_H_
