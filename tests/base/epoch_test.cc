// Tests for vm/epoch: a retired object is freed only after every guard that could use it ends.
#define BOOST_TEST_MODULE epoch_test
#include "base/epoch.h"

#include <atomic>
#include <boost/test/unit_test.hpp>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {
namespace {

// A flag the retired callback sets; shared so a late free never writes to a dead test frame.
std::shared_ptr<std::atomic<bool>> NewFlag() { return std::make_shared<std::atomic<bool>>(false); }

void RetireSetting(const std::shared_ptr<std::atomic<bool>>& flag) {
  RetireWhenUnused([flag] { flag->store(true); });
}

BOOST_AUTO_TEST_CASE(without_guards_a_retired_object_is_freed_at_once) {
  auto freed = NewFlag();
  RetireSetting(freed);
  BOOST_TEST(freed->load());
  BOOST_TEST(RetiredCount() == 0u);
}

BOOST_AUTO_TEST_CASE(the_outermost_guard_of_a_thread_holds_a_retirement_back) {
  auto freed = NewFlag();
  {
    EpochGuard outer;
    {
      EpochGuard inner;
      RetireSetting(freed);
      BOOST_TEST(!freed->load());
    }
    BOOST_TEST(!freed->load());  // the inner guard's end is not the run's end
    BOOST_TEST(ReclaimRetired() == 1u);
    BOOST_TEST(!freed->load());
  }
  BOOST_TEST(freed->load());  // freed by the outer guard's exit
  BOOST_TEST(RetiredCount() == 0u);
}

BOOST_AUTO_TEST_CASE(a_guard_that_begins_after_the_retirement_does_not_hold_it_back) {
  auto early = NewFlag(), late = NewFlag();
  std::mutex mu;
  std::condition_variable cv;
  int stage = 0;  // 1: the other thread holds a guard; 2: retired; 3: release the guard
  std::thread other([&] {
    EpochGuard guard;
    std::unique_lock<std::mutex> lock(mu);
    stage = 1;
    cv.notify_all();
    cv.wait(lock, [&] { return stage == 3; });
  });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return stage == 1; });
  }
  RetireSetting(early);  // the other thread's guard was alive: held back
  BOOST_TEST(!early->load());
  {
    EpochGuard mine;  // began after `early` was retired
    RetireSetting(late);
    BOOST_TEST(ReclaimRetired() == 2u);
  }
  BOOST_TEST(!early->load());
  BOOST_TEST(!late->load());  // the other thread's guard holds both back
  {
    std::lock_guard<std::mutex> lock(mu);
    stage = 3;
  }
  cv.notify_all();
  other.join();  // its guard's exit frees both
  BOOST_TEST(early->load());
  BOOST_TEST(late->load());
}

// Readers take a guard, load the current object and check it is alive while they use it; a
// writer swaps in new objects and retires the old ones, which are marked dead when freed. Any
// reader seeing a dead object means something was freed under a guard that could reach it.
BOOST_AUTO_TEST_CASE(readers_never_see_an_object_freed_under_their_guard) {
  struct Object {
    std::atomic<bool> alive{true};
    int value = 0;
  };
  std::vector<std::unique_ptr<Object>> all;  // owned here, so that "freed" is observable
  for (int i = 0; i < 2001; ++i) {
    all.push_back(std::make_unique<Object>());
    all.back()->value = i;
  }
  std::atomic<Object*> current{all[0].get()};
  std::atomic<bool> stop{false};
  std::atomic<int64_t> dead_seen{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&] {
      while (!stop.load()) {
        EpochGuard guard;
        Object* o = current.load(std::memory_order_acquire);
        for (int k = 0; k < 20; ++k) {
          if (!o->alive.load(std::memory_order_acquire)) dead_seen.fetch_add(1);
        }
        reads.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  // The swaps must overlap the reads however the threads are scheduled (a loaded CI machine
  // once ran all 2000 swaps before any reader started): every 100 swaps, wait until the readers
  // have made progress since the last wait. Returns the count it saw.
  auto wait_for_reads = [&](int64_t since) {
    int64_t now;
    while ((now = reads.load(std::memory_order_relaxed)) <= since) std::this_thread::yield();
    return now;
  };
  int64_t seen = wait_for_reads(0);
  for (int i = 1; i < 2001; ++i) {
    Object* old = current.exchange(all[i].get(), std::memory_order_acq_rel);
    RetireWhenUnused([old] { old->alive.store(false, std::memory_order_release); });
    if (i % 100 == 0) seen = wait_for_reads(seen);
  }
  stop.store(true);
  for (std::thread& t : readers) t.join();
  BOOST_TEST(ReclaimRetired() == 0u);  // no guard left: everything retired is freed
  BOOST_TEST(dead_seen.load() == 0);
  BOOST_TEST(reads.load() >= 20);  // at least one read during each 100 swaps
  int freed = 0;
  for (int i = 0; i < 2000; ++i) freed += all[i]->alive.load() ? 0 : 1;
  BOOST_TEST(freed == 2000);
  BOOST_TEST(all[2000]->alive.load());
}

BOOST_AUTO_TEST_CASE(threads_that_have_exited_hold_nothing_back) {
  // Threads that come and go (their slots reused) hold nothing back once they are gone.
  for (int i = 0; i < 50; ++i) {
    std::thread([] { EpochGuard guard; }).join();
  }
  auto freed = NewFlag();
  RetireSetting(freed);
  BOOST_TEST(freed->load());
}

}  // namespace
}  // namespace kiln
