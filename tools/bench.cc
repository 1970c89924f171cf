// kiln bench FILE: first-call and steady-state latency of one function, with inputs generated
// deterministically from its signature (or read from .npy / .pb files).
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "embed/flags.h"
#include "tools/commands.h"
#include "tools/inputs.h"
#include "vm/context.h"
#include "vm/profile.h"

namespace kiln::tools {
namespace {

constexpr char kAbout[] =
    "Measures one function (default: the entry): runs it once (the first call, JIT compiles "
    "included), then --warmup more times, waits for the background compiles those runs "
    "started, then --iters timed times, and reports first-call latency, steady-state "
    "p50/p90/p99, JIT compilations and peak memory. Inputs are read from --input files (.npy "
    "or .pb) or generated deterministically from the signature, each symbolic dim from --dim. "
    "With --sweep, that measurement runs at every value of one symbolic dim in turn (as a "
    "serving process sees shapes come and go) and reports each value's p50, then the JIT "
    "kernels alive and freed and the resident memory at the end.";

struct BenchArgs {
  ModelArgs model;
  std::map<std::string, std::string> files;  // --input NAME=PATH
  std::string sweep;                         // symbol swept from sweep_lo to sweep_hi; empty: none
  int64_t sweep_lo = 0, sweep_hi = -1;
  int iters = 100;
  int warmup = RuntimeOptions{}.dispatch.specialize_after;
  bool json = false;
  bool cpu_clock = false;  // --clock cpu
  std::string versus;      // --versus: runtime flags of a second runtime the sweep runs beside
};

// Milliseconds on the clock --clock chose: wall time, or the calling thread's CPU time (which a
// loaded machine does not inflate by descheduling; it leaves out work on other threads, so it
// is meant for --threads 1).
double NowMs(bool cpu) {
  if (cpu) {
    timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
  }
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// --sweep SYMBOL=LO:HI.
Status ParseSweep(const std::string& v, BenchArgs* a) {
  size_t eq = v.find('='), colon = v.find(':', eq == std::string::npos ? 0 : eq);
  if (eq == std::string::npos || eq == 0 || colon == std::string::npos) {
    return InvalidArgument("wants SYMBOL=LO:HI, got '" + v + "'");
  }
  std::string lo = v.substr(eq + 1, colon - eq - 1), hi = v.substr(colon + 1);
  for (const std::string* n : {&lo, &hi}) {
    if (n->empty() || n->size() > 12 || n->find_first_not_of("0123456789") != std::string::npos) {
      return InvalidArgument(v + ": '" + *n + "' is not a non-negative integer");
    }
  }
  a->sweep = v.substr(0, eq);
  a->sweep_lo = std::stoll(lo);
  a->sweep_hi = std::stoll(hi);
  if (a->sweep_hi < a->sweep_lo) return InvalidArgument(v + ": HI is below LO");
  return Status::Ok();
}

// Declares bench's flags; Parse fills `a`.
void AddFlags(FlagParser& flags, BenchArgs* a) {
  AddGeneratedInputFlags(flags, &a->model, &a->files);
  flags.AddInt("--iters", "N", "timed runs", 1, int64_t{1} << 30, &a->iters);
  flags.AddInt("--warmup", "N",
               "exactly N untimed runs after the first call; the default is what gets every "
               "shape specialized (a shape seen that often gets a compiled variant of its own): "
               "with fewer, the timed runs include that switch",
               0, int64_t{1} << 30, &a->warmup);
  flags.AddCustom("--sweep", "SYMBOL=LO:HI",
                  "measure at every value of symbolic dim SYMBOL from LO to HI (with --iters "
                  "runs each)",
                  "none", false, [a](const std::string& v) { return ParseSweep(v, a); });
  flags.AddString("--versus", "'FLAGS'",
                  "with --sweep: also run the function on a second runtime whose runtime flags "
                  "are these (e.g. '--jit-min-share 0') on top of the others, its timed runs "
                  "alternating with the first's, and report both p50s per value (an A/B that a "
                  "machine's drift over the sweep does not skew)",
                  &a->versus, "none");
  flags.AddBool("--json", "print one JSON object instead of the report", &a->json);
  flags.AddSwitch("--clock", "cpu", "wall",
                  "what the times measure: the calling thread's CPU time (with --threads 1, "
                  "where kernels run on it: immune to other processes taking the cores), or wall "
                  "time",
                  "wall", [a](bool cpu) { a->cpu_clock = cpu; });
}

// The setup both measurements report: "threads": N, "warmup": N, "dims": {...}.
std::string JsonSetup(const BenchArgs& a, const LoadedFunction& f,
                      const std::map<std::string, int64_t>& dims) {
  std::string out = "\"threads\": " + std::to_string(f.runtime->num_threads()) +
                    ", \"warmup\": " + std::to_string(a.warmup) + ", \"dims\": {";
  bool first = true;
  for (const auto& [name, value] : dims) {
    out += (first ? "\"" : ", \"") + name + "\": " + std::to_string(value);
    first = false;
  }
  return out + "}";
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(q * (v.size() - 1) + 0.5);
  return v[std::min(k, v.size() - 1)];
}

// Resident memory now (not the peak), from /proc/self/statm; -1 if unreadable.
double CurrentRssMb() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  long long size = 0, resident = 0;
  int got = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  return got == 2 ? resident * (sysconf(_SC_PAGESIZE) / 1024.0) / 1024.0 : -1;
}

// Peak resident memory of the process so far.
double PeakRssMb() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

// ", n=4, seq=128" for the report's first line ("" without --dim).
std::string DimsSuffix(const std::map<std::string, int64_t>& dims) {
  return dims.empty() ? "" : ", " + DimsText(dims);
}

void PrintBench(const BenchArgs& a, const LoadedFunction& f, double first_ms,
                const std::vector<double>& times) {
  double peak_mb = PeakRssMb();
  double p50 = Percentile(times, 0.50), p90 = Percentile(times, 0.90),
         p99 = Percentile(times, 0.99);
  f.runtime->WaitForBackgroundCompiles();  // count specializations the runs triggered
  RuntimeStats stats = f.runtime->stats();
  const jit::DispatchStats& jit = stats.dispatch;
  int jit_compiles = static_cast<int>(jit.compilations);
  // Of the kernels those variants needed, how many the persistent JIT cache had.
  long long cache_loads = stats.engine.object_cache_hits;
  long long aot = stats.dispatch.aot_kernels;  // linked from code compiled ahead of time
  double jit_ms = jit.compile_seconds * 1000.0;
  if (a.json) {
    std::printf(
        "{\"function\": \"%s\", \"iters\": %d, %s, \"first_ms\": %.6f, \"p50_ms\": %.6f, "
        "\"p90_ms\": %.6f, \"p99_ms\": %.6f, \"jit_compiles\": %d, \"jit_ms\": %.3f, "
        "\"jit_cache_loads\": %lld, \"aot_kernels\": %lld, \"peak_rss_mb\": %.1f}\n",
        f.name.c_str(), a.iters, JsonSetup(a, f, a.model.dims).c_str(), first_ms, p50, p90, p99,
        jit_compiles, jit_ms, cache_loads, aot, peak_mb);
    return;
  }
  std::printf("%s @%s%s, %d threads, %d iterations after %d warm-up\n", a.model.file.c_str(),
              f.name.c_str(), DimsSuffix(a.model.dims).c_str(), f.runtime->num_threads(), a.iters,
              a.warmup);
  std::printf(
      "  first call   %10.3f ms\n  p50          %10.3f ms\n  p90          %10.3f ms\n"
      "  p99          %10.3f ms\n  jit          %d compilations, %.1f ms, %lld from the JIT "
      "cache, %lld kernels linked ahead of time\n  peak RSS     %10.1f MiB\n",
      first_ms, p50, p90, p99, jit_compiles, jit_ms, cache_loads, aot, peak_mb);
}

// One runtime a sweep measures: the flags' own, or the --versus one beside it.
struct SweepSide {
  LoadedFunction f;
  std::unique_ptr<Context> ctx;
  std::vector<Tensor> inputs, outputs;
  std::vector<std::pair<int64_t, double>> p50s;  // symbol value -> p50 ms
  // Per value, what served the timed runs' kernel calls and what was compiled meanwhile (a
  // p50 measured on generic code, or beside a background compile, says so here).
  struct Timed {
    int64_t specialized = 0, generic = 0, compiles = 0;
  };
  std::vector<Timed> timed;
  jit::DispatchStats before;
  std::vector<double> times;
};

// What a sweep measured.
struct SweepResult {
  std::vector<SweepSide> sides;  // the flags' runtime, then the --versus one if any
  double rss_first_mb = -1;      // resident memory after the first value
};

// One side's JSON fields after the setup: p50s, timed calls, compile counts; `prefix` names
// the --versus side's ("versus_").
void PrintSideJson(const SweepSide& side, const char* prefix) {
  side.f.runtime->WaitForBackgroundCompiles();
  RuntimeStats stats = side.f.runtime->stats();
  std::printf(", \"%sp50_ms\": [", prefix);
  for (size_t i = 0; i < side.p50s.size(); ++i) {
    std::printf("%s[%lld, %.6f]", i ? ", " : "", static_cast<long long>(side.p50s[i].first),
                side.p50s[i].second);
  }
  // [value, calls served by specialized variants, by the generic one, compiles] while timed.
  std::printf("], \"%stimed_calls\": [", prefix);
  for (size_t i = 0; i < side.timed.size(); ++i) {
    std::printf("%s[%lld, %lld, %lld, %lld]", i ? ", " : "",
                static_cast<long long>(side.p50s[i].first),
                static_cast<long long>(side.timed[i].specialized),
                static_cast<long long>(side.timed[i].generic),
                static_cast<long long>(side.timed[i].compiles));
  }
  std::printf(
      "], \"%sjit_compiles\": %lld, \"%sllvm_compiles\": %lld, \"%sfirst_tier_compiles\": %lld, "
      "\"%skernels_alive\": %lld, \"%skernels_freed\": %lld",
      prefix, static_cast<long long>(stats.dispatch.compilations), prefix,
      static_cast<long long>(stats.engine.compilations), prefix,
      static_cast<long long>(stats.engine.fast_compilations), prefix,
      static_cast<long long>(stats.engine.cached_kernels), prefix,
      static_cast<long long>(stats.engine.freed_kernels));
}

void PrintSweep(const BenchArgs& a, const SweepResult& r) {
  const SweepSide& main = r.sides[0];
  const LoadedFunction& f = main.f;
  const SweepSide* versus = r.sides.size() > 1 ? &r.sides[1] : nullptr;
  double rss = CurrentRssMb(), peak_mb = PeakRssMb();
  if (a.json) {
    std::printf("{\"function\": \"%s\", \"sweep\": \"%s\", \"iters\": %d, %s", f.name.c_str(),
                a.sweep.c_str(), a.iters, JsonSetup(a, f, a.model.dims).c_str());
    PrintSideJson(main, "");
    if (versus != nullptr) {
      std::printf(", \"versus\": \"%s\"", JsonEscape(a.versus).c_str());
      PrintSideJson(*versus, "versus_");
    }
    std::printf(", \"rss_after_first_mb\": %.1f, \"rss_mb\": %.1f, \"peak_rss_mb\": %.1f}\n",
                r.rss_first_mb, rss, peak_mb);
    return;
  }
  std::printf("%s @%s%s, %s from %lld to %lld, %d threads, %d iterations each after %d warm-up\n",
              a.model.file.c_str(), f.name.c_str(), DimsSuffix(a.model.dims).c_str(),
              a.sweep.c_str(), static_cast<long long>(a.sweep_lo),
              static_cast<long long>(a.sweep_hi), f.runtime->num_threads(), a.iters, a.warmup);
  if (versus != nullptr) std::printf("  (versus: %s, runs alternating)\n", a.versus.c_str());
  for (size_t i = 0; i < main.p50s.size(); ++i) {
    std::printf("  %s=%-8lld p50 %10.3f ms", a.sweep.c_str(),
                static_cast<long long>(main.p50s[i].first), main.p50s[i].second);
    if (versus != nullptr) {
      std::printf("   versus %10.3f ms (%.2fx)", versus->p50s[i].second,
                  main.p50s[i].second / versus->p50s[i].second);
    }
    std::printf("\n");
  }
  for (const SweepSide* side : {&main, versus}) {
    if (side == nullptr) continue;
    side->f.runtime->WaitForBackgroundCompiles();
    RuntimeStats stats = side->f.runtime->stats();
    std::printf(
        "  jit%s  %lld compilations (%lld by LLVM, %lld of them first tier), %lld kernels "
        "alive, %lld freed\n",
        side == &main ? "      " : " versus", static_cast<long long>(stats.dispatch.compilations),
        static_cast<long long>(stats.engine.compilations),
        static_cast<long long>(stats.engine.fast_compilations),
        static_cast<long long>(stats.engine.cached_kernels),
        static_cast<long long>(stats.engine.freed_kernels));
  }
  std::printf("  RSS          %10.1f MiB after the first value, %.1f MiB at the end (peak %.1f)\n",
              r.rss_first_mb, rss, peak_mb);
}

// The runtime options of --versus: the flags' own with the runtime flags it names applied.
StatusOr<ModelArgs> VersusArgs(const BenchArgs& a) {
  ModelArgs model = a.model;
  FlagParser flags("kiln bench --versus", "[runtime flags]", "");
  AddRuntimeFlags(flags, &model.runtime);
  std::vector<std::string> words = {"--versus"};
  for (size_t i = 0; i < a.versus.size();) {
    size_t j = a.versus.find(' ', i);
    if (j == std::string::npos) j = a.versus.size();
    if (j > i) words.push_back(a.versus.substr(i, j - i));
    i = j + 1;
  }
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  if (flags.Parse(static_cast<int>(argv.size()), argv.data()).has_value()) {
    return InvalidArgument("--versus '" + a.versus + "': not runtime flags (see above)");
  }
  return model;
}

// The first call and the warm-up runs of one side at one value; the timed runs follow once
// every side has run these (and its background compiles are done).
Status WarmUp(const BenchArgs& a, const std::map<std::string, int64_t>& dims,
              const InvokeOptions& options, SweepSide& side) {
  ASSIGN_OR_RETURN(side.inputs,
                   MakeInputs(side.f.signature(), dims, a.files, side.f.runtime->allocator()));
  for (int i = 0; i < 1 + a.warmup; ++i) {
    RETURN_IF_ERROR(side.ctx->Invoke(side.f.index, side.inputs, &side.outputs, options));
  }
  return Status::Ok();
}

Status Sweep(const BenchArgs& a, LoadedFunction f) {
  RETURN_IF_ERROR(CheckSymbol(f.signature(), a.sweep, "--sweep " + a.sweep));
  SweepResult result;
  result.sides.emplace_back();
  result.sides[0].f = std::move(f);
  if (!a.versus.empty()) {
    ASSIGN_OR_RETURN(ModelArgs versus, VersusArgs(a));
    result.sides.emplace_back();
    ASSIGN_OR_RETURN(result.sides[1].f, LoadFunction(versus));
  }
  for (SweepSide& side : result.sides) {
    ASSIGN_OR_RETURN(side.ctx, side.f.runtime->NewContext(side.f.exe));
  }
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(a.model.timeout_ms);
  for (int64_t value = a.sweep_lo; value <= a.sweep_hi; ++value) {
    std::string where = a.sweep + "=" + std::to_string(value);
    std::map<std::string, int64_t> dims = a.model.dims;
    dims[a.sweep] = value;
    for (SweepSide& side : result.sides) {
      Status s = WarmUp(a, dims, options, side);
      if (!s.ok()) return s.WithContext(where);
    }
    for (SweepSide& side : result.sides) {
      side.f.runtime->WaitForBackgroundCompiles();
      side.before = side.f.runtime->stats().dispatch;
      side.times.clear();
    }
    // The sides' timed runs alternate, so that both see the same machine (a sweep takes
    // minutes, and a loaded host's speed drifts by 20% over that time).
    for (int i = 0; i < a.iters; ++i) {
      for (SweepSide& side : result.sides) {
        double start = NowMs(a.cpu_clock);
        Status s = side.ctx->Invoke(side.f.index, side.inputs, &side.outputs, options);
        if (!s.ok()) return s.WithContext(where);
        side.times.push_back(NowMs(a.cpu_clock) - start);
      }
    }
    for (SweepSide& side : result.sides) {
      side.p50s.emplace_back(value, Percentile(side.times, 0.5));
      jit::DispatchStats after = side.f.runtime->stats().dispatch;
      side.timed.push_back({after.hits - side.before.hits, after.misses - side.before.misses,
                            after.compilations - side.before.compilations});
    }
    if (result.rss_first_mb < 0) result.rss_first_mb = CurrentRssMb();
  }
  PrintSweep(a, result);
  return Status::Ok();
}

Status Bench(const BenchArgs& a) {
  ASSIGN_OR_RETURN(LoadedFunction f, LoadFunction(a.model));
  if (!a.sweep.empty()) return Sweep(a, std::move(f));
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs,
                   MakeInputs(f.signature(), a.model.dims, a.files, f.runtime->allocator()));
  ASSIGN_OR_RETURN(auto ctx, f.runtime->NewContext(f.exe));
  std::vector<Tensor> outputs;
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(a.model.timeout_ms);
  auto run = [&]() -> StatusOr<double> {
    double start = NowMs(a.cpu_clock);
    RETURN_IF_ERROR(ctx->Invoke(f.index, inputs, &outputs, options));
    return NowMs(a.cpu_clock) - start;
  };
  ASSIGN_OR_RETURN(double first_ms, run());
  for (int i = 0; i < a.warmup; ++i) RETURN_IF_ERROR(run().status());
  // The timed runs must not overlap the specializations the warm-up started (compiled on
  // background threads): on 2 cores with 2 OpenMP threads, LLVM competing makes them 2-4x slower.
  f.runtime->WaitForBackgroundCompiles();
  std::vector<double> times;
  for (int i = 0; i < a.iters; ++i) {
    ASSIGN_OR_RETURN(double ms, run());
    times.push_back(ms);
  }
  PrintBench(a, f, first_ms, times);
  return Status::Ok();
}

}  // namespace

int BenchMain(int argc, char** argv) {
  BenchArgs args;
  FlagParser flags("kiln bench", "FILE.kiln [flags]", kAbout);
  AddFlags(flags, &args);
  if (std::optional<int> exit = flags.Parse(argc, argv)) return *exit;
  Status status = Bench(args);
  if (!status.ok()) {
    std::fprintf(stderr, "kiln bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kiln::tools
