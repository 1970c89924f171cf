// What every front end of kiln_serve (REST, gRPC) shares: the models, the worker pool, the
// limits, the metrics and readiness.
#ifndef KILN_EXAMPLES_SERVING_SERVING_CORE_H_
#define KILN_EXAMPLES_SERVING_SERVING_CORE_H_

#include <atomic>
#include <memory>
#include <string>

#include "examples/serving/inference.h"
#include "examples/serving/metrics.h"
#include "examples/serving/model_repository.h"
#include "examples/serving/worker_pool.h"

namespace kiln::serving {

/// Owned by the server; front ends hold a pointer for as long as they run.
struct ServingCore {
  std::shared_ptr<ModelRepository> repo;
  std::unique_ptr<WorkerPool> pool;
  InferLimits limits;
  BatchOptions batching;
  size_t max_queue = 0;
  Metrics metrics;
  /// What a (re)loaded model runs before it is served (the warm-up; null without --warmup).
  ModelRepository::Prepare prepare;
  /// False until warm-up has finished and again once shutdown begins.
  std::atomic<bool> ready{false};

  /// The current version of `name` if `version` is empty or names it; null otherwise.
  std::shared_ptr<const Model> FindModel(std::string_view name, std::string_view version) const {
    std::shared_ptr<const Model> model = repo->Find(name);
    if (model != nullptr && !version.empty() && version != model->version) return nullptr;
    return model;
  }
  /// Runs one checked request on `model` from a worker: through its batcher when batching is
  /// on and the model batchable, else alone on a context from its pool. Errors as InvokeModel's,
  /// and ResourceExhausted when its inputs and outputs hold more than limits.max_request_bytes
  /// (checked before invoking for outputs whose shapes the inputs determine, and after).
  StatusOr<std::vector<Tensor>> Invoke(const Model& model, const std::vector<Tensor>& inputs,
                                       std::chrono::steady_clock::time_point deadline) const {
    const std::string where = "model '" + model.name + "'";
    RETURN_IF_ERROR(CheckRequestBytes(limits, PredictedRequestBytes(model.signature(), inputs),
                                      where, "the inputs and the outputs they imply are"));
    std::vector<Tensor> outputs;
    if (Batcher* batcher = model.GetBatcher(batching)) {
      ASSIGN_OR_RETURN(outputs, batcher->Run(inputs, deadline));
    } else {
      ASSIGN_OR_RETURN(ContextLease ctx, model.AcquireContext());
      ASSIGN_OR_RETURN(outputs, InvokeModel(model, *ctx, inputs, deadline));
    }
    RETURN_IF_ERROR(CheckRequestBytes(limits, TensorBytes(inputs) + TensorBytes(outputs), where,
                                      "the inputs and outputs are"));
    return outputs;
  }
  /// Why a job was refused: "server shutting down" or the queue is full.
  std::string RefusalMessage() const {
    return ready ? "server overloaded: the inference queue is full (" +
                       std::to_string(max_queue) + " waiting)"
                 : std::string("server shutting down");
  }
  /// The Prometheus page, sampling the pool and the runtime now.
  std::string RenderMetrics() const {
    MetricsSnapshot s;
    s.queue_depth = pool->queued();
    s.busy_workers = pool->running();
    for (const auto& model : repo->models()) {
      if (Batcher* b = model->GetBatcher(batching)) {
        Batcher::Stats st = b->stats();
        s.batching.push_back({model->name, st.batches, st.requests});
      }
    }
    RuntimeStats stats;
    if (repo->runtime() != nullptr) {
      stats = repo->runtime()->stats();
      s.runtime = &stats;
    }
    return metrics.Render(s);
  }
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_SERVING_CORE_H_
