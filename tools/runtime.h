// What the kiln CLI binds executables to: the JIT kernel provider and the vendor registry.
#ifndef KILN_TOOLS_RUNTIME_H_
#define KILN_TOOLS_RUNTIME_H_

#include <memory>
#include <string>
#include <vector>

#include "external/registry/registry.h"
#include "jit/kernel_provider.h"
#include "vm/executable.h"

namespace kiln::tools {

struct CliRuntime {
  std::shared_ptr<jit::Engine> engine;              // for engine counters (bench --sweep)
  std::shared_ptr<jit::JitKernelProvider> kernels;  // for JIT counters (bench)
  LoadOptions load;                                  // kernels + externals bound
};

/// The global vendor registry with the built-in vendor runtimes (oneDNN, registered once per
/// process), $KILN_PLUGINS and `plugins` loaded. Errors name the plugin.
StatusOr<std::shared_ptr<ExternalRegistry>> CliVendors(const std::vector<std::string>& plugins);

/// CliVendors, then the JIT engine and provider. Errors name the plugin or the JIT failure.
StatusOr<CliRuntime> MakeCliRuntime(const std::vector<std::string>& plugins);

/// An executable loaded and bound by the CLI, and the function a subcommand runs.
struct LoadedFunction {
  CliRuntime runtime;
  std::shared_ptr<const Executable> exe;
  int index = -1;
  std::string name;
};

/// MakeCliRuntime, then loads `file` and finds `function` (the entry function if empty).
/// NotFound naming the function and the file if it does not exist.
StatusOr<LoadedFunction> LoadFunction(const std::string& file, const std::string& function,
                                      const std::vector<std::string>& plugins);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_RUNTIME_H_
