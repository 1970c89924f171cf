// Tests for examples/serving/worker_pool: capacity (idle workers + queue), refusal, draining.
#define BOOST_TEST_MODULE worker_pool_test
#include "examples/serving/worker_pool.h"

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <set>
#include <thread>

namespace kiln::serving {
namespace {

// Jobs that block until released, so a test controls exactly how many are running.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  std::atomic<int> started{0}, finished{0};

  WorkerPool::Job Job() {
    return [this]() {
      ++started;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [this] { return open; });
      ++finished;
    };
  }
  void Open() {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
    }
    cv.notify_all();
  }
  void WaitStarted(int n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
};

BOOST_AUTO_TEST_CASE(capacity_is_idle_workers_plus_queue) {
  auto pool = WorkerPool::Start(2, 3);
  BOOST_REQUIRE(pool.ok());
  Gate gate;
  // Two workers running, three waiting: the sixth is refused.
  for (int i = 0; i < 5; ++i) BOOST_TEST((*pool)->TrySubmit(gate.Job()), "job " << i);
  BOOST_TEST(!(*pool)->TrySubmit(gate.Job()));
  gate.WaitStarted(2);
  BOOST_TEST(gate.started.load() == 2);
  BOOST_TEST((*pool)->queued() == 3u);
  BOOST_TEST((*pool)->running() == 2u);
  BOOST_TEST(!(*pool)->TrySubmit(gate.Job()));
  gate.Open();
  (*pool)->Shutdown();  // runs everything queued before returning
  BOOST_TEST(gate.finished.load() == 5);
  BOOST_TEST(!(*pool)->TrySubmit(gate.Job()));  // refused after shutdown
}

BOOST_AUTO_TEST_CASE(zero_queue_still_uses_idle_workers) {
  auto pool = WorkerPool::Start(1, 0);
  BOOST_REQUIRE(pool.ok());
  Gate gate;
  BOOST_TEST((*pool)->TrySubmit(gate.Job()));
  gate.WaitStarted(1);
  BOOST_TEST(!(*pool)->TrySubmit(gate.Job()));
  gate.Open();
  (*pool)->Shutdown();
  BOOST_TEST(gate.finished.load() == 1);
}

// A worker hands its result on in `then`, already counted idle: a job submitted in reply (as a
// client's next request on a keep-alive connection is) is accepted even with no queue.
BOOST_AUTO_TEST_CASE(a_finished_worker_is_idle_before_its_result_leaves) {
  auto pool = WorkerPool::Start(1, 0);
  BOOST_REQUIRE(pool.ok());
  WorkerPool* p = pool->get();
  std::atomic<int> accepted{0}, refused{0}, ran{0};
  std::function<void(int)> chain = [&](int left) {
    bool ok = p->TrySubmit([&ran] { ++ran; }, [&chain, left] {
      if (left > 1) chain(left - 1);
    });
    ++(ok ? accepted : refused);
  };
  chain(100);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (accepted + refused < 100 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  (*pool)->Shutdown();
  BOOST_TEST(refused.load() == 0);
  BOOST_TEST(accepted.load() == 100);
  BOOST_TEST(ran.load() == 100);
}

BOOST_AUTO_TEST_CASE(concurrent_jobs_run_on_distinct_workers) {
  auto pool = WorkerPool::Start(3, 10);
  BOOST_REQUIRE(pool.ok());
  std::mutex mu;
  std::set<std::thread::id> seen;
  Gate gate;
  for (int i = 0; i < 3; ++i) {
    BOOST_TEST((*pool)->TrySubmit([&]() {
      {
        std::lock_guard<std::mutex> lock(mu);
        seen.insert(std::this_thread::get_id());
      }
      gate.Job()();
    }));
  }
  gate.WaitStarted(3);
  gate.Open();
  (*pool)->Shutdown();
  BOOST_TEST(seen.size() == 3u);  // three blocking jobs can only run on three workers
  BOOST_TEST(!WorkerPool::Start(0, 1).ok());
}

}  // namespace
}  // namespace kiln::serving
