// kiln profile FILE: time per instruction kind, per kernel and per external region, as a table,
// and optionally a Chrome trace.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/inputs.h"
#include "tools/runtime.h"
#include "vm/context.h"
#include "vm/profile.h"

namespace kiln::tools {
namespace {

constexpr char kUsage[] =
    "usage: kiln profile FILE.kiln [--function NAME] [--shape SYMBOL=VALUE]... [--iters N]\n"
    "                    [--input NAME=PATH]... [--plugin PATH]... [--timeout-ms N]\n"
    "                    [--trace OUT.json]\n"
    "Runs a function to warm up (until its kernels are specialized), then --iters (default 10) profiled times, and prints the\n"
    "time per instruction kind, per kernel / shape function and per external region. --trace\n"
    "writes a Chrome trace (chrome://tracing, Perfetto) of the profiled runs. Inputs as for\n"
    "kiln bench: --input files (.npy or .pb), else generated (--shape for symbolic dims).\n";

struct ProfileArgs {
  std::string file, function, trace;
  std::map<std::string, int64_t> shapes;
  std::map<std::string, std::string> inputs;
  std::vector<std::string> plugins;
  long iters = 10, timeout_ms = 0;
};

bool ParseArgs(int argc, char** argv, ProfileArgs* a) {
  for (int i = 1; i < argc; ++i) {
    std::string f = argv[i];
    bool takes_value = f == "--function" || f == "--shape" || f == "--iters" || f == "--input" ||
                       f == "--plugin" || f == "--timeout-ms" || f == "--trace";
    if (!takes_value) {
      if ((!f.empty() && f[0] == '-') || !a->file.empty()) {
        std::fprintf(stderr, "kiln profile: unexpected argument '%s'\n%s", f.c_str(), kUsage);
        return false;
      }
      a->file = f;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kiln profile: %s needs a value\n", f.c_str());
      return false;
    }
    std::string v = argv[++i];
    if (f == "--function") a->function = v;
    if (f == "--plugin") a->plugins.push_back(v);
    if (f == "--trace") a->trace = v;
    if (f == "--iters" || f == "--timeout-ms") {
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n <= 0) {
        std::fprintf(stderr, "kiln profile: %s wants a positive integer, got '%s'\n", f.c_str(), v.c_str());
        return false;
      }
      (f == "--iters" ? a->iters : a->timeout_ms) = n;
    }
    if (f == "--shape" || f == "--input") {
      size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::fprintf(stderr, "kiln profile: %s wants NAME=VALUE, got '%s'\n", f.c_str(), v.c_str());
        return false;
      }
      if (f == "--input") {
        a->inputs[v.substr(0, eq)] = v.substr(eq + 1);
      } else {
        char* end = nullptr;
        long long n = std::strtoll(v.c_str() + eq + 1, &end, 10);
        if (*end != '\0' || n < 0 || end == v.c_str() + eq + 1) {
          std::fprintf(stderr, "kiln profile: --shape wants a non-negative integer in '%s'\n", v.c_str());
          return false;
        }
        a->shapes[v.substr(0, eq)] = n;
      }
    }
  }
  if (a->file.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return false;
  }
  return true;
}

Status RunProfile(const ProfileArgs& a) {
  ASSIGN_OR_RETURN(LoadedFunction f, LoadFunction(a.file, a.function, a.plugins));
  std::shared_ptr<const Executable> exe = f.exe;
  int index = f.index;
  const std::string& function = f.name;
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs, MakeInputs(exe->signature(index), a.shapes, a.inputs));
  ASSIGN_OR_RETURN(auto ctx, Context::Create(exe));
  std::vector<Tensor> outputs;
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(a.timeout_ms);
  // Warm-up: first-use JIT, then enough calls for the shapes to be specialized, and those
  // background compiles finished (they would compete with the profiled runs for the cores).
  for (int i = 0; i < std::max(1, jit::DispatchOptions{}.specialize_after); ++i)
    RETURN_IF_ERROR(ctx->Invoke(index, inputs, &outputs, options));
  f.runtime.kernels->WaitForBackgroundCompiles();
  Profile profile;
  options.profile = &profile;
  for (long i = 0; i < a.iters; ++i) RETURN_IF_ERROR(ctx->Invoke(index, inputs, &outputs, options));
  std::printf("%s @%s, %ld profiled runs after warm-up\n\n%s", a.file.c_str(), function.c_str(),
              a.iters, profile.Table(*exe).c_str());
  if (!a.trace.empty()) {
    std::ofstream out(a.trace, std::ios::binary | std::ios::trunc);
    out << profile.ChromeTrace(*exe);
    if (!out.good()) return InvalidArgument(a.trace + ": cannot write the trace");
    std::printf("trace: %s (%zu events)\n", a.trace.c_str(), profile.events().size());
  }
  return Status::Ok();
}

}  // namespace

int ProfileMain(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--help") == 0) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  ProfileArgs args;
  if (!ParseArgs(argc, argv, &args)) return 2;
  Status status = RunProfile(args);
  if (!status.ok()) {
    std::fprintf(stderr, "kiln profile: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kiln::tools
