// kiln inspect FILE: verifies the file and prints what it holds.
#include <cstdio>
#include <cstring>

#include "tools/commands.h"
#include "tools/runtime.h"
#include "vm/disassembler.h"
#include "vm/executable.h"

namespace kiln::tools {

int InspectMain(int argc, char** argv) {
  if (argc != 2 || std::strcmp(argv[1], "--help") == 0) {
    std::fprintf(argc == 2 ? stdout : stderr,
                 "usage: kiln inspect FILE.kiln\n"
                 "Verifies FILE and prints its header, every function's disassembly, the kernel,\n"
                 "shape-function, external-region (with each region's ops) and constant tables, and section\n"
                 "sizes.\n");
    return argc == 2 ? 0 : 2;
  }
  LoadOptions options;
  options.bind = false;
  options.prefetch_constants = false;
  auto exe = Executable::LoadFile(argv[1], options);
  if (!exe.ok()) {
    std::fprintf(stderr, "kiln inspect: %s\n", exe.status().ToString().c_str());
    return 1;
  }
  // The CLI's vendors (oneDNN built in, plugins from KILN_PLUGINS) describe their regions' ops.
  StatusOr<std::shared_ptr<ExternalRegistry>> vendors = CliVendors({});
  RegionDescriber describe;
  if (vendors.ok()) {
    describe = [registry = *vendors](const std::string& vendor, const uint8_t* blob, size_t size) {
      return registry->Describe(vendor, blob, size);
    };
  } else {
    std::fprintf(stderr, "kiln inspect: regions are not described: %s\n",
                 vendors.status().ToString().c_str());
  }
  std::fputs(InspectExecutable(**exe, describe).c_str(), stdout);
  return 0;
}

}  // namespace kiln::tools
