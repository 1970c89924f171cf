// The quickstart model's sizes and weights: shared by the ONNX generator and the reference.
//
// A tiny text classifier: input_ids i64[batch, seq] -> embedding -> LayerNorm -> feed-forward
// (MatMul + bias, exact Gelu, MatMul + bias) -> residual Add -> mean over seq -> Gemm -> Softmax.
// Weights come from a fixed-seed generator (splitmix64, not <random>'s distributions, whose
// output is implementation-defined), so every build writes the same model.
#ifndef KILN_EXAMPLES_QUICKSTART_MODEL_DEF_H_
#define KILN_EXAMPLES_QUICKSTART_MODEL_DEF_H_

#include <cstdint>
#include <vector>

namespace quickstart {

inline constexpr int64_t kVocab = 1000;
inline constexpr int64_t kHidden = 64;
inline constexpr int64_t kFfn = 128;
inline constexpr int64_t kClasses = 4;
inline constexpr float kLayerNormEpsilon = 1e-5f;

/// Every weight of the model, row-major in the layouts the ONNX initializers have.
struct Weights {
  std::vector<float> embedding;  // [kVocab, kHidden]
  std::vector<float> ln_gamma;   // [kHidden]
  std::vector<float> ln_beta;    // [kHidden]
  std::vector<float> w1;         // [kHidden, kFfn]
  std::vector<float> b1;         // [kFfn]
  std::vector<float> w2;         // [kFfn, kHidden]
  std::vector<float> b2;         // [kHidden]
  std::vector<float> wc;         // [kHidden, kClasses]
  std::vector<float> bc;         // [kClasses]
};

/// splitmix64: a fixed, portable sequence.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [-1, 1), 24 random bits (exact in f32).
  float Symmetric() { return static_cast<float>(Next() >> 40) * (2.0f / (1 << 24)) - 1.0f; }

 private:
  uint64_t state_;
};

inline std::vector<float> Uniform(Rng& rng, int64_t n, float scale, float offset = 0) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = offset + scale * rng.Symmetric();
  return v;
}

/// The model's weights (seed 2026). Scales keep activations O(1): 1/sqrt(fan_in) for the
/// feed-forward matrices, larger for the classifier so the probabilities are not all 1/4.
inline Weights MakeWeights() {
  Rng rng(2026);
  Weights w;
  w.embedding = Uniform(rng, kVocab * kHidden, 1.0f);
  w.ln_gamma = Uniform(rng, kHidden, 0.2f, 1.0f);
  w.ln_beta = Uniform(rng, kHidden, 0.1f);
  w.w1 = Uniform(rng, kHidden * kFfn, 0.125f);
  w.b1 = Uniform(rng, kFfn, 0.1f);
  w.w2 = Uniform(rng, kFfn * kHidden, 0.088f);
  w.b2 = Uniform(rng, kHidden, 0.1f);
  w.wc = Uniform(rng, kHidden * kClasses, 1.0f);
  w.bc = Uniform(rng, kClasses, 0.1f);
  return w;
}

/// Token ids for a request of `batch` x `seq` (deterministic, in [0, kVocab)).
inline std::vector<int64_t> MakeInputIds(int64_t batch, int64_t seq, uint64_t seed) {
  Rng rng(seed * 1000003 + static_cast<uint64_t>(batch * 7919 + seq));
  std::vector<int64_t> ids(static_cast<size_t>(batch * seq));
  for (int64_t& id : ids) id = static_cast<int64_t>(rng.Next() % kVocab);
  return ids;
}

}  // namespace quickstart

#endif  // KILN_EXAMPLES_QUICKSTART_MODEL_DEF_H_
