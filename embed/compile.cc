// The compile-side composition root: which external compilers are built in.
#include "embed/compile.h"

#include "external/onednn/compile/compiler.h"

namespace kiln {
namespace {

// The global registry's built-ins, registered by the first caller (a static's initializer runs
// once even under concurrent first calls); every caller sees that outcome.
const Status& BuiltInsRegistered() {
  static const Status* status = new Status(RegisterBuiltInCompilers());
  return *status;
}

}  // namespace

Status RegisterBuiltInCompilers(compiler::ExternalCompilerRegistry& registry) {
  return onednn::RegisterOneDnnCompiler(registry);
}

StatusOr<std::vector<uint8_t>> CompileOnnxFile(const std::string& path,
                                               const compiler::CompileOptions& options,
                                               compiler::CompileStats* stats) {
  RETURN_IF_ERROR(BuiltInsRegistered());
  return compiler::CompileOnnxFile(path, options, stats);
}

StatusOr<std::vector<uint8_t>> CompileOnnxBytes(const void* data, size_t size,
                                                const compiler::CompileOptions& options,
                                                compiler::CompileStats* stats) {
  RETURN_IF_ERROR(BuiltInsRegistered());
  return compiler::CompileOnnxBytes(data, size, options, stats);
}

}  // namespace kiln
