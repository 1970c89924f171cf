// PaybackAccount and CpuBudget: the arithmetic of bounded specialization.
#include "jit/compile_policy.h"

#include <algorithm>
#include <cmath>

namespace kiln::jit {

bool PaybackAccount::TrySpend(int64_t all_kernels_run_nanos, int64_t* price) {
  *price = 0;
  if (min_share_ > 0 &&
      static_cast<double>(run_nanos()) < min_share_ * static_cast<double>(all_kernels_run_nanos)) {
    return false;
  }
  if (payback_ <= 0) return true;
  const int64_t want =
      static_cast<int64_t>(std::llround(payback_ * static_cast<double>(expected_compile_nanos())));
  int64_t have = credit_.load(std::memory_order_relaxed);
  while (have >= want) {
    if (credit_.compare_exchange_weak(have, have - want, std::memory_order_relaxed)) {
      *price = want;
      return true;
    }
  }
  return false;
}

void PaybackAccount::Settle(int64_t price, int64_t cpu_nanos) {
  if (payback_ <= 0 || price == 0) return;
  const int64_t real =
      static_cast<int64_t>(std::llround(payback_ * static_cast<double>(cpu_nanos)));
  credit_.fetch_add(price - real, std::memory_order_relaxed);
}

void PaybackAccount::RecordCompile(int64_t cpu_nanos) {
  if (cpu_nanos >= kMinMeasured) expected_.store(cpu_nanos, std::memory_order_relaxed);
}

CpuBudget::CpuBudget(double share, int64_t window_nanos)
    : share_(share),
      capacity_(share * static_cast<double>(window_nanos)),
      tokens_(capacity_) {}

void CpuBudget::Refill(int64_t now) {
  if (last_ >= 0 && now > last_) {
    tokens_ = std::min(capacity_, tokens_ + share_ * static_cast<double>(now - last_));
  }
  if (now > last_) last_ = now;
}

int64_t CpuBudget::Delay(int64_t now) {
  if (!capped()) return 0;
  Refill(now);
  if (tokens_ >= 0) return 0;
  return static_cast<int64_t>(std::ceil(-tokens_ / share_));
}

void CpuBudget::Charge(int64_t now, int64_t cpu_nanos) {
  if (!capped()) return;
  Refill(now);
  tokens_ -= static_cast<double>(cpu_nanos);
}

}  // namespace kiln::jit
