// Zoo models without their weights: a model's float weights are replaced by their range
// (Strip), and filled again from a seeded generator (Fill), so real architectures can be
// committed as a few kilobytes of graph and still run with weights of the right scale.
#ifndef KILN_TESTS_ZOO_WEIGHTS_H_
#define KILN_TESTS_ZOO_WEIGHTS_H_

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

#include "base/allocator.h"
#include "base/status.h"
#include "base/tensor.h"

namespace kiln::zoo {

/// Every float initializer with more than `keep_up_to` elements, all finite, loses its data
/// and records its range in its doc_string ("kiln-fill uniform MIN MAX"). Others (integers,
/// small tensors such as biases of a few channels, tensors holding Inf/NaN such as masks) are
/// kept verbatim. InvalidArgument for external data (the zoo models used here are inline).
/// Returns the number of initializers stripped.
StatusOr<int> StripWeights(onnx::ModelProto& model, int64_t keep_up_to = 64);

/// Fills every initializer Strip emptied with values uniform in its [MIN, MAX], from a
/// generator seeded by the initializer's name (so the result depends on neither order nor
/// platform: splitmix64, computed in double, rounded once to float). A tensor whose MIN == MAX
/// (LayerNorm's ones, say) gets exactly that value. InvalidFormat naming the initializer for a
/// malformed doc_string. Returns the number filled.
StatusOr<int> FillWeights(onnx::ModelProto& model);

/// `count` values uniform in [lo, hi) from `seed` (the same generator as FillWeights).
std::vector<double> Uniform(uint64_t seed, int64_t count, double lo, double hi);

/// One model of the subset (a line of tests/zoo/data/cases.txt): its input is `shape` values
/// uniform in [lo, hi) from `seed` (i64 inputs take the floor: token ids in [lo, hi)).
struct Case {
  std::string name;   // NAME.graph.onnx, NAME.ref.npy
  std::string input;  // the model's input name
  DType dtype = DType::kInvalid;  // kF32 or kI64
  std::vector<int64_t> shape;
  double lo = 0, hi = 0;
  uint64_t seed = 0;
};

/// Lines "NAME INPUT f32|i64 D0,D1,... LO HI SEED"; '#' starts a comment. InvalidFormat
/// naming the line for anything else.
StatusOr<std::vector<Case>> ParseCases(const std::string& text);

/// The input tensor of `c` (see Case).
StatusOr<Tensor> MakeInput(const Case& c, Allocator& allocator);

}  // namespace kiln::zoo

#endif  // KILN_TESTS_ZOO_WEIGHTS_H_
