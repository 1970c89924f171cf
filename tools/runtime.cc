// The CLI's runtime: JIT kernels and registered vendor runtimes.
#include "tools/runtime.h"

#include <algorithm>
#include <mutex>

#include "external/onednn/run/runtime.h"
#include "external/registry/registry.h"
#include "jit/engine.h"

namespace kiln::tools {
namespace {

// The vendors built into the CLI, registered in the global registry once per process (every
// MakeCliRuntime after the first finds them there).
Status RegisterBuiltInVendors(ExternalRegistry& registry) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  std::vector<std::string> vendors = registry.vendors();
  if (std::find(vendors.begin(), vendors.end(), onednn::kVendorName) == vendors.end()) {
    RETURN_IF_ERROR(onednn::RegisterOneDnn(registry));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::shared_ptr<ExternalRegistry>> CliVendors(const std::vector<std::string>& plugins) {
  const std::shared_ptr<ExternalRegistry>& registry = ExternalRegistry::Global();
  RETURN_IF_ERROR(RegisterBuiltInVendors(*registry));
  RETURN_IF_ERROR(registry->LoadPluginsFromEnvironment());
  for (const std::string& p : plugins) RETURN_IF_ERROR(registry->LoadPlugin(p));
  return registry;
}

StatusOr<CliRuntime> MakeCliRuntime(const std::vector<std::string>& plugins) {
  ASSIGN_OR_RETURN(std::shared_ptr<ExternalRegistry> registry, CliVendors(plugins));
  ASSIGN_OR_RETURN(std::unique_ptr<jit::Engine> engine, jit::Engine::Create());
  CliRuntime runtime;
  runtime.engine = std::move(engine);
  runtime.kernels = std::make_shared<jit::JitKernelProvider>(runtime.engine);
  runtime.load.kernels = runtime.kernels;
  runtime.load.externals = registry;
  runtime.load.huge_page_constants = true;  // as kiln::Runtime does by default
  return runtime;
}

StatusOr<LoadedFunction> LoadFunction(const std::string& file, const std::string& function,
                                      const std::vector<std::string>& plugins) {
  LoadedFunction f;
  ASSIGN_OR_RETURN(f.runtime, MakeCliRuntime(plugins));
  ASSIGN_OR_RETURN(f.exe, Executable::LoadFile(file, f.runtime.load));
  f.name = function.empty() ? std::string(f.exe->entry_function()) : function;
  f.index = f.exe->FindFunction(f.name);
  if (f.index < 0) return NotFound("no function named '" + f.name + "' in " + file);
  return f;
}

}  // namespace kiln::tools
