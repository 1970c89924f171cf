// kiln_parallel_for on OpenMP.
#include "jit/runtime.h"

#include <omp.h>

#include <algorithm>

extern "C" void kiln_parallel_for(int64_t begin, int64_t end, int64_t grain, KilnParallelBody body,
                                  void* ctx) {
  int64_t n = end - begin;
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  int64_t max_chunks = std::min<int64_t>(omp_get_max_threads(), n / grain);
  if (max_chunks < 2 || omp_in_parallel()) {
    body(begin, end, ctx);
    return;
  }
#pragma omp parallel num_threads(static_cast <int>(max_chunks))
  {
    // Static, balanced split: the first n % k chunks get one extra iteration.
    int64_t k = omp_get_num_threads();
    int64_t t = omp_get_thread_num();
    int64_t size = n / k, extra = n % k;
    int64_t lo = begin + t * size + std::min(t, extra);
    int64_t hi = lo + size + (t < extra ? 1 : 0);
    if (lo < hi) body(lo, hi, ctx);
  }
}

namespace kiln::jit {

void* ParallelForAddress() { return reinterpret_cast<void*>(&kiln_parallel_for); }

}  // namespace kiln::jit
