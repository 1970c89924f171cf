// Baselines: the loops a careful C++ programmer writes, left to the compiler to vectorize.
#include "tests/jit/bench/reference_loops.h"

#include <cmath>

namespace kiln::bench {

void SoftmaxRows(const float* in, float* out, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * cols;
    float* y = out + r * cols;
    float m = x[0];
    for (int64_t c = 1; c < cols; ++c) m = std::fmax(m, x[c]);
    float s = 0;
    for (int64_t c = 0; c < cols; ++c) {
      y[c] = std::exp(x[c] - m);
      s += y[c];
    }
    float inv = 1.0f / s;
    for (int64_t c = 0; c < cols; ++c) y[c] *= inv;
  }
}

void LayerNormRows(const float* in, const float* gamma, const float* beta, float* out, int64_t rows,
                   int64_t cols, float epsilon) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * cols;
    float* y = out + r * cols;
    float sum = 0;
    for (int64_t c = 0; c < cols; ++c) sum += x[c];
    float mean = sum / cols;
    float sq = 0;
    for (int64_t c = 0; c < cols; ++c) sq += (x[c] - mean) * (x[c] - mean);
    float rstd = 1.0f / std::sqrt(sq / cols + epsilon);
    for (int64_t c = 0; c < cols; ++c) y[c] = (x[c] - mean) * rstd * gamma[c] + beta[c];
  }
}

double MaxRelError(const float* got, const float* want, int64_t n) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    double e = std::fabs(double{got[i]} - want[i]) / std::fmax(1.0, std::fabs(double{want[i]}));
    // std::max(worst, NaN) keeps worst: a NaN element would vanish. Test "within" instead.
    if (!(e <= worst)) worst = e <= HUGE_VAL ? e : HUGE_VAL;
  }
  return worst;
}

}  // namespace kiln::bench
