// Prints how this program's OpenMP threads wait: the source kiln reports (stdout) and libgomp's
// own view of its ICVs (omp_display_env, stderr). omp_wait_test runs it under several
// environments; it links //embed:omp_wait_default like kiln's programs do.
#include <omp.h>

#include <cstdio>

#include "embed/omp_wait.h"

int main() {
  std::printf("source: %s\n", kiln::OmpWaitPolicySource().c_str());
  std::fflush(stdout);
  omp_display_env(/*verbose=*/1);  // includes GOMP_SPINCOUNT and OMP_WAIT_POLICY
  return 0;
}
