// The inference worker pool.
#include "examples/serving/worker_pool.h"

namespace kiln::serving {

StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Start(int num_workers, size_t max_queue) {
  if (num_workers < 1) return InvalidArgument("workers must be >= 1");
  std::unique_ptr<WorkerPool> pool(new WorkerPool(max_queue));
  pool->idle_ = static_cast<size_t>(num_workers);
  for (int i = 0; i < num_workers; ++i) {
    pool->threads_.emplace_back([p = pool.get()] { p->Loop(); });
  }
  return pool;
}

WorkerPool::~WorkerPool() { Shutdown(); }

bool WorkerPool::TrySubmit(Job job, Job then) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A worker counts as idle until it pops a job, and a job it is about to take still sits
    // in queue_: capacity is the idle workers plus the queue bound.
    if (stopping_ || queue_.size() >= max_queue_ + idle_) return false;
    queue_.push_back({std::move(job), std::move(then)});
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

size_t WorkerPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

size_t WorkerPool::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return threads_.size() - idle_;
}

void WorkerPool::Loop() {
  while (true) {
    Entry entry;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything queued has run
      entry = std::move(queue_.front());
      queue_.pop_front();
      --idle_;
    }
    entry.job();
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++idle_;
    }
    // Idle before the result leaves: a job submitted in reply to it is accepted (it waits in
    // queue_ the moment this worker needs to finish `then`).
    if (entry.then) entry.then();
  }
}

}  // namespace kiln::serving
