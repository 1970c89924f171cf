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

/// The options of a compile for an embedding application: compiler::CompileOptions with kiln's
/// default code targets (jit::DefaultCodeTargets(): x86-64-v3 on an x86-64 host, none
/// elsewhere), so that the CLI (`kiln compile`), Python's `kiln.compile` and C++ embedders write
/// the same file by default, whose first inference links code instead of compiling it on any
/// x86-64 CPU with AVX2 (one with AVX-512 links it as a first tier and tiers hot kernels up to
/// its own code: jit/aot_objects.h). The opt-out is the same everywhere: code_targets = {"none"}
/// (`--target none`) or {} writes kernel IR only (a faster compile, a smaller file; the first
/// inference then JIT-compiles). compiler::CompileOptions itself (the compiler's own tests)
/// embeds no code unless told to.
struct CompileOptions : compiler::CompileOptions {
  CompileOptions();
};

/// Registers every built-in external compiler ("onednn") in `registry`. Idempotent (a name
/// already present is left in place) and thread-safe. Errors come from the registry.
Status RegisterBuiltInCompilers(
    compiler::ExternalCompilerRegistry& registry = compiler::ExternalCompilerRegistry::Global());

/// compiler::CompileOnnxFile after RegisterBuiltInCompilers() on the global registry (once per
/// process), so `options.external` may name a built-in compiler. `options.code_targets` may be
/// {"none"} (kernel IR only; "none" beside another name is InvalidArgument). Pass a
/// kiln::CompileOptions for kiln's defaults. With `options.tune` (and no tune_region of the
/// caller's), oneDNN regions are tuned by the oneDNN runtime (onednn::TuneRegion): this
/// library links the vendors' runtimes for that. Then (with `options.tune`, whatever tuned
/// the regions) every region with a fallback function is timed against it on this host and
/// `num_threads`' team, in a runtime with the built-in vendors, on synthetic inputs at the
/// file's static dims (other symbolic dims at 1), and the outcome is recorded in the file
/// (ExternalRegion.tuned_fallback / tuned_note; vm/region_trial.h): a load runs the fallback
/// of a region measured at most 0.9x the region's time. A model that cannot run there keeps
/// its file without records (a progress line says why). Its errors, and the registry's.
StatusOr<std::vector<uint8_t>> CompileOnnxFile(const std::string& path,
                                               const compiler::CompileOptions& options,
                                               compiler::CompileStats* stats = nullptr);

/// As CompileOnnxFile for a serialized ModelProto in memory (no external data).
StatusOr<std::vector<uint8_t>> CompileOnnxBytes(const void* data, size_t size,
                                                const compiler::CompileOptions& options,
                                                compiler::CompileStats* stats = nullptr);

}  // namespace kiln

#endif  // KILN_EMBED_COMPILE_H_
