// libFuzzer target: load arbitrary bytes, then compile the kernels and shape functions of what
// the loader accepts through the JIT (kernel IR -> LLVM IR -> machine code), as a first call
// would. The loader verifies and binds (decoding every payload) but compiles nothing; this
// target covers the step after it. Any crash, sanitizer report or leak is a bug in the kernel-IR
// validator (it let through a kernel the lowering cannot handle) or in jit/ (codegen, engine).
// A compile error status is an acceptable answer: llvm::verifyModule guards every compile.
//
// Most byte mutations of a whole file break the FlatBuffer, so the loader rejects ~95% of them
// and the compile is never reached. A custom mutator therefore mutates, seven times in eight,
// the bytes of one kernel or shape-function payload in place (the file stays a valid
// FlatBuffer), and otherwise the whole file as libFuzzer would (load_fuzzer covers the rest of
// the file's structure).
//
// Bounded per input so executions stay fast: at most kMaxCompiles entries are compiled (a
// window that starts at a position derived from the input, so mutations of any entry get
// compiled), payloads above kMaxPayloadBytes are skipped, and most inputs compile at the first
// tier (Tier::kFast, what a first call compiles); one in kOptimizedEvery (by the input's hash)
// compiles at the O3 tier hot kernels get, several times slower but the only path through
// orc::cloneToNewContext, where the fuzzer found a crash the first tier never showed.
// KILN_FUZZ_TIER=fast or =optimized in the environment compiles every input at that tier.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "embed/runtime.h"
#include "jit/engine.h"
#include "jit/kernel_ir_serialize.h"
#include "vm/executable.h"
#include "vm/verifier.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

constexpr int kMaxCompiles = 4;
constexpr size_t kMaxPayloadBytes = 16 << 10;
constexpr long kErrorsShown = 10;
constexpr uint64_t kOptimizedEvery = 8;

// What the run did, printed at exit (libFuzzer's stats count inputs, not compiles).
struct Counts {
  long loaded = 0;
  long compiled = 0;
  long failed = 0;
} g_counts;

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "kernel_compile_fuzzer: %s\n", what.c_str());
  std::abort();
}

// One runtime (the loader's providers) and one engine (the compiles) for the whole run:
// creating an LLJIT per input would dominate every execution.
const kiln::Runtime& SharedRuntime() {
  static const std::shared_ptr<kiln::Runtime> runtime = [] {
    kiln::RuntimeOptions options;
    options.num_threads = 1;
    options.plugins_from_environment = false;
    options.prefetch_constants = false;
    options.huge_page_constants = false;
    options.jit_cache = kiln::RuntimeOptions::kJitCacheOff;
    auto rt = kiln::Runtime::Create(options);
    if (!rt.ok()) Die(rt.status().ToString());
    return *rt;
  }();
  return *runtime;
}

kiln::jit::Engine& SharedEngine() {
  static const std::unique_ptr<kiln::jit::Engine> engine = [] {
    auto e = kiln::jit::Engine::Create();  // no persistent object cache
    if (!e.ok()) Die(e.status().ToString());
    return std::move(*e);
  }();
  return *engine;
}

// A kernel-table or shape-function entry: its name and payload.
struct Entry {
  std::string name;
  const flatbuffers::String* format;
  const flatbuffers::Vector<uint8_t>* payload;
};

std::vector<Entry> Entries(const kiln::fb::Executable& root) {
  std::vector<Entry> out;
  if (root.kernels() != nullptr) {
    for (const kiln::fb::Kernel* k : *root.kernels()) {
      out.push_back({"kernel " + (k->name() ? k->name()->str() : ""), k->payload_format(),
                     k->payload()});
    }
  }
  if (root.shape_functions() != nullptr) {
    for (const kiln::fb::ShapeFunction* s : *root.shape_functions()) {
      out.push_back({"shape function " + (s->name() ? s->name()->str() : ""), s->payload_format(),
                     s->payload()});
    }
  }
  return out;
}

// The tier an input with hash `h` compiles at (see the top of the file).
kiln::jit::Tier TierFor(uint64_t h) {
  static const char* forced = std::getenv("KILN_FUZZ_TIER");
  if (forced != nullptr && std::string(forced) == "fast") return kiln::jit::Tier::kFast;
  if (forced != nullptr && std::string(forced) == "optimized") return kiln::jit::Tier::kOptimized;
  return (h >> 32) % kOptimizedEvery == 0 ? kiln::jit::Tier::kOptimized : kiln::jit::Tier::kFast;
}

