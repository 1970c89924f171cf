// kiln: the command line. Subcommands: compile, inspect, run, bench, profile.
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "tools/commands.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

const Subcommand kSubcommands[] = {
    {"compile", kiln::tools::CompileMain, "compile an ONNX model to a .kiln executable"},
    {"inspect", kiln::tools::InspectMain, "print the header, disassembly, tables and section sizes"},
    {"run", kiln::tools::RunMain, "run a function of an executable on .npy / .pb inputs"},
    {"bench", kiln::tools::BenchMain, "first-call and steady-state latency, memory (--json)"},
    {"profile", kiln::tools::ProfileMain, "time per instruction kind, kernel and region (--trace)"},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: kiln <command> [args]\n\ncommands:\n");
  for (const Subcommand& s : kSubcommands) std::fprintf(out, "  %-10s %s\n", s.name, s.summary);
  std::fprintf(out, "\n'kiln <command> --help' describes a command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const Subcommand& s : kSubcommands) {
    if (std::string_view(argv[1]) == s.name) return s.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "kiln: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
