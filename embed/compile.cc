// The compile-side composition root: which external compilers are built in.
#include "embed/compile.h"

#include <omp.h>

#include <algorithm>

#include "external/onednn/compile/compiler.h"
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
  return compiler::CompileOnnxFile(path, o, stats);
}

StatusOr<std::vector<uint8_t>> CompileOnnxBytes(const void* data, size_t size,
                                                const compiler::CompileOptions& options,
                                                compiler::CompileStats* stats) {
  RETURN_IF_ERROR(BuiltInsRegistered());
  ASSIGN_OR_RETURN(compiler::CompileOptions o, WithTargetNames(options));
  ScopedThreads threads(o.num_threads);
  return compiler::CompileOnnxBytes(data, size, o, stats);
}

}  // namespace kiln
