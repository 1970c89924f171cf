// The current thread's run deadline (a thread-local the VM sets around a run).
#include "base/deadline.h"

#include <atomic>

namespace kiln {
namespace {

thread_local Clock::time_point current_deadline = Clock::time_point::max();

// Null: the real clock. Set only by tests (ScopedDeadlineClockForTesting).
std::atomic<Clock::time_point (*)()> test_clock{nullptr};

}  // namespace

Clock::time_point DeadlineNow() {
  Clock::time_point (*now)() = test_clock.load(std::memory_order_relaxed);
  return now != nullptr ? now() : Clock::now();
}

Clock::time_point CurrentDeadline() { return current_deadline; }

bool DeadlinePassed() {
  return current_deadline != Clock::time_point::max() && DeadlineNow() >= current_deadline;
}

ScopedDeadline::ScopedDeadline(Clock::time_point deadline) : previous_(current_deadline) {
  current_deadline = deadline;
}

ScopedDeadline::~ScopedDeadline() { current_deadline = previous_; }

ScopedDeadlineClockForTesting::ScopedDeadlineClockForTesting(Clock::time_point (*now)()) {
  test_clock.store(now, std::memory_order_relaxed);
}

ScopedDeadlineClockForTesting::~ScopedDeadlineClockForTesting() {
  test_clock.store(nullptr, std::memory_order_relaxed);
}

}  // namespace kiln
