// Compiling inside an embedding application: the compiler with kiln's built-in external
// compilers (oneDNN) registered. The compile-side counterpart of embed/runtime.h, and a separate
// library (//embed:compile) so a serving process that only loads .kiln files links no compiler.
#ifndef KILN_EMBED_COMPILE_H_
#define KILN_EMBED_COMPILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "compiler/compile.h"
#include "compiler/external_compiler.h"

namespace kiln {

/// Registers every built-in external compiler ("onednn") in `registry`. Idempotent (a name
/// already present is left in place) and thread-safe. Errors come from the registry.
Status RegisterBuiltInCompilers(
    compiler::ExternalCompilerRegistry& registry = compiler::ExternalCompilerRegistry::Global());

/// compiler::CompileOnnxFile after RegisterBuiltInCompilers() on the global registry (once per
/// process), so `options.external` may name a built-in compiler. With `options.tune` (and no
/// tune_region of the caller's), oneDNN regions are tuned by the oneDNN runtime
/// (onednn::TuneRegion): this library links the vendors' runtimes for that. Its errors, and
/// the registry's.
StatusOr<std::vector<uint8_t>> CompileOnnxFile(const std::string& path,
                                               const compiler::CompileOptions& options,
                                               compiler::CompileStats* stats = nullptr);

/// As CompileOnnxFile for a serialized ModelProto in memory (no external data).
StatusOr<std::vector<uint8_t>> CompileOnnxBytes(const void* data, size_t size,
                                                const compiler::CompileOptions& options,
                                                compiler::CompileStats* stats = nullptr);

}  // namespace kiln

#endif  // KILN_EMBED_COMPILE_H_
