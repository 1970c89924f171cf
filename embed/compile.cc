// The compile-side composition root: which external compilers are built in.
#include "embed/compile.h"

#include <omp.h>

#include <algorithm>
#include <utility>

#include "external/onednn/compile/compiler.h"
#include "external/onednn/run/runtime.h"
#include "embed/runtime.h"
#include "jit/aot_compile.h"
#include "vm/region_trial.h"

namespace kiln {
namespace {

// The global registry's built-ins, registered by the first caller (a static's initializer runs
// once even under concurrent first calls); every caller sees that outcome.
const Status& BuiltInsRegistered() {
  static const Status* status = new Status(RegisterBuiltInCompilers());
  return *status;
}

}  // namespace

CompileOptions::CompileOptions() { code_targets = jit::DefaultCodeTargets(); }

Status RegisterBuiltInCompilers(compiler::ExternalCompilerRegistry& registry) {
  return onednn::RegisterOneDnnCompiler(registry);
}

namespace {

// Sets the calling thread's OpenMP team size for the kernels the compiler runs (constant
// folding) and restores it after, so compiling never changes what the caller's own parallel
// code sees.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : previous_(omp_get_max_threads()), set_(n > 0) {
    if (set_) omp_set_num_threads(n);
  }
  ~ScopedThreads() {
    if (set_) omp_set_num_threads(previous_);
  }

 private:
  int previous_;
  bool set_;
};

// `options` with tune_region set, when tuning, to the built-in vendors' runtimes (oneDNN's
// TuneRegion); a region of another vendor keeps its blob.
compiler::CompileOptions WithTuner(compiler::CompileOptions options) {
  if (!options.tune || options.tune_region) return options;
  options.tune_region = [](const ExternalRegionSpec& spec,
                           std::string* note) -> StatusOr<std::vector<uint8_t>> {
    if (spec.vendor == onednn::kVendorName) return onednn::TuneRegion(spec, {}, note);
    *note = "not tuned (vendor " + std::string(spec.vendor) + " has no tuning)";
    return std::vector<uint8_t>(spec.blob, spec.blob + spec.blob_size);
  };
  return options;
}

// `options` with code_targets {"none"} read as {} (kernel IR only, as `--target none`).
StatusOr<compiler::CompileOptions> WithTargetNames(const compiler::CompileOptions& options) {
  const std::vector<std::string>& names = options.code_targets;
  if (std::find(names.begin(), names.end(), "none") == names.end()) return options;
  if (names.size() > 1) {
    return InvalidArgument("code target 'none' (kernel IR only) cannot be combined with other "
                           "targets");
  }
  compiler::CompileOptions out = options;
  out.code_targets.clear();
  return out;
}

// Whether the executable has a region with a fallback function (what region trials time).
bool HasFallbacks(const std::vector<uint8_t>& bytes) {
  auto exe = Executable::LoadBytes(bytes.data(), bytes.size(), LoadOptions{nullptr, nullptr, false});
  if (!exe.ok() || (*exe)->root().external_regions() == nullptr) return false;
  for (const fb::ExternalRegion* r : *(*exe)->root().external_regions()) {
    if (r->fallback() >= 0) return true;
  }
  return false;
}

// After the vendors' tuning: times every region against its fallback function on this host
// and the options' team (vm/region_trial.h), in a runtime with the built-in vendors that
// compiles optimized code at once, and records the outcome in the executable. A model that
// cannot run at the tuned shape keeps its file without records (a progress line says why).
StatusOr<std::vector<uint8_t>> TrialFallbacks(std::vector<uint8_t> bytes,
                                              const compiler::CompileOptions& options) {
  if (!options.tune || !HasFallbacks(bytes)) return bytes;
  auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  RuntimeOptions ro;
  ro.num_threads = options.num_threads;
  ro.dispatch.tiering = false;        // time optimized code, as a warm run has
  ro.dispatch.specialize_after = 2;   // and shape-specialized variants, compiled in warm-up
  ro.huge_page_constants = false;
  ASSIGN_OR_RETURN(std::shared_ptr<Runtime> runtime, Runtime::Create(ro));
  RegionTrialOptions to;
  to.load = runtime->load_options();
  to.dims = options.dim_pins;
  to.settle = [&runtime] { runtime->WaitForBackgroundCompiles(); };
  to.allocator = &runtime->allocator();
  int threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  to.threads = std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  // A team of one is timed in CPU time, which a loaded host does not distort; a larger team in
  // wall time (CPU time would favor serial code), best measured on an idle host.
  if (threads == 1) to.clock = RegionTrialOptions::Clock::kProcessCpu;
  say("tune: timing each region against its fallback function (" + to.threads + ")");
  StatusOr<std::vector<RegionTrial>> trials = TrialRegions(bytes.data(), bytes.size(), to);
  if (!trials.ok()) {
    say("tune: regions keep their vendor, as the trials could not run: " +
        trials.status().ToString());
    return bytes;
  }
  int won = 0;
  for (const RegionTrial& t : *trials) {
    won += t.fallback_faster;
    say("tune: " + t.name + ": " + t.note + (t.fallback_faster ? " -> fallback" : ""));
  }
  say("tune: " + std::to_string(won) + " of " + std::to_string(trials->size()) +
      " regions run their fallback functions");
  return RecordRegionTrials(bytes.data(), bytes.size(), *trials);
}

}  // namespace

StatusOr<std::vector<uint8_t>> CompileOnnxFile(const std::string& path,
                                               const compiler::CompileOptions& options,
                                               compiler::CompileStats* stats) {
  RETURN_IF_ERROR(BuiltInsRegistered());
  ASSIGN_OR_RETURN(compiler::CompileOptions o, WithTargetNames(options));
  ScopedThreads threads(o.num_threads);
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                   compiler::CompileOnnxFile(path, WithTuner(o), stats));
  return TrialFallbacks(std::move(bytes), o);
}

StatusOr<std::vector<uint8_t>> CompileOnnxBytes(const void* data, size_t size,
                                                const compiler::CompileOptions& options,
                                                compiler::CompileStats* stats) {
  RETURN_IF_ERROR(BuiltInsRegistered());
  ASSIGN_OR_RETURN(compiler::CompileOptions o, WithTargetNames(options));
  ScopedThreads threads(o.num_threads);
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes,
                   compiler::CompileOnnxBytes(data, size, WithTuner(o), stats));
  return TrialFallbacks(std::move(bytes), o);
}

}  // namespace kiln
