// The current thread's run deadline (a thread-local the VM sets around a run).
#include "base/deadline.h"

namespace kiln {
namespace {

thread_local Clock::time_point current_deadline = Clock::time_point::max();

}  // namespace

Clock::time_point CurrentDeadline() { return current_deadline; }

bool DeadlinePassed() {
  return current_deadline != Clock::time_point::max() && Clock::now() >= current_deadline;
}

ScopedDeadline::ScopedDeadline(Clock::time_point deadline) : previous_(current_deadline) {
  current_deadline = deadline;
}

ScopedDeadline::~ScopedDeadline() { current_deadline = previous_; }

}  // namespace kiln
