// A fixed pool of inference workers behind a bounded queue (models lend contexts per request).
#ifndef KILN_EXAMPLES_SERVING_WORKER_POOL_H_
#define KILN_EXAMPLES_SERVING_WORKER_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "base/status.h"

namespace kiln::serving {

/// Runs jobs on `num_workers` threads. A job goes to an idle worker, or else waits in a queue
/// of at most `max_queue` entries; TrySubmit refuses rather than blocks when neither is
/// available, so callers can answer "overloaded" at once. Thread-safe.
class WorkerPool {
 public:
  using Job = std::function<void()>;

  /// Starts the threads. InvalidArgument for num_workers < 1.
  static StatusOr<std::unique_ptr<WorkerPool>> Start(int num_workers, size_t max_queue);
  /// Shutdown().
  ~WorkerPool();

  /// False (and `job` is dropped unrun) if the queue is full or the pool is shutting down.
  /// `then`, if given, runs on the same worker after `job`, once the worker already counts as
  /// idle: hand the result on there (post a reply, fulfil a promise), so a request that the
  /// result provokes at once finds this worker free even with max_queue 0.
  bool TrySubmit(Job job, Job then = nullptr);
  /// Stops taking jobs, runs those already queued, joins the threads. Idempotent.
  void Shutdown();

  /// Jobs waiting for a worker.
  size_t queued() const;
  /// Jobs being run.
  size_t running() const;

 private:
  explicit WorkerPool(size_t max_queue) : max_queue_(max_queue) {}
  void Loop();

  size_t max_queue_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Entry {
    Job job;
    Job then;
  };
  std::deque<Entry> queue_;
  bool stopping_ = false;
  size_t idle_ = 0;  // workers not running a job; each absorbs one submitted job

  std::vector<std::thread> threads_;
};

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_WORKER_POOL_H_
