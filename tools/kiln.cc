// kiln: the command line. Subcommands: compile, inspect, run, bench, profile.
#include <cstdio>
#include <string_view>

#include "embed/omp_wait.h"
#include "embed/runtime.h"
#include "serializer/version.h"
#include "tools/commands.h"

namespace {

struct Subcommand {
  const char* name;
  int (*run)(int argc, char** argv);
  const char* summary;
};

const Subcommand kSubcommands[] = {
    {"compile", kiln::tools::CompileMain, "compile an ONNX model to a .kiln executable"},
    {"inspect", kiln::tools::InspectMain,
     "print the header, disassembly, tables and section sizes"},
    {"run", kiln::tools::RunMain, "run a function of an executable on .npy / .pb inputs"},
    {"bench", kiln::tools::BenchMain, "first-call and steady-state latency, memory (--json)"},
    {"profile", kiln::tools::ProfileMain, "time per instruction kind, kernel and region (--trace)"},
};

void PrintUsage(FILE* out) {
  std::fprintf(out, "usage: kiln <command> [args]   kiln --version   kiln --help\n\ncommands:\n");
  for (const Subcommand& s : kSubcommands) std::fprintf(out, "  %-10s %s\n", s.name, s.summary);
  std::fprintf(out,
               "\n'kiln <command> --help' describes a command and its flags. Flags are given as\n"
               "--flag=value or --flag value. Exit codes: 0 success, 1 error, 2 usage error.\n");
}

void PrintVersion() {
  std::printf("kiln %s\nexecutable format %d.%d (loads major %d, minor <= %d)\nLLVM %s\n",
              kiln::kKilnVersion, kiln::kFormatMajor, kiln::kFormatMinor, kiln::kFormatMajor,
              kiln::kFormatMinor, kiln::LlvmVersion());
  std::printf("OpenMP wait: %s\n", kiln::OmpWaitPolicySource().c_str());
}

}  // namespace

int main(int argc, char** argv) {
  std::string_view first = argc < 2 ? "" : argv[1];
  if (first == "--version") {
    PrintVersion();
    return 0;
  }
  if (argc < 2 || first == "--help" || first == "-h") {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  for (const Subcommand& s : kSubcommands) {
    if (first == s.name) return s.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "kiln: unknown command '%s'\n\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
