// Straightforward C++ row softmax and layer norm: the baselines the JIT's kernels are measured
// against (compiled with -O3 -march=native in reference_loops.cc).
#ifndef KILN_TESTS_JIT_BENCH_REFERENCE_LOOPS_H_
#define KILN_TESTS_JIT_BENCH_REFERENCE_LOOPS_H_

#include <cstdint>

namespace kiln::bench {

void SoftmaxRows(const float* in, float* out, int64_t rows, int64_t cols);
void LayerNormRows(const float* in, const float* gamma, const float* beta, float* out, int64_t rows,
                   int64_t cols, float epsilon);

/// Largest |got - want| / max(1, |want|) over n elements: the benchmark refuses to time a kernel
/// whose answers are wrong. NaN-safe: a NaN or Inf in either array makes the result +Inf,
/// wherever it is (the benchmarks' inputs and references are finite).
double MaxRelError(const float* got, const float* want, int64_t n);

}  // namespace kiln::bench

#endif  // KILN_TESTS_JIT_BENCH_REFERENCE_LOOPS_H_
