// Allocator (vm/allocator.cc): size classes, alignment, reuse from the cache, the cache cap
// under varying shapes, eviction, Trim, thread safety and refusal of absurd sizes.
#define BOOST_TEST_MODULE allocator_test
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <stdexcept>
#include <vector>

#include "base/allocator.h"
#include "base/tensor.h"

namespace kiln {
namespace {

StorageRef AllocateOrDie(Allocator& a, size_t bytes) {
  StatusOr<StorageRef> s = a.Allocate(bytes);
  if (!s.ok()) throw std::runtime_error(s.status().ToString());
  return std::move(*s);
}

BOOST_AUTO_TEST_CASE(round_up_known_classes) {
  const std::pair<size_t, size_t> known[] = {
      {0, 64},
      {1, 64},
      {63, 64},
      {64, 64},
      {65, 80},
      {80, 80},
      {81, 96},
      {100, 112},
      {113, 128},
      {128, 128},
      {129, 160},
      {1000, 1024},
      {1025, 1280},
      {1u << 20, 1u << 20},
      {(1u << 20) + 1, (1u << 20) + (1u << 18)},
      {(size_t{1} << 30) - 1, size_t{1} << 30},
  };
  for (auto [bytes, capacity] : known) {
    BOOST_TEST_INFO("RoundUp(" << bytes << ")");
    BOOST_TEST(Allocator::RoundUp(bytes) == capacity);
  }
}

BOOST_AUTO_TEST_CASE(round_up_wastes_at_most_a_quarter) {
  std::mt19937_64 rng(7);
  std::vector<size_t> sizes;
  for (size_t n = 65; n <= 5000; ++n) sizes.push_back(n);
  for (int k = 7; k <= 30; ++k) {  // around every power of two
    for (size_t d : {size_t{1}, size_t{2}, size_t{3}}) {
      sizes.push_back((size_t{1} << k) - d);
      sizes.push_back((size_t{1} << k) + d);
    }
  }
  for (int i = 0; i < 20000; ++i) sizes.push_back(65 + rng() % ((size_t{1} << 30) - 64));
  for (size_t n : sizes) {
    size_t c = Allocator::RoundUp(n);
    BOOST_TEST_INFO("RoundUp(" << n << ") = " << c);
    BOOST_REQUIRE(c >= n);
    BOOST_REQUIRE((c - n) * 4 <= n);                // waste <= 25% of the request
    BOOST_REQUIRE(Allocator::RoundUp(c) == c);      // a class capacity is its own class
    BOOST_REQUIRE(Allocator::RoundUp(n - 1) <= c);  // monotonic
    // Classes are 2^k + j * 2^(k-2): four steps per power of two.
    int k = 63 - __builtin_clzll(c);
    size_t base = size_t{1} << k;
    BOOST_REQUIRE((c - base) % (base / 4) == 0);
  }
}

BOOST_AUTO_TEST_CASE(storage_is_64_byte_aligned_and_sized_as_asked) {
  Allocator a;
  std::vector<StorageRef> held;
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{63}, size_t{65}, size_t{100},
                   size_t{4095}, size_t{12345}, size_t{1} << 20}) {
    StorageRef s = AllocateOrDie(a, n);
    BOOST_TEST(reinterpret_cast<uintptr_t>(s->data()) % 64 == 0);
    BOOST_TEST(s->size() == n);
    BOOST_TEST(s->pooled());
    BOOST_TEST(s->ref_count() == 1);
    if (n > 0) std::memset(s->data(), 0xab, n);  // the whole request is writable
    held.push_back(std::move(s));
  }
  // Reused blocks are aligned too, and report the new request's size.
  held.clear();
  StorageRef u = AllocateOrDie(a, 4000);  // class 4096: the block 4095 bytes were asked for
  BOOST_TEST(a.stats().cache_hits == 1u);
  BOOST_TEST(reinterpret_cast<uintptr_t>(u->data()) % 64 == 0);
  BOOST_TEST(u->size() == 4000u);
}

BOOST_AUTO_TEST_CASE(release_then_allocate_the_same_size_reuses_the_block) {
  Allocator a;
  StorageRef s = AllocateOrDie(a, 1000);
  void* p = s->data();
  s.reset();
  AllocatorStats st = a.stats();
  BOOST_TEST(st.bytes_cached == 1024u);
  BOOST_TEST(st.bytes_in_use == 0u);
  BOOST_TEST(st.system_allocs == 1u);
  StorageRef again = AllocateOrDie(a, 1000);
  BOOST_TEST(again->data() == p);
  // Another size of the same class (1024) is served from the cache as well.
  again.reset();
  StorageRef same_class = AllocateOrDie(a, 1009);
  BOOST_TEST(same_class->data() == p);
  st = a.stats();
  BOOST_TEST(st.system_allocs == 1u);
  BOOST_TEST(st.cache_hits == 2u);
  BOOST_TEST(st.allocations == 3u);
  BOOST_TEST(st.bytes_in_use == 1024u);
  BOOST_TEST(st.bytes_cached == 0u);
  // A different class is not.
  StorageRef other = AllocateOrDie(a, 2000);
  BOOST_TEST(a.stats().system_allocs == 2u);
}

