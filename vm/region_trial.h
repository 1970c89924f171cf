// Region trials: time each external region against its fallback function on the inputs a real
// run gives it, and record which is faster in the executable (`kiln compile --tune`).
#ifndef KILN_VM_REGION_TRIAL_H_
#define KILN_VM_REGION_TRIAL_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/allocator.h"
#include "base/status.h"
#include "vm/executable.h"

namespace kiln {

struct RegionTrialOptions {
  /// Providers to load the executable with (kernels and vendors, as a runtime would). The
  /// trial loads with ignore_tuned_fallback and without require_vendor, whatever these say.
  LoadOptions load;
  /// Values of the entry function's symbolic dims; a symbol not given is 1 (the file is the
  /// compiler's, whose `--dim` pins are already static dims: what is left is a batch, at 1).
  std::map<std::string, int64_t> dims;
  /// Calls of each side before timing (the JIT compiles, the vendor creates primitives), then
  /// `settle` (e.g. wait for background compiles), then one more call of each.
  int warmup_calls = 3;
  std::function<void()> settle;
  /// Timed calls of each side per round, alternated (region first on even calls, fallback
  /// first on odd ones) so that load drifting over time hits both alike; the round's medians
  /// are compared. >= 1.
  int timed_calls = 7;
  /// The fallback wins a round when its median <= margin x the region's, and is preferred when
  /// it wins two rounds in a row: a margin that noise on a loaded host does not produce twice
  /// in medians of alternated calls.
  double margin = 0.9;
  /// What a call costs. kWall: elapsed time, what a user waits for, but on a loaded host a call
  /// longer than a scheduler slice is preempted more often than a short one, which skews the
  /// comparison (dcgan_generator's regions measured 21 ms against 2 ms at normal priority,
  /// 1.9 against 1.7 under `chrt -f 50`). kProcessCpu: the process's CPU time, which
  /// preemption does not inflate; right for a team of one, while for a larger team it also
  /// counts the team's idle spinning and favors serial code (a parallel region costs more CPU
  /// than it saves time).
  enum class Clock { kWall, kProcessCpu };
  Clock clock = Clock::kWall;
  /// Tensors for inputs and outputs; null: DefaultAllocator().
  Allocator* allocator = nullptr;
  /// What the note says of the team, e.g. "1 thread".
  std::string threads;
};

/// What one region's trial found.
struct RegionTrial {
  int region = 0;
  std::string name;
  bool measured = false;        // both sides were timed
  bool fallback_faster = false; // the fallback won both rounds (RegionTrialOptions::margin)
  double region_ms = 0, fallback_ms = 0;  // medians over all timed calls, when measured
  /// "fallback 0.41 ms vs region 0.62 ms (CPU) at 1x3x224x224, 1 thread", or why nothing was
  /// measured ("no fallback function", "the vendor declined it at load: ...", "not run").
  std::string note;
};

/// Loads `bytes` with `options.load`, runs the entry function once on synthetic inputs
/// (floats uniform in [-1, 1], integers 0 and 1, booleans alternating; fixed seed) to capture
/// each region's inputs as the interpreter passes them (its first call), then times, per
/// region with a fallback that its vendor runs, the vendor's runtime and the fallback function
/// on those inputs. Runs on the calling thread (vendors and kernels use the OpenMP team the
/// providers apply). The timings are this host's, now: a preference to record, not a fact
/// about the file. Errors: the load's, the entry run's (naming the entry), or a side failing
/// on captured inputs (naming the region).
StatusOr<std::vector<RegionTrial>> TrialRegions(const uint8_t* data, size_t size,
                                                const RegionTrialOptions& options);

/// `bytes` rewritten (vm/builder.h ExecutableBuilder::FromExecutable) with each trial's record:
/// ExternalRegion.tuned_fallback = trial.fallback_faster, tuned_note = trial.note. Everything
/// else is kept. Errors: the file does not verify; a trial names a region out of range.
StatusOr<std::vector<uint8_t>> RecordRegionTrials(const uint8_t* data, size_t size,
                                                  const std::vector<RegionTrial>& trials);

}  // namespace kiln

#endif  // KILN_VM_REGION_TRIAL_H_
