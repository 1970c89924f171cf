// kiln's OpenMP wait default: the decision (only when the user chose nothing) and reporting it.
#include "embed/omp_wait.h"

#include <atomic>
#include <cstdlib>

namespace kiln {

namespace {

// Whether libgomp read kiln's default (a user's GOMP_SPINCOUNT may equal it).
std::atomic<bool> default_read{false};

}  // namespace

namespace internal {
void NoteOmpWaitDefaultRead() { default_read.store(true, std::memory_order_relaxed); }
}  // namespace internal

const char* OmpSpinCountToSet(const std::function<const char*(const char*)>& lookup) {
  for (const char* name : kOmpWaitVariables) {
    if (lookup(name) != nullptr) return nullptr;
  }
  return kOmpSpinCountDefault;
}

std::string OmpWaitPolicySource() {
  if (default_read.load(std::memory_order_relaxed)) {
    return std::string("GOMP_SPINCOUNT=") + kOmpSpinCountDefault + " (kiln's default)";
  }
  std::string set;
  for (const char* name : kOmpWaitVariables) {
    if (const char* v = std::getenv(name)) {
      set += (set.empty() ? "" : " ") + std::string(name) + "=" + v;
    }
  }
  if (!set.empty()) return set + " (set by the user)";
  return "libgomp's default (kiln's default not linked into this program)";
}

}  // namespace kiln
