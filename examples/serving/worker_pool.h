// A fixed pool of inference workers behind a bounded queue; each worker owns one Context per model.
#ifndef KILN_EXAMPLES_SERVING_WORKER_POOL_H_
#define KILN_EXAMPLES_SERVING_WORKER_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "examples/serving/model_repository.h"
#include "vm/context.h"

namespace kiln::serving {

/// What a job sees: the worker's contexts, indexed like ModelRepository::models().
struct WorkerContexts {
  std::vector<std::unique_ptr<Context>> by_model;
};

/// Runs jobs on `num_workers` threads. A job goes to an idle worker, or else waits in a queue
/// of at most `max_queue` entries; TrySubmit refuses rather than blocks when neither is
/// available, so callers can answer "overloaded" at once. Thread-safe.
class WorkerPool {
 public:
  using Job = std::function<void(WorkerContexts&)>;

  /// Creates every worker's contexts up front (errors name the model), then starts the threads.
  static StatusOr<std::unique_ptr<WorkerPool>> Start(std::shared_ptr<const ModelRepository> repo,
                                                     int num_workers, size_t max_queue);
  /// Shutdown().
  ~WorkerPool();

  /// False (and `job` is dropped unrun) if the queue is full or the pool is shutting down.
  bool TrySubmit(Job job);
  /// Stops taking jobs, runs those already queued, joins the threads. Idempotent.
  void Shutdown();

  size_t queued() const;

 private:
  WorkerPool(std::shared_ptr<const ModelRepository> repo, size_t max_queue)
      : repo_(std::move(repo)), max_queue_(max_queue) {}
  void Loop(WorkerContexts* contexts);

  std::shared_ptr<const ModelRepository> repo_;
  size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  size_t idle_ = 0;  // workers not running a job; each absorbs one submitted job

  std::vector<std::unique_ptr<WorkerContexts>> contexts_;
  std::vector<std::thread> threads_;
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_WORKER_POOL_H_
