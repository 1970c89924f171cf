// kiln profile FILE: time per instruction kind, per kernel, per external region (with the vendor
// steps inside it) and per op type, as a table or JSON, and optionally a Chrome trace.
#include "vm/profile.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/inputs.h"
#include "vm/context.h"

namespace kiln::tools {
namespace {

constexpr char kAbout[] =
    "Runs a function (default: the entry) to warm up (the first call, then until its shapes "
    "are specialized and those background compiles are done), then --iters profiled times, "
    "and prints the time per instruction kind, per kernel / shape function, per external "
    "region with the steps the vendor ran inside it (oneDNN: each primitive's kind and "
    "implementation, REF marking reference code) and per op type. Inputs as for kiln bench: "
    "--input files (.npy or .pb), else generated, each symbolic dim from --dim.";

struct ProfileArgs {
  ModelArgs model;
  std::map<std::string, std::string> files;  // --input NAME=PATH
  std::string trace;
  int64_t iters = 10;
  bool json = false;
};

// Declares profile's flags; Parse fills `a`.
void AddFlags(FlagParser& flags, ProfileArgs* a) {
  AddGeneratedInputFlags(flags, &a->model, &a->files);
  flags.AddInt("--iters", "N", "profiled runs", 1, int64_t{1} << 30, &a->iters);
  flags.AddString("--trace", "OUT.json",
                  "write a Chrome trace (chrome://tracing, Perfetto) of the profiled runs",
                  &a->trace, "none");
  flags.AddBool("--json", "print one JSON object instead of the tables", &a->json);
}

Status RunProfile(const ProfileArgs& a) {
  ASSIGN_OR_RETURN(LoadedFunction f, LoadFunction(a.model));
  const Executable& exe = *f.exe;
  int index = f.index;
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs,
                   MakeInputs(f.signature(), a.model.dims, a.files, f.runtime->allocator()));
  ASSIGN_OR_RETURN(auto ctx, f.runtime->NewContext(f.exe));
  std::vector<Tensor> outputs;
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(a.model.timeout_ms);
  // Warm-up: first-use JIT, then enough calls for the shapes to be specialized, and those
  // background compiles finished (they would compete with the profiled runs for the cores).
  for (int i = 0; i < std::max(1, f.runtime->options().dispatch.specialize_after); ++i)
    RETURN_IF_ERROR(ctx->Invoke(index, inputs, &outputs, options));
  f.runtime->WaitForBackgroundCompiles();
  Profile profile;
  options.profile = &profile;
  for (int64_t i = 0; i < a.iters; ++i) {
    RETURN_IF_ERROR(ctx->Invoke(index, inputs, &outputs, options));
  }
  if (!a.trace.empty()) {
    std::ofstream out(a.trace, std::ios::binary | std::ios::trunc);
    out << profile.ChromeTrace(exe);
    if (!out.good()) return InvalidArgument(a.trace + ": cannot write the trace");
  }
  if (a.json) {
    std::printf("{\"file\": \"%s\", \"function\": \"%s\", \"threads\": %d, \"iters\": %lld, %s}\n",
                JsonEscape(a.model.file).c_str(), JsonEscape(f.name).c_str(),
                f.runtime->num_threads(), static_cast<long long>(a.iters),
                profile.JsonFields(exe).c_str());
    return Status::Ok();
  }
  std::printf("%s @%s, %d threads, %lld profiled runs after warm-up\n\n%s", a.model.file.c_str(),
              f.name.c_str(), f.runtime->num_threads(), static_cast<long long>(a.iters),
              profile.Table(exe).c_str());
  if (!a.trace.empty())
    std::printf("trace: %s (%zu events)\n", a.trace.c_str(), profile.events().size());
  return Status::Ok();
}

}  // namespace

int ProfileMain(int argc, char** argv) {
  ProfileArgs args;
  FlagParser flags("kiln profile", "FILE.kiln [flags]", kAbout);
  AddFlags(flags, &args);
  if (std::optional<int> exit = flags.Parse(argc, argv)) return *exit;
  Status status = RunProfile(args);
  if (!status.ok()) {
    std::fprintf(stderr, "kiln profile: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kiln::tools
