// A plain C++ reference of the quickstart model (double precision), to check kiln against.
#ifndef KILN_EXAMPLES_QUICKSTART_REFERENCE_H_
#define KILN_EXAMPLES_QUICKSTART_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "examples/quickstart/model_def.h"

namespace quickstart {

/// probabilities[batch, kClasses] of the model on `ids` (batch x seq, row-major). Straight
/// loops over the ONNX semantics, sharing nothing with kiln but the weights.
inline std::vector<double> Reference(const Weights& w, const std::vector<int64_t>& ids,
                                     int64_t batch, int64_t seq) {
  std::vector<double> probs(static_cast<size_t>(batch * kClasses));
  std::vector<double> x(kHidden), ln(kHidden), h(kFfn), pooled(kHidden);
  for (int64_t b = 0; b < batch; ++b) {
    std::fill(pooled.begin(), pooled.end(), 0.0);
    for (int64_t s = 0; s < seq; ++s) {
      const float* e = &w.embedding[static_cast<size_t>(ids[b * seq + s] * kHidden)];  // Gather
      double mean = 0, var = 0;                                                        // LayerNorm
      for (int64_t i = 0; i < kHidden; ++i) mean += e[i];
      mean /= kHidden;
      for (int64_t i = 0; i < kHidden; ++i) var += (e[i] - mean) * (e[i] - mean);
      var /= kHidden;
      double inv = 1.0 / std::sqrt(var + kLayerNormEpsilon);
      for (int64_t i = 0; i < kHidden; ++i)
        ln[i] = (e[i] - mean) * inv * w.ln_gamma[i] + w.ln_beta[i];
      for (int64_t j = 0; j < kFfn; ++j) {  // MatMul + bias, then Gelu (erf form)
        double acc = w.b1[j];
        for (int64_t i = 0; i < kHidden; ++i) acc += ln[i] * w.w1[i * kFfn + j];
        h[j] = acc * 0.5 * (1.0 + std::erf(acc / std::sqrt(2.0)));
      }
      for (int64_t i = 0; i < kHidden; ++i) {  // MatMul + bias, residual, sum for the mean
        double acc = w.b2[i];
        for (int64_t j = 0; j < kFfn; ++j) acc += h[j] * w.w2[j * kHidden + i];
        pooled[i] += ln[i] + acc;
      }
    }
    double logits[kClasses], max_logit = -1e300, sum = 0;
    for (int64_t c = 0; c < kClasses; ++c) {  // ReduceMean, Gemm
      double acc = w.bc[c];
      for (int64_t i = 0; i < kHidden; ++i) acc += pooled[i] / seq * w.wc[i * kClasses + c];
      logits[c] = acc;
      max_logit = std::max(max_logit, acc);
    }
    for (int64_t c = 0; c < kClasses; ++c) sum += std::exp(logits[c] - max_logit);  // Softmax
    for (int64_t c = 0; c < kClasses; ++c) {
      probs[b * kClasses + c] = std::exp(logits[c] - max_logit) / sum;
    }
  }
  return probs;
}

}  // namespace quickstart

#endif  // KILN_EXAMPLES_QUICKSTART_REFERENCE_H_
