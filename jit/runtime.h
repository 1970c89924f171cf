// Runtime helpers that JIT-compiled kernels call (C ABI, resolved by the ORC engine).
#ifndef KILN_JIT_RUNTIME_H_
#define KILN_JIT_RUNTIME_H_

#include <cstdint>

extern "C" {

/// Body of an outlined parallel loop: runs iterations [begin, end) with its captured context.
typedef void (*KilnParallelBody)(int64_t begin, int64_t end, void* ctx);

/// Runs `body` over [begin, end) split into contiguous chunks of at least `grain` iterations,
/// one per thread of the OpenMP team (the pool oneDNN shares, so threads are not oversubscribed).
/// Runs serially, in the calling thread, when the range is below two grains, when OpenMP offers
/// one thread, or when called from inside a parallel region. Every iteration runs exactly once;
/// returns after all have finished. Thread-safe. An empty range calls nothing.
/// Deadlines: when the calling thread's VM run has one (base/deadline.h), each thread runs its
/// chunk in up to 8 pieces of at least `grain` and skips the pieces left once it has passed; the
/// VM then fails the run with DeadlineExceeded, so the partial output is never seen.
void kiln_parallel_for(int64_t begin, int64_t end, int64_t grain, KilnParallelBody body, void* ctx);

}  // extern "C"

namespace kiln::jit {

/// Address of kiln_parallel_for, for the engine's symbol table (it need not be exported).
void* ParallelForAddress();

}  // namespace kiln::jit

#endif  // KILN_JIT_RUNTIME_H_