// Compiles one entry at `tier`. The loader already decoded this payload while binding, so a
// decode failure here means the two disagree: that is a bug too.
void Compile(const Entry& e, kiln::jit::Tier tier) {
  if (e.format == nullptr || e.format->str() != kiln::jit::kPayloadFormat) return;
  if (e.payload == nullptr || e.payload->size() > kMaxPayloadBytes) return;
  auto p = kiln::jit::DeserializeKernelPayload(e.payload->data(), e.payload->size());
  if (!p.ok()) Die(e.name + ": bound at load but does not decode: " + p.status().ToString());
  // The reference is dropped at once: the code is freed, so memory stays flat over the run.
  auto ref = SharedEngine().Acquire(p->kernel, tier);
  ++g_counts.compiled;
  if (!ref.ok()) {
    // An error is an acceptable answer, but the validator should have caught what LLVM rejects:
    // the first few are shown so a run's log says what got through to the compile.
    if (g_counts.failed++ < kErrorsShown) {
      std::fprintf(stderr, "kernel_compile_fuzzer: %s: %s\n", e.name.c_str(),
                   ref.status().ToString().substr(0, 300).c_str());
    }
  }
}

void PrintCounts() {
  std::fprintf(stderr,
               "kernel_compile_fuzzer: %ld inputs loaded, %ld kernels and shape functions "
               "compiled, %ld compile errors\n",
               g_counts.loaded, g_counts.compiled, g_counts.failed);
}

// Mutates the payload of entry `pick` (modulo the count; `pick` seeds the choices too) of the
// executable in `data` in place, keeping its length so every offset stays valid. False when
// `data` is no executable or has no payload to mutate.
bool MutatePayload(uint8_t* data, size_t size, unsigned pick) {
  const kiln::fb::Executable* root = nullptr;
  size_t fb_size = 0;
  if (!kiln::VerifyStructure(data, size, &root, &fb_size).ok()) return false;
  std::vector<Entry> entries = Entries(*root);
  if (entries.empty()) return false;
  const Entry& e = entries[pick % entries.size()];
  if (e.payload == nullptr || e.payload->size() == 0) return false;
  // The payload lies inside `data` (the verifier checked its bounds), which is ours to change.
  uint8_t* p = const_cast<uint8_t*>(e.payload->data());
  const size_t n = e.payload->size();
  // Mostly a few bytes overwritten (the decoder rejects shifted tables, so libFuzzer's inserts
  // and erases rarely decode), past the magic and version; sometimes libFuzzer's own mutation.
  std::minstd_rand rng(pick);
  if (n > 8 && rng() % 4 != 0) {
    static constexpr uint8_t kInteresting[] = {0x00, 0x01, 0x02, 0x7f, 0x80, 0xff};
    const int count = 1 + static_cast<int>(rng() % 3);
    for (int i = 0; i < count; ++i) {
      uint8_t& b = p[8 + rng() % (n - 8)];
      b = rng() % 2 ? static_cast<uint8_t>(b ^ (1u << (rng() % 8)))
                    : kInteresting[rng() % sizeof(kInteresting)];
    }
    return true;
  }
  std::vector<uint8_t> bytes(p, p + n);
  size_t m = LLVMFuzzerMutate(bytes.data(), n, n);
  std::memcpy(p, bytes.data(), m);  // a shorter result leaves the old tail in place
  return true;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size,
                                          unsigned int seed) {
  if (seed % 8 != 0 && MutatePayload(data, size, seed / 8)) return size;
  return LLVMFuzzerMutate(data, size, max_size);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto exe = SharedRuntime().LoadBytes(data, size);
  if (!exe.ok()) return 0;
  if (g_counts.loaded++ == 0) std::atexit(PrintCounts);
  std::vector<Entry> entries = Entries((*exe)->root());
  if (entries.empty()) return 0;
  // FNV-1a of the input picks the window's start and the tier: deterministic per input, so a
  // reproducer replays the same compiles.
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  const size_t n = entries.size();
  const size_t count = n < static_cast<size_t>(kMaxCompiles) ? n : kMaxCompiles;
  const kiln::jit::Tier tier = TierFor(h);
  for (size_t i = 0; i < count; ++i) Compile(entries[(h + i) % n], tier);
  return 0;
}
