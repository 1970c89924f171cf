// Dynamic batching of one model's requests: requests that arrive together are concatenated along
// the batch dim (dim 0), run as one invocation, and their outputs split back.
#ifndef KILN_EXAMPLES_SERVING_BATCHER_H_
#define KILN_EXAMPLES_SERVING_BATCHER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "vm/executable.h"

namespace kiln::serving {

class Model;

struct BatchOptions {
  /// Most requests in one invocation; <= 1 turns batching off.
  int max_batch = 0;
  /// How long the first request of a batch waits for others.
  std::chrono::microseconds timeout{500};
};

/// True if every input and output of `sig` has a symbolic dim 0 and all name the same symbol
/// (e.g. "batch"), so requests can be stacked along it.
bool IsBatchable(const FunctionSignature& sig);

/// Collects concurrent requests for one model version. Run blocks its caller (a worker) until
/// its request has run: the first caller to find no batch being collected collects one (waiting
/// at most `timeout` for up to `max_batch` requests), runs it and wakes the others. So a batch
/// holds at most as many requests as there are workers waiting in Run. Thread-safe.
class Batcher {
 public:
  Batcher(const Model& model, BatchOptions options) : model_(model), options_(options) {}

  /// The outputs of `inputs` (one request, already checked against the signature), computed in
  /// a batch with other requests when their shapes beyond dim 0 agree. If a batched invocation
  /// fails, each of its requests is run alone, so errors belong to the request that caused
  /// them. The batch stops at the earliest deadline of its requests.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& inputs,
                                    std::chrono::steady_clock::time_point deadline);

  struct Stats {
    uint64_t batches = 0;      // invocations attempted with more than one request
    uint64_t requests = 0;     // requests that ran inside such an invocation
    uint64_t most_queued = 0;  // the most requests waiting when a batch was taken from them
  };
  Stats stats() const;

 private:
  struct Request {
    const std::vector<Tensor>* inputs;
    std::chrono::steady_clock::time_point deadline;
    StatusOr<std::vector<Tensor>> result = Status(StatusCode::kInternal, "not run");
    bool done = false;
  };
  // Takes the batch: the front request and those after it whose inputs stack with it.
  std::vector<Request*> TakeBatch();
  void Execute(const std::vector<Request*>& batch);

  const Model& model_;
  BatchOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Stats stats_;
  std::deque<Request*> queue_;
  bool collecting_ = false;
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_BATCHER_H_
