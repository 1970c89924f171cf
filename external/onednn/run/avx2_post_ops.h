// The post-ops kiln's own convolutions (winograd_conv.h, small_conv.h) apply to their outputs,
// with the AVX2 + FMA code that applies them to 8 floats at a time (internal to
// external/onednn/run). Header-only: each user compiles it with AVX2 + FMA enabled per function
// (the library is built for baseline x86-64 and calls these only after checking the CPU).
#ifndef KILN_EXTERNAL_ONEDNN_RUN_AVX2_POST_OPS_H_
#define KILN_EXTERNAL_ONEDNN_RUN_AVX2_POST_OPS_H_

#include <immintrin.h>

#include <cstdint>
#include <vector>

#define KILN_AVX2 __attribute__((target("avx2,fma")))

namespace kiln::onednn::internal {

/// A post-op in oneDNN's meaning, applied to each output in order: kRelu (alpha: negative
/// slope), kClip (alpha, beta: bounds), kSum (dst += its old value: the residual of a fused
/// Add), kSigmoid, kTanh, kSwish (x * sigmoid(alpha x)), kHardSwish (x * min(max(x + 3, 0), 6)
/// / 6), kLinear (alpha x + beta). The exponential-based ones are accurate to a few float32 ulp
/// of their result (absolute, for |result| < 1), as oneDNN's.
struct WinogradPostOp {
  enum class Kind : uint8_t { kRelu, kClip, kSum, kSigmoid, kTanh, kSwish, kHardSwish, kLinear };
  Kind kind = Kind::kRelu;
  float alpha = 0.0f, beta = 0.0f;
};

// exp(x) for every float x, to ~2 ulp: x clamped to [-87.3, 88.3] (the normal range; the
// ends give 1.2e-38 and 2.3e38, which the sigmoid / tanh below only divide by), n = round(x /
// ln 2), r = x - n ln 2 (Cody-Waite, two constants), e^r by its degree-6 Taylor polynomial
// (|r| <= ln 2 / 2: truncation below 2e-8 relative), times 2^n built in the exponent bits.
KILN_AVX2 inline __m256 Avx2Exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145752f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860677e-6f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  const __m256i bits =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}

// 1 / (1 + e^-x). A NaN x gives NaN (the clamp in Avx2Exp passes it through min / max as
// their second operand... so it is restored here).
KILN_AVX2 inline __m256 Avx2Sigmoid(__m256 x) {
  const __m256 one = _mm256_set1_ps(1.0f);
  __m256 s =
      _mm256_div_ps(one, _mm256_add_ps(one, Avx2Exp(_mm256_sub_ps(_mm256_setzero_ps(), x))));
  return _mm256_blendv_ps(s, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// tanh(x) = sign(x) (1 - 2 / (e^{2|x|} + 1)): absolute error ~1 ulp of 1, never past +-1.
KILN_AVX2 inline __m256 Avx2Tanh(__m256 x) {
  const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
  const __m256 ax = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = Avx2Exp(_mm256_add_ps(ax, ax));
  __m256 t = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  t = _mm256_or_ps(t, sign);
  return _mm256_blendv_ps(t, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// y after the post-ops, oneDNN's order; `old` is dst's value before the run (for sum).
KILN_AVX2 inline __m256 ApplyPostOps(__m256 y, const std::vector<WinogradPostOp>& ops,
                                     const float* old) {
  for (const WinogradPostOp& po : ops) {
    switch (po.kind) {
      case WinogradPostOp::Kind::kSigmoid:
        y = Avx2Sigmoid(y);
        break;
      case WinogradPostOp::Kind::kTanh:
        y = Avx2Tanh(y);
        break;
      case WinogradPostOp::Kind::kSwish:
        y = _mm256_mul_ps(y, Avx2Sigmoid(_mm256_mul_ps(y, _mm256_set1_ps(po.alpha))));
        break;
      case WinogradPostOp::Kind::kHardSwish: {
        __m256 g = _mm256_add_ps(y, _mm256_set1_ps(3.0f));
        g = _mm256_min_ps(_mm256_set1_ps(6.0f), _mm256_max_ps(_mm256_setzero_ps(), g));
        y = _mm256_mul_ps(y, _mm256_mul_ps(g, _mm256_set1_ps(1.0f / 6)));
        break;
      }
      case WinogradPostOp::Kind::kLinear:
        y = _mm256_fmadd_ps(y, _mm256_set1_ps(po.alpha), _mm256_set1_ps(po.beta));
        break;
      case WinogradPostOp::Kind::kRelu:
        if (po.alpha == 0.0f) {
          y = _mm256_max_ps(_mm256_setzero_ps(), y);  // a NaN y stays NaN, as in oneDNN
        } else {
          __m256 pos = _mm256_cmp_ps(y, _mm256_setzero_ps(), _CMP_GT_OQ);
          y = _mm256_blendv_ps(_mm256_mul_ps(y, _mm256_set1_ps(po.alpha)), y, pos);
        }
        break;
      case WinogradPostOp::Kind::kClip:
        // maxps / minps return their second operand when one is NaN: NaN stays NaN.
        y = _mm256_min_ps(_mm256_set1_ps(po.beta), _mm256_max_ps(_mm256_set1_ps(po.alpha), y));
        break;
      case WinogradPostOp::Kind::kSum:
        y = _mm256_add_ps(y, _mm256_loadu_ps(old));
        break;
    }
  }
  return y;
}

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_AVX2_POST_OPS_H_
