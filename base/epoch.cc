// Epoch-based reclamation. Each thread that ever took a guard owns a slot holding the global
// epoch it saw when its outermost guard began (kIdle outside guards). Retiring bumps the global
// epoch and records the old value r; an object retired at r is freed once every slot is idle or
// holds an epoch above r. Slots are never freed (a thread's slot is reused after it exits).
#include "base/epoch.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace kiln {
namespace {

constexpr uint64_t kIdle = UINT64_MAX;

struct alignas(64) Slot {
  std::atomic<uint64_t> epoch{kIdle};
  std::atomic<bool> owned{false};
  Slot* next = nullptr;
};

struct Retired {
  uint64_t epoch;
  std::function<void()> free;
};

struct Domain {
  std::atomic<uint64_t> epoch{1};
  std::atomic<Slot*> slots{nullptr};
  std::atomic<size_t> pending{0};
  std::mutex mu;  // guards retired
  std::vector<Retired> retired;
};

// Never destroyed: guards and retirements may run during static destruction.
Domain& TheDomain() {
  static Domain* domain = new Domain;
  return *domain;
}

Slot* AcquireSlot() {
  Domain& d = TheDomain();
  for (Slot* s = d.slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
    bool free = false;
    if (!s->owned.load(std::memory_order_relaxed) && s->owned.compare_exchange_strong(free, true)) {
      return s;
    }
  }
  Slot* s = new Slot;
  s->owned.store(true, std::memory_order_relaxed);
  Slot* head = d.slots.load(std::memory_order_relaxed);
  do {
    s->next = head;
  } while (!d.slots.compare_exchange_weak(head, s, std::memory_order_release,
                                          std::memory_order_relaxed));
  return s;
}

struct ThreadState {
  Slot* slot = nullptr;
  int depth = 0;
  ~ThreadState() {
    if (slot == nullptr) return;
    slot->epoch.store(kIdle, std::memory_order_release);
    slot->owned.store(false, std::memory_order_release);
  }
};

thread_local ThreadState t_state;

}  // namespace

EpochGuard::EpochGuard() {
  ThreadState& t = t_state;
  if (t.depth++ > 0) return;
  if (t.slot == nullptr) t.slot = AcquireSlot();
  t.slot->epoch.store(TheDomain().epoch.load(std::memory_order_seq_cst), std::memory_order_relaxed);
  // Orders the slot store before this thread's reads of whatever the guard protects; pairs with
  // the fence in ReclaimRetired (one of the two sides always sees the other's store).
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

EpochGuard::~EpochGuard() {
  ThreadState& t = t_state;
  if (--t.depth > 0) return;
  t.slot->epoch.store(kIdle, std::memory_order_release);
  if (TheDomain().pending.load(std::memory_order_relaxed) > 0) ReclaimRetired();
}

void RetireWhenUnused(std::function<void()> free) {
  Domain& d = TheDomain();
  {
    std::lock_guard<std::mutex> lock(d.mu);
    uint64_t r = d.epoch.fetch_add(1, std::memory_order_seq_cst);
    d.retired.push_back({r, std::move(free)});
    d.pending.fetch_add(1, std::memory_order_relaxed);
  }
  ReclaimRetired();
}

size_t ReclaimRetired() {
  Domain& d = TheDomain();
  // Only retirements that happened before the scan are judged by it.
  uint64_t cutoff = d.epoch.load(std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  uint64_t oldest = kIdle;
  for (Slot* s = d.slots.load(std::memory_order_acquire); s != nullptr; s = s->next) {
    oldest = std::min(oldest, s->epoch.load(std::memory_order_seq_cst));
  }
  std::vector<std::function<void()>> ready;
  size_t remaining;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    auto keep = std::stable_partition(d.retired.begin(), d.retired.end(), [&](const Retired& r) {
      return r.epoch >= cutoff || r.epoch >= oldest;
    });
    for (auto it = keep; it != d.retired.end(); ++it) ready.push_back(std::move(it->free));
    d.retired.erase(keep, d.retired.end());
    remaining = d.retired.size();
    d.pending.store(remaining, std::memory_order_relaxed);
  }
  for (auto& free : ready) free();
  return remaining;
}

size_t RetiredCount() {
  Domain& d = TheDomain();
  std::lock_guard<std::mutex> lock(d.mu);
  return d.retired.size();
}

}  // namespace kiln
