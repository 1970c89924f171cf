// Demo models for kiln_serve's README, tests and load test: vm/builder.h code, JIT kernels.
#ifndef KILN_EXAMPLES_SERVING_DEMO_MODEL_H_
#define KILN_EXAMPLES_SERVING_DEMO_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace kiln::serving {

/// "affine": x: FP32[batch, 4], b: FP32[4] -> y = x + b: FP32[batch, 4] (b broadcast over rows),
/// s = row sums of x: FP32[batch]. Outputs are allocated from the batch size (shape functions),
/// so any batch runs. Kernels are kernel IR, JIT-compiled on first use.
StatusOr<std::vector<uint8_t>> BuildAffineModel();

/// "spin": n: INT64[] -> total: INT64[] = sum_{i<n} i, one loop iteration per i (two JIT kernel
/// calls and a compare each): a model whose run time the client controls, to test queueing,
/// overload and deadlines.
StatusOr<std::vector<uint8_t>> BuildSpinModel();

/// "add": a: FP32[n], b: FP32[n] -> c = a + b: FP32[n]. Both inputs share the symbolic dim n,
/// which only Context::Invoke checks (an invocation error a server must map to 400).
StatusOr<std::vector<uint8_t>> BuildAddModel();

/// Writes `bytes` to `path`. InvalidArgument naming the path if it cannot.
Status WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_DEMO_MODEL_H_