BOOST_AUTO_TEST_CASE(copies_of_a_storage_ref_share_one_block) {
  Allocator a;
  StorageRef s = AllocateOrDie(a, 256);
  {
    StorageRef copy = s;
    BOOST_TEST(s->ref_count() == 2);
    StorageRef moved = std::move(copy);
    BOOST_TEST(s->ref_count() == 2);
  }
  BOOST_TEST(s->ref_count() == 1);
  BOOST_TEST(a.stats().bytes_cached == 0u);  // still held
  s.reset();
  BOOST_TEST(a.stats().bytes_cached == 256u);
}

BOOST_AUTO_TEST_CASE(repeated_shape_pattern_makes_no_system_allocations_after_warm_up) {
  Allocator a;
  // One "inference": activations of a small CNN, allocated, then all released.
  const size_t pattern[] = {3 * 224 * 224 * 4,
                            64 * 112 * 112 * 4,
                            64 * 56 * 56 * 4,
                            64 * 56 * 56 * 4,
                            128 * 28 * 28 * 4,
                            1000 * 4,
                            8,
                            8,
                            0};
  auto run_once = [&] {
    std::vector<StorageRef> live;
    for (size_t n : pattern) live.push_back(AllocateOrDie(a, n));
  };
  run_once();
  uint64_t warm = a.stats().system_allocs;
  BOOST_TEST(warm == std::size(pattern));
  for (int i = 0; i < 100; ++i) run_once();
  AllocatorStats st = a.stats();
  BOOST_TEST(st.system_allocs == warm);
  BOOST_TEST(st.system_frees == 0u);
  BOOST_TEST(st.cache_hits == 100 * std::size(pattern));
  BOOST_TEST(st.bytes_in_use == 0u);
}

BOOST_AUTO_TEST_CASE(cache_cap_holds_under_varying_shapes) {
  constexpr size_t kCap = 256 * 1024;
  Allocator a(kCap);
  std::mt19937 rng(12345);
  std::vector<StorageRef> live;
  size_t in_use = 0, max_in_use = 0;
  for (int step = 0; step < 5000; ++step) {
    if (live.size() < 16 && (live.empty() || rng() % 2 == 0)) {
      // Shapes [batch, seq, hidden] with varying batch and seq: thousands of distinct sizes.
      size_t bytes = (1 + rng() % 8) * (1 + rng() % 128) * 64 * 4;
      live.push_back(AllocateOrDie(a, bytes));
      in_use += Allocator::RoundUp(bytes);
    } else {
      size_t i = rng() % live.size();
      in_use -= Allocator::RoundUp(live[i]->size());
      std::swap(live[i], live.back());
      live.pop_back();
    }
    max_in_use = std::max(max_in_use, in_use);
    AllocatorStats st = a.stats();
    BOOST_TEST_INFO("step " << step);
    BOOST_REQUIRE(st.bytes_cached <= kCap);
    BOOST_REQUIRE(st.bytes_in_use == in_use);
  }
  AllocatorStats st = a.stats();
  BOOST_TEST(st.peak_bytes <= max_in_use + kCap);
  BOOST_TEST(st.system_frees > 0u);  // the cap forced evictions
  BOOST_TEST(st.cache_hits > 0u);    // and the cache still served some requests
  BOOST_TEST(st.allocations == st.cache_hits + st.system_allocs);
}

BOOST_AUTO_TEST_CASE(block_larger_than_the_cap_is_never_cached) {
  Allocator a(1024);
  StorageRef s = AllocateOrDie(a, 4096);
  s.reset();
  AllocatorStats st = a.stats();
  BOOST_TEST(st.bytes_cached == 0u);
  BOOST_TEST(st.system_frees == 1u);
}

