// The oneDNN vendor's compile side as a compiler::ExternalCompiler ("onednn"): its rules
// (rules.h) under string options and its codegen (codegen.h), registered by name.
#ifndef KILN_EXTERNAL_ONEDNN_COMPILE_COMPILER_H_
#define KILN_EXTERNAL_ONEDNN_COMPILE_COMPILER_H_

#include "base/status.h"
#include "compiler/external_compiler.h"

namespace kiln::onednn {

/// Registers the oneDNN compiler under kVendorName ("onednn"). Its options are
/// ParseRulesOptions's keys. Idempotent: OK when a compiler of that name is already registered
/// (it is left in place). Thread-safe as the registry is.
Status RegisterOneDnnCompiler(compiler::ExternalCompilerRegistry& registry);

}  // namespace kiln::onednn

#endif  // KILN_EXTERNAL_ONEDNN_COMPILE_COMPILER_H_
