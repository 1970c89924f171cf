// The compile-side composition root: which external compilers are built in.
#include "embed/compile.h"

#include <omp.h>

#include <algorithm>
#include <utility>

#include "external/onednn/compile/compiler.h"
#include "external/onednn/run/runtime.h"
#include "jit/aot_compile.h"

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

}  // namespace

StatusOr<std::vector<uint8_t>> CompileOnnxFile(const std::string& path,
                                               const compiler::CompileOptions& options,
                                               compiler::CompileStats* stats) {
  RETURN_IF_ERROR(BuiltInsRegistered());
  ASSIGN_OR_RETURN(compiler::CompileOptions o, WithTargetNames(options));
  ScopedThreads threads(o.num_threads);
  return compiler::CompileOnnxFile(path, WithTuner(std::move(o)), stats);
}

StatusOr<std::vector<uint8_t>> CompileOnnxBytes(const void* data, size_t size,
                                                const compiler::CompileOptions& options,
                                                compiler::CompileStats* stats) {
  RETURN_IF_ERROR(BuiltInsRegistered());
  ASSIGN_OR_RETURN(compiler::CompileOptions o, WithTargetNames(options));
  ScopedThreads threads(o.num_threads);
  return compiler::CompileOnnxBytes(data, size, WithTuner(std::move(o)), stats);
}

}  // namespace kiln