BOOST_AUTO_TEST_CASE(set_cache_cap_evicts_least_recently_released_first) {
  Allocator a;
  std::vector<StorageRef> blocks;
  std::vector<void*> ptrs;
  for (int i = 0; i < 10; ++i) {
    blocks.push_back(AllocateOrDie(a, 1024));
    ptrs.push_back(blocks.back()->data());
  }
  for (StorageRef& b : blocks) b.reset();  // released in order 0..9
  BOOST_TEST(a.stats().bytes_cached == 10 * 1024u);
  a.SetCacheCap(3 * 1024);
  BOOST_TEST(a.cache_cap() == 3 * 1024u);
  AllocatorStats st = a.stats();
  BOOST_TEST(st.bytes_cached == 3 * 1024u);
  BOOST_TEST(st.system_frees == 7u);
  // The survivors are the last three released (most recent first).
  std::vector<StorageRef> again;
  for (int i = 0; i < 3; ++i) again.push_back(AllocateOrDie(a, 1024));
  BOOST_TEST(again[0]->data() == ptrs[9]);
  BOOST_TEST(again[1]->data() == ptrs[8]);
  BOOST_TEST(again[2]->data() == ptrs[7]);
  BOOST_TEST(a.stats().system_allocs == 10u);
  // A lower cap also applies to later releases.
  a.SetCacheCap(1024);
  again.clear();
  BOOST_TEST(a.stats().bytes_cached == 1024u);
}

BOOST_AUTO_TEST_CASE(trim_empties_the_cache) {
  Allocator a;
  {
    std::vector<StorageRef> v;
    for (size_t n = 64; n <= 64 * 1024; n *= 2) v.push_back(AllocateOrDie(a, n));
  }
  StorageRef held = AllocateOrDie(a, 100000);  // in use: Trim leaves it alone
  BOOST_TEST(a.stats().bytes_cached > 0u);
  a.Trim();
  AllocatorStats st = a.stats();
  BOOST_TEST(st.bytes_cached == 0u);
  BOOST_TEST(st.system_frees == st.system_allocs - 1);
  BOOST_TEST(st.bytes_in_use == Allocator::RoundUp(100000));
  std::memset(held->data(), 1, 100000);
  held.reset();
  BOOST_TEST(a.stats().bytes_cached == Allocator::RoundUp(100000));
}

BOOST_AUTO_TEST_CASE(concurrent_allocate_and_release_keep_stats_consistent) {
  constexpr int kThreads = 4, kIters = 3000;
  Allocator a(64 * 1024);
  std::vector<std::thread> threads;
  std::vector<int> errors(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&a, &errors, t] {
      std::mt19937 rng(t);
      std::vector<StorageRef> live;
      for (int i = 0; i < kIters; ++i) {
        size_t n = 1 + rng() % 8192;
        StatusOr<StorageRef> s = a.Allocate(n);
        if (!s.ok()) {
          ++errors[t];
          continue;
        }
        // Fill with a thread/iteration tag: a block handed to two owners would be overwritten.
        std::memset((*s)->data(), (t * 31 + i) & 0xff, n);
        live.push_back(std::move(*s));
        if (live.size() > 8 || rng() % 3 == 0) {
          size_t j = rng() % live.size();
          auto* p = static_cast<const uint8_t*>(live[j]->data());
          uint8_t tag = p[0];
          if (!std::all_of(p, p + live[j]->size(), [tag](uint8_t b) { return b == tag; }))
            ++errors[t];
          std::swap(live[j], live.back());
          live.pop_back();
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) BOOST_TEST(errors[t] == 0);
  AllocatorStats st = a.stats();
  BOOST_TEST(st.bytes_in_use == 0u);
  BOOST_TEST(st.allocations == uint64_t{kThreads} * kIters);
  BOOST_TEST(st.allocations == st.cache_hits + st.system_allocs);
  BOOST_TEST(st.bytes_cached <= 64 * 1024u);
  a.Trim();
  st = a.stats();
  BOOST_TEST(st.bytes_cached == 0u);
  BOOST_TEST(st.system_frees == st.system_allocs);
}

BOOST_AUTO_TEST_CASE(absurd_sizes_are_resource_exhausted) {
  Allocator a;
  for (size_t n : {(size_t{1} << 47) + 1, size_t{1} << 60, ~size_t{0}}) {
    StatusOr<StorageRef> s = a.Allocate(n);
    BOOST_TEST(s.status().code() == StatusCode::kResourceExhausted);
    BOOST_TEST(s.status().message() ==
               "allocation of " + std::to_string(n) + " bytes exceeds 2^47");
  }
  AllocatorStats st = a.stats();
  BOOST_TEST(st.allocations == 0u);
  BOOST_TEST(st.system_allocs == 0u);
  // A tensor whose bytes exceed the limit fails the same way, without allocating.
  auto t = Tensor::Allocate(a, DType::kF64, Shape{int64_t{1} << 45});
  BOOST_TEST(t.status().code() == StatusCode::kResourceExhausted);
  BOOST_TEST(a.stats().system_allocs == 0u);
}

}  // namespace
}  // namespace kiln
