// kiln bench FILE: first-call and steady-state latency of one function, with inputs generated
// deterministically from its signature (or read from .npy / .pb files).
#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/inputs.h"
#include "tools/npy.h"
#include "tools/runtime.h"
#include "vm/context.h"

namespace kiln::tools {
namespace {

constexpr char kUsage[] =
    "usage: kiln bench FILE.kiln [--function NAME] [--shape SYMBOL=VALUE]... [--iters N]\n"
    "                  [--warmup N] [--threads N] [--input NAME=PATH]... [--plugin PATH]...\n"
    "                  [--timeout-ms N] [--sweep SYMBOL=LO:HI] [--json]\n"
    "Runs a function (default: the entry) once (first call, JIT included), --warmup more times\n"
    "(at least until its shapes are specialized; background compiles are waited for), then\n"
    "--iters timed times, and reports first-call latency, steady-state p50/p90/p99, JIT\n"
    "compilations and peak memory. Inputs are read from --input files (.npy or .pb) or generated\n"
    "deterministically from the signature; each symbolic dim of a generated input needs\n"
    "--shape SYMBOL=VALUE. --threads sets the OpenMP team size. --timeout-ms bounds each call.\n"
    "--sweep runs that measurement at every SYMBOL value from LO to HI in turn (as a serving\n"
    "process sees shapes come and go) and reports each value's p50, then the JIT kernels alive\n"
    "and freed and the resident memory at the end.\n";

struct BenchArgs {
  std::string file, function;
  std::map<std::string, int64_t> shapes;
  std::map<std::string, std::string> inputs;
  std::vector<std::string> plugins;
  std::string sweep;  // symbol swept from sweep_lo to sweep_hi; empty: none
  int64_t sweep_lo = 0, sweep_hi = -1;
  int iters = 100, warmup = 5, threads = 0, timeout_ms = 0;
  bool json = false;
};

bool ParsePositive(const char* flag, const char* v, int64_t* out, bool allow_zero) {
  char* end = nullptr;
  long long x = std::strtoll(v, &end, 10);
  if (*v == '\0' || *end != '\0' || x < (allow_zero ? 0 : 1) || x > (int64_t{1} << 40)) {
    std::fprintf(stderr, "kiln bench: %s wants a %s integer, got '%s'\n", flag,
                 allow_zero ? "non-negative" : "positive", v);
    return false;
  }
  *out = x;
  return true;
}

bool ParseArgs(int argc, char** argv, BenchArgs* a) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    if (f == "--json") {
      a->json = true;
      continue;
    }
    bool takes_value = f == "--function" || f == "--shape" || f == "--iters" || f == "--warmup" ||
                       f == "--threads" || f == "--input" || f == "--plugin" ||
                       f == "--timeout-ms" || f == "--sweep";
    if (!takes_value) {
      if (!f.empty() && f[0] == '-') {
        std::fprintf(stderr, "kiln bench: unknown option '%s'\n%s", f.c_str(), kUsage);
        return false;
      }
      if (!a->file.empty()) {
        std::fprintf(stderr, "kiln bench: one executable at a time ('%s')\n", f.c_str());
        return false;
      }
      a->file = f;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kiln bench: %s needs a value\n", f.c_str());
      return false;
    }
    const char* v = argv[++i];
    int64_t n = 0;
    if (f == "--function") a->function = v;
    if (f == "--plugin") a->plugins.push_back(v);
    if (f == "--iters" || f == "--warmup" || f == "--threads" || f == "--timeout-ms") {
      if (!ParsePositive(f.c_str(), v, &n, f == "--warmup")) return false;
      (f == "--iters"     ? a->iters
       : f == "--warmup"  ? a->warmup
       : f == "--threads" ? a->threads
                          : a->timeout_ms) = static_cast<int>(n);
    }
    if (f == "--sweep") {
      const char* eq = std::strchr(v, '=');
      const char* colon = eq == nullptr ? nullptr : std::strchr(eq, ':');
      if (eq == nullptr || eq == v || colon == nullptr) {
        std::fprintf(stderr, "kiln bench: --sweep wants SYMBOL=LO:HI, got '%s'\n", v);
        return false;
      }
      a->sweep.assign(v, eq);
      std::string lo(eq + 1, colon);
      if (!ParsePositive("--sweep", lo.c_str(), &a->sweep_lo, true) ||
          !ParsePositive("--sweep", colon + 1, &a->sweep_hi, true)) {
        return false;
      }
      if (a->sweep_hi < a->sweep_lo) {
        std::fprintf(stderr, "kiln bench: --sweep %s: HI is below LO\n", v);
        return false;
      }
      continue;
    }
    if (f == "--shape" || f == "--input") {
      const char* eq = std::strchr(v, '=');
      if (eq == nullptr || eq == v) {
        std::fprintf(stderr, "kiln bench: %s wants NAME=VALUE, got '%s'\n", f.c_str(), v);
        return false;
      }
      std::string name(v, eq);
      if (f == "--input") {
        a->inputs[name] = eq + 1;
      } else if (!ParsePositive("--shape", eq + 1, &n, true)) {
        return false;
      } else {
        a->shapes[name] = n;
      }
    }
  }
  if (a->file.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return false;
  }
  return true;
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

Status Sweep(const BenchArgs& a, LoadedFunction& f) {
  using Clock = std::chrono::steady_clock;
  ASSIGN_OR_RETURN(auto ctx, Context::Create(f.exe));
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(a.timeout_ms);
  std::vector<Tensor> outputs;
  std::vector<std::pair<int64_t, double>> p50s;
  int warmup = std::max(a.warmup, jit::DispatchOptions{}.specialize_after);
  double rss_first = -1;
  for (int64_t value = a.sweep_lo; value <= a.sweep_hi; ++value) {
    std::map<std::string, int64_t> shapes = a.shapes;
    shapes[a.sweep] = value;
    StatusOr<std::vector<Tensor>> inputs = MakeInputs(f.exe->signature(f.index), shapes, a.inputs);
    if (!inputs.ok()) return inputs.status().WithContext(a.sweep + "=" + std::to_string(value));
    std::vector<double> times;
    for (int i = 0; i < warmup + a.iters; ++i) {
      if (i == warmup) f.runtime.kernels->WaitForBackgroundCompiles();
      auto start = Clock::now();
      Status s = ctx->Invoke(f.index, *inputs, &outputs, options);
      if (!s.ok()) return s.WithContext(a.sweep + "=" + std::to_string(value));
      if (i >= warmup) times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
    }
    p50s.emplace_back(value, Percentile(times, 0.5));
    if (rss_first < 0) rss_first = CurrentRssMb();
  }
  f.runtime.kernels->WaitForBackgroundCompiles();
  jit::DispatchStats d = f.runtime.kernels->stats();
  jit::EngineStats e = f.runtime.engine->stats();
  double rss = CurrentRssMb();
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  double peak_mb = usage.ru_maxrss / 1024.0;
  if (a.json) {
    std::printf("{\"function\": \"%s\", \"sweep\": \"%s\", \"iters\": %d, \"p50_ms\": [",
                f.name.c_str(), a.sweep.c_str(), a.iters);
    for (size_t i = 0; i < p50s.size(); ++i) {
      std::printf("%s[%lld, %.6f]", i ? ", " : "", static_cast<long long>(p50s[i].first),
                  p50s[i].second);
    }
    std::printf("], \"jit_compiles\": %lld, \"kernels_alive\": %lld, \"kernels_freed\": %lld, "
                "\"rss_after_first_mb\": %.1f, \"rss_mb\": %.1f, \"peak_rss_mb\": %.1f}\n",
                static_cast<long long>(d.compilations), static_cast<long long>(e.cached_kernels),
                static_cast<long long>(e.freed_kernels), rss_first, rss, peak_mb);
  } else {
    std::printf("%s @%s, %s from %lld to %lld, %d iterations each after %d warm-up\n",
                a.file.c_str(), f.name.c_str(), a.sweep.c_str(), static_cast<long long>(a.sweep_lo),
                static_cast<long long>(a.sweep_hi), a.iters, warmup);
    for (const auto& [value, p50] : p50s) {
      std::printf("  %s=%-8lld p50 %10.3f ms\n", a.sweep.c_str(), static_cast<long long>(value), p50);
    }
    std::printf("  jit          %lld compilations, %lld kernels alive, %lld freed\n"
                "  RSS          %10.1f MiB after the first value, %.1f MiB at the end (peak %.1f)\n",
                static_cast<long long>(d.compilations), static_cast<long long>(e.cached_kernels),
                static_cast<long long>(e.freed_kernels), rss_first, rss, peak_mb);
  }
  return Status::Ok();
}

Status Bench(const BenchArgs& a) {
  ASSIGN_OR_RETURN(LoadedFunction f, LoadFunction(a.file, a.function, a.plugins));
  std::shared_ptr<const Executable> exe = f.exe;
  int index = f.index;
  const std::string& function = f.name;
  CliRuntime& runtime = f.runtime;
  if (!a.sweep.empty()) return Sweep(a, f);
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs, MakeInputs(exe->signature(index), a.shapes, a.inputs));
  ASSIGN_OR_RETURN(auto ctx, Context::Create(exe));
  using Clock = std::chrono::steady_clock;
  std::vector<Tensor> outputs;
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(a.timeout_ms);
  auto run = [&]() -> StatusOr<double> {
    auto start = Clock::now();
    RETURN_IF_ERROR(ctx->Invoke(index, inputs, &outputs, options));
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  };
  ASSIGN_OR_RETURN(double first_ms, run());
  // The timed runs measure the steady state: every shape has been seen often enough to be
  // specialized, and the specializations (compiled on background threads) are installed. Runs
  // overlapping those compiles measure LLVM competing for the cores (on 2 cores with 2 OpenMP
  // threads, 2-4x slower).
  int warmup = std::max(a.warmup, jit::DispatchOptions{}.specialize_after);
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(run().status());
  runtime.kernels->WaitForBackgroundCompiles();
  std::vector<double> times;
  for (int i = 0; i < a.iters; ++i) {
    ASSIGN_OR_RETURN(double ms, run());
    times.push_back(ms);
  }
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  double peak_mb = usage.ru_maxrss / 1024.0;
  double p50 = Percentile(times, 0.50), p90 = Percentile(times, 0.90), p99 = Percentile(times, 0.99);
  runtime.kernels->WaitForBackgroundCompiles();  // count specializations the runs triggered
  jit::DispatchStats jit = runtime.kernels->stats();
  int jit_compiles = static_cast<int>(jit.compilations);
  double jit_ms = jit.compile_seconds * 1000.0;
  if (a.json) {
    std::printf("{\"function\": \"%s\", \"iters\": %d, \"first_ms\": %.6f, \"p50_ms\": %.6f, "
                "\"p90_ms\": %.6f, \"p99_ms\": %.6f, \"jit_compiles\": %d, \"jit_ms\": %.3f, "
                "\"peak_rss_mb\": %.1f}\n",
                function.c_str(), a.iters, first_ms, p50, p90, p99, jit_compiles, jit_ms, peak_mb);
  } else {
    std::printf("%s @%s, %d iterations after %d warm-up\n", a.file.c_str(), function.c_str(), a.iters,
                warmup);
    std::printf("  first call   %10.3f ms\n  p50          %10.3f ms\n  p90          %10.3f ms\n"
                "  p99          %10.3f ms\n  jit          %d compilations, %.1f ms\n"
                "  peak RSS     %10.1f MiB\n",
                first_ms, p50, p90, p99, jit_compiles, jit_ms, peak_mb);
  }
  return Status::Ok();
}

}  // namespace

int BenchMain(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--help") == 0) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  BenchArgs args;
  if (!ParseArgs(argc, argv, &args)) return 2;
  // libgomp reads OMP_NUM_THREADS once at load, so the count is set through the API (for this
  // thread, which runs every kernel and region of the benchmark).
  if (args.threads > 0) omp_set_num_threads(args.threads);
  Status status = Bench(args);
  if (!status.ok()) {
    std::fprintf(stderr, "kiln bench: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kiln::tools
