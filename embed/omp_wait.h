// kiln's default for how its OpenMP threads wait (a bounded spin, then sleep). libgomp reads its
// environment once, when it is loaded, before any code of kiln's runs: executables get the
// default from //embed:omp_wait_default, the python package from its __init__.py.
#ifndef KILN_EMBED_OMP_WAIT_H_
#define KILN_EMBED_OMP_WAIT_H_

#include <functional>
#include <string>

namespace kiln {

/// GOMP_SPINCOUNT kiln gives libgomp when the user chose no wait policy: how many times (a load
/// and a `pause`, ~25 ns on a Zen 3) a thread of the OpenMP team with no work, or one that
/// reached a barrier first, polls before it sleeps in the kernel. libgomp's own default,
/// 300,000 (~7 ms), made 2-thread runs 4-35x slower on a host with more runnable threads than
/// cores (the polling thread burns the time slice the thread it waits for needs); sleeping at
/// once (OMP_WAIT_POLICY=passive) costs a wake-up per parallel region, up to 3x on an idle
/// machine. At 3,000 (~75 us) idle 2-thread runs of four small models stayed within noise of
/// libgomp's default, 1,000 lost up to 10% and 300 up to 80% (README, "Threads"). The python
/// package repeats this value.
inline constexpr char kOmpSpinCountDefault[] = "3000";

/// The environment variables by which a user chooses how OpenMP threads wait; when any of them
/// is set (even empty), kiln leaves the wait policy to the user and libgomp.
inline constexpr const char* kOmpWaitVariables[] = {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"};

/// The GOMP_SPINCOUNT value kiln's default sets, given the environment as `lookup` sees it
/// (nullptr: unset): kOmpSpinCountDefault when no kOmpWaitVariables entry is set, else nullptr
/// (the user's choice stands).
const char* OmpSpinCountToSet(const std::function<const char*(const char*)>& lookup);

namespace internal {
/// Records that libgomp read kiln's default (omp_wait_default.cc's getenv), for
/// OmpWaitPolicySource. Thread-safe.
void NoteOmpWaitDefaultRead();
}  // namespace internal

/// How this process's wait policy was chosen, for diagnostics: "GOMP_SPINCOUNT=3000 (kiln's
/// default)" once libgomp read it, "OMP_WAIT_POLICY=passive (set by the user)", or "libgomp's
/// default (kiln's default not linked into this program)". Thread-safe.
std::string OmpWaitPolicySource();

}  // namespace kiln

#endif  // KILN_EMBED_OMP_WAIT_H_
