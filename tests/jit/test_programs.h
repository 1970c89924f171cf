// Small executables built in code (no compiler, no ONNX) for tests and the fixture programs:
// one without kernels, and ones around a JIT kernel stored as kernel IR.
#ifndef KILN_TESTS_JIT_TEST_PROGRAMS_H_
#define KILN_TESTS_JIT_TEST_PROGRAMS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "jit/kernel_ir.h"
#include "vm/builder.h"

namespace kiln::jit::testing {

/// `k` stored as kernel IR (kPayloadFormat) with the given dtype signature, no dispatch hints.
KernelDef KirKernel(const Kernel& k, std::vector<DType> ins, std::vector<DType> outs);
/// The shape function `k` (a kernel writing i64[rank]) stored as kernel IR.
ShapeFunctionDef KirShapeFunction(const Kernel& k, int ins = 1, int outs = 1);

/// Adds to `b` a constant w = [0.5, -1.5], @main(x: f32[n, 3], k: i64[]) -> (k, x, w) (its
/// load_const attributed to the ONNX node "Identity_0"), @spin() (loops forever) and the entry
/// "main" in the metadata. No kernels: it runs without a kernel provider.
void AddPassThroughProgram(ExecutableBuilder& b);

/// Adds to `b` one kernel and @main(x: f32[3]) -> (y: f32[3]) = x + x through it, on a 12-byte
/// storage.
void AddTwicePlusProgram(ExecutableBuilder& b);

/// Adds to `b` @main(x: f32[3]) -> (y: f32[3]) through one external region "acme_0" of vendor
/// `vendor` (blob "x2") whose fallback function computes y = x + x through one kernel, the
/// region marked as `kiln compile --tune` marks a region its fallback beat (format 1.4): a
/// load runs the fallback unless told to ignore the mark or to require the vendor.
void AddTunedFallbackProgram(ExecutableBuilder& b, const std::string& vendor);

/// Adds to `b` one kernel and @main(x: f32[n, m]) -> (y: f32[n, m]) = exp(x) through it (vector
/// math: a compile of tens of ms), its output on a storage of `storage_bytes` (>= 4 n m).
void AddExpProgram(ExecutableBuilder& b, int64_t storage_bytes);

}  // namespace kiln::jit::testing

#endif  // KILN_TESTS_JIT_TEST_PROGRAMS_H_
