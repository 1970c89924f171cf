// Epoch-based reclamation: freeing what other threads may still be running (JIT code).
#ifndef KILN_BASE_EPOCH_H_
#define KILN_BASE_EPOCH_H_

#include <cstddef>
#include <functional>

namespace kiln {

/// Marks the calling thread as possibly using retired objects while the guard lives. An object
/// retired (RetireWhenUnused) while a guard is alive on any thread is not freed before that
/// guard ends; guards that begin after the retirement never hold it back, so the object must be
/// unreachable for new users (removed from every table) before it is retired.
///
/// Nested guards on one thread are a thread-local counter; only the outermost touches shared
/// memory (one store and a fence on entry, one store on exit), so the VM takes one guard per
/// function run and each kernel call takes a nested one. The outermost guard's exit also frees
/// what it was holding back. Not movable; a guard must end on the thread that made it.
class EpochGuard {
 public:
  EpochGuard();
  ~EpochGuard();
  EpochGuard(const EpochGuard&) = delete;
  EpochGuard& operator=(const EpochGuard&) = delete;
};

/// Calls `free` (once, on some thread) when no guard that was alive at this call is alive any
/// more: at once if none is, else at the end of the last such guard or at a later
/// RetireWhenUnused / ReclaimRetired. `free` must not throw and must not take a guard. Called
/// inside a guard, the caller's own guard holds it back. What is still retired when the process
/// exits is never freed.
void RetireWhenUnused(std::function<void()> free);

/// Frees what no live guard holds back; returns how many retired objects remain.
size_t ReclaimRetired();

/// Retired objects not yet freed (tests, stats).
size_t RetiredCount();

}  // namespace kiln

#endif  // KILN_BASE_EPOCH_H_
