// kiln inspect FILE: verifies the file and prints what it holds.
#include <cstdio>
#include <optional>
#include <string>

#include "embed/flags.h"
#include "embed/runtime.h"
#include "tools/commands.h"
#include "vm/disassembler.h"
#include "vm/executable.h"

namespace kiln::tools {

int InspectMain(int argc, char** argv) {
  std::string file;
  RuntimeOptions runtime_options;
  FlagParser flags("kiln inspect", "FILE.kiln [flags]",
                   "Verifies FILE and prints its header, every function's disassembly, the "
                   "kernel, shape-function, external-region (with each region's ops, as its "
                   "vendor describes them) and constant tables, and section sizes.");
  flags.AddPositional("FILE.kiln", "the executable", &file, true);
  AddPluginFlag(flags, &runtime_options);
  if (std::optional<int> exit = flags.Parse(argc, argv)) return *exit;
  runtime_options.jit_cache = RuntimeOptions::kJitCacheOff;  // inspect compiles no kernel

  LoadOptions options;
  options.bind = false;
  options.prefetch_constants = false;
  auto exe = Executable::LoadFile(file, options);
  if (!exe.ok()) {
    std::fprintf(stderr, "kiln inspect: %s\n", exe.status().ToString().c_str());
    return 1;
  }
  // The runtime's vendors (oneDNN built in, plugins) describe their regions' ops.
  StatusOr<std::shared_ptr<Runtime>> runtime = Runtime::Create(runtime_options);
  if (!runtime.ok() && !runtime_options.plugins.empty()) {  // what --plugin asked for failed
    std::fprintf(stderr, "kiln inspect: %s\n", runtime.status().ToString().c_str());
    return 1;
  }
  RegionDescriber describe;
  if (runtime.ok()) {
    describe = [r = *runtime](const std::string& vendor, const uint8_t* blob, size_t size) {
      return r->vendors().Describe(vendor, blob, size);
    };
  } else {
    std::fprintf(stderr, "kiln inspect: regions are not described: %s\n",
                 runtime.status().ToString().c_str());
  }
  std::fputs(InspectExecutable(**exe, describe).c_str(), stdout);
  return 0;
}

}  // namespace kiln::tools
