// Prometheus metrics of a kiln_serve process: per-model request counts by status, a latency
// histogram and in-flight requests; queue depth and JIT counters are sampled when scraped.
#ifndef KILN_EXAMPLES_SERVING_METRICS_H_
#define KILN_EXAMPLES_SERVING_METRICS_H_

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "embed/runtime.h"

namespace kiln::serving {

/// What is sampled at scrape time rather than counted.
struct MetricsSnapshot {
  size_t queue_depth = 0;     // inference jobs waiting for a worker
  size_t busy_workers = 0;    // workers running a job
  const RuntimeStats* runtime = nullptr;  // JIT and allocator counters; null: none
  struct Batching {
    std::string model;
    uint64_t batches = 0;   // invocations that ran more than one request
    uint64_t requests = 0;  // requests that ran in them
  };
  std::vector<Batching> batching;  // models with a batcher
};

/// Thread-safe counters, rendered in the Prometheus text exposition format (version 0.0.4).
class Metrics {
 public:
  /// Latency histogram bucket upper bounds, in seconds (plus +Inf).
  static constexpr std::array<double, 14> kBuckets = {0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                                      0.005,  0.01,    0.025,  0.05,  0.1,
                                                      0.25,   0.5,     1,      2.5};

  /// An inference request for `model` started (in-flight gauge).
  void Begin(std::string_view model);
  /// It ended with `status` (an HTTP status such as "200", or a gRPC code name such as
  /// "INVALID_ARGUMENT") over `protocol` ("rest" or "grpc") after `seconds`.
  void End(std::string_view model, std::string_view protocol, std::string_view status,
           double seconds);
  /// A request for an unknown model: counted under its name with no latency.
  void CountOnly(std::string_view model, std::string_view protocol, std::string_view status);

  /// kiln_inference_requests_total{model,protocol,status}, kiln_inference_request_duration_
  /// seconds{model} (histogram), kiln_inference_in_flight{model}, kiln_inference_queue_depth,
  /// kiln_busy_workers, kiln_batches_total{model} and kiln_batched_requests_total{model}, and
  /// kiln_jit_* counters (compilations, cache hits, shape dispatch) from `snapshot.runtime`.
  std::string Render(const MetricsSnapshot& snapshot) const;

 private:
  struct PerModel {
    std::map<std::pair<std::string, std::string>, uint64_t> by_status;  // (protocol, status)
    std::array<uint64_t, kBuckets.size() + 1> buckets{};                 // last: +Inf
    double sum_seconds = 0;
    uint64_t count = 0;
    int64_t in_flight = 0;
  };
  mutable std::mutex mu_;
  std::map<std::string, PerModel, std::less<>> models_;
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_METRICS_H_
