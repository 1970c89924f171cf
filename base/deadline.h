// The deadline of the run on the current thread, so that long kernels and vendor regions can stop
// between chunks of work instead of only between VM instructions.
#ifndef KILN_BASE_DEADLINE_H_
#define KILN_BASE_DEADLINE_H_

#include <chrono>

namespace kiln {

using Clock = std::chrono::steady_clock;

/// The clock every deadline is checked against: Clock::now(), unless a test replaced it
/// (ScopedDeadlineClockForTesting). Costs one relaxed atomic load more than Clock::now().
Clock::time_point DeadlineNow();

/// The deadline the VM run on this thread has, or Clock::time_point::max() when it has none (or
/// no run is active). Cheap: one thread-local read.
Clock::time_point CurrentDeadline();

/// True when the current thread's run has a deadline and it has passed (by DeadlineNow). Reads
/// the clock only when there is a deadline.
bool DeadlinePassed();

/// Sets the current thread's deadline for its lifetime and restores the previous one after
/// (scopes nest: an inner run's deadline applies inside it). Code that cuts work short because
/// the deadline passed must leave its caller able to tell: the VM checks the deadline after every
/// kernel and region call and discards the outputs of a call that ran past it.
class ScopedDeadline {
 public:
  explicit ScopedDeadline(Clock::time_point deadline);
  ~ScopedDeadline();
  ScopedDeadline(const ScopedDeadline&) = delete;
  ScopedDeadline& operator=(const ScopedDeadline&) = delete;

 private:
  Clock::time_point previous_;
};

/// Test hook: while it lives, DeadlineNow() returns `now()` on every thread, so that tests of
/// deadlines advance time themselves instead of racing the wall clock on a loaded machine.
/// `now` must be thread-safe. One at a time per process (not nestable); never in production.
class ScopedDeadlineClockForTesting {
 public:
  explicit ScopedDeadlineClockForTesting(Clock::time_point (*now)());
  ~ScopedDeadlineClockForTesting();
  ScopedDeadlineClockForTesting(const ScopedDeadlineClockForTesting&) = delete;
  ScopedDeadlineClockForTesting& operator=(const ScopedDeadlineClockForTesting&) = delete;
};

}  // namespace kiln

#endif  // KILN_BASE_DEADLINE_H_
