// kiln compile MODEL.onnx -o OUT.kiln [--dim NAME=VALUE]... [--external=onednn|none]
// [--target native|x86-64-v3|x86-64-v4|CPU|none]... [--no-fallbacks] [--tune] [--quiet]
#include "compiler/compile.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "embed/compile.h"
#include "embed/flags.h"
#include "tools/commands.h"

namespace kiln::tools {
namespace {

constexpr char kAbout[] =
    "Compiles an ONNX model to a kiln executable. Progress goes to stderr (--quiet: only "
    "errors), a one-line summary to stdout.";

struct CompileArgs {
  std::string model, output;
  CompileOptions options;  // kiln's defaults (embed/compile.h): code for x86-64-v3 on x86-64
  std::vector<std::string> targets;  // --target: replaces the default targets when given
  bool quiet = false;
  bool no_fallbacks = false;
};

// Declares compile's flags; Parse fills `args`.
void AddFlags(FlagParser& flags, CompileArgs* args) {
  flags.AddPositional("MODEL.onnx", "the ONNX model", &args->model, true);
  flags.AddString("-o,--output", "OUT.kiln", "the executable to write (required)", &args->output);
  flags.AddSizeMap("--dim",
                   "pin symbolic dim NAME (an ONNX dim_param) to VALUE, so its shapes become "
                   "static; a NAME the model does not use is an error",
                   &args->options.dim_pins);
  flags.AddString("--external", "NAME",
                  "the external compiler that claims regions: onednn, or none (every op on the "
                  "JIT)",
                  &args->options.external);
  flags.AddInt("--threads", "N",
               "OpenMP threads for the kernels the compiler runs itself (constant folding) and "
               "for --tune's measurements; 0: OpenMP's default",
               0, 1024, &args->options.num_threads);
  flags.AddList("--target", "CPU",
                "also compile every kernel ahead of time for CPU (repeatable): native (this "
                "host), x86-64-v3 (AVX2), x86-64-v4 (AVX-512) or another x86-64 CPU name LLVM "
                "knows; a host that runs one of them links its code instead of JIT-compiling "
                "(code for narrower vectors than the host's as a first tier, whose hot kernels "
                "the JIT recompiles for the host in the background). Default on x86-64: "
                "x86-64-v3; none: kernel IR only (smaller file, faster compile, the first "
                "inference JIT-compiles)",
                &args->targets);
  flags.AddBool("--no-fallbacks",
                "give external regions no fallback function (smaller file, faster compile; a "
                "region its vendor declines or lacks then fails the load)",
                &args->no_fallbacks);
  flags.AddBool("--tune",
                "measure now, on this host and --threads' team, what loading measures (oneDNN: "
                "the Winograd accuracy probe, Conv tile and MatMul layout timings) and record "
                "it in the executable: a load at the tuned shape (static dims, a symbolic "
                "batch at 1; --dim pins others) and team size builds its plans without "
                "measuring. Then time each region against its fallback function (kiln's JIT) "
                "on synthetic inputs there and record which is faster: a region whose fallback "
                "took <= 0.9x its time runs the fallback (`kiln inspect` shows the timings; "
                "run/bench/profile --ignore-tuned-fallback restores the vendor)",
                &args->options.tune);
  flags.AddBool("-q,--quiet", "print errors only, no progress", &args->quiet);
}

// Writes `bytes` to `path` through a temporary file renamed into place, so a failed or
// interrupted write never leaves a truncated executable behind.
Status WriteFileAtomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) {
    return InvalidArgument(path + ": cannot open for writing: " + std::strerror(errno));
  }
  bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  int saved = errno;
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    saved = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    saved = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    return Internal(path + ": write failed: " + std::strerror(saved));
  }
  return Status::Ok();
}

}  // namespace

int CompileMain(int argc, char** argv) {
  CompileArgs args;
  FlagParser flags("kiln compile", "MODEL.onnx -o OUT.kiln [flags]", kAbout);
  AddFlags(flags, &args);
  if (std::optional<int> exit = flags.Parse(argc, argv)) return *exit;
  if (args.output.empty()) {
    std::fprintf(stderr, "kiln compile: no -o OUT.kiln given\n%s", flags.Usage().c_str());
    return 2;
  }
  // Checked before the compile (seconds for a big model), not after it at the rename.
  struct stat st;
  if (::stat(args.output.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    std::fprintf(stderr,
                 "kiln compile: -o %s is a directory; name the file to write, e.g. "
                 "%s/model.kiln\n",
                 args.output.c_str(), args.output.c_str());
    return 2;
  }
  const std::vector<std::string>& targets = args.targets;
  if (std::find(targets.begin(), targets.end(), "none") != targets.end() && targets.size() > 1) {
    std::fprintf(stderr, "kiln compile: --target none cannot be combined with other targets\n");
    return 2;
  }
  if (!targets.empty()) args.options.code_targets = targets;  // "none": kernel IR only
  args.options.external_fallbacks = !args.no_fallbacks;
  if (!args.quiet) {
    args.options.progress = [](std::string_view line) {
      std::fprintf(stderr, "kiln compile: %.*s\n", static_cast<int>(line.size()), line.data());
    };
  }
  compiler::CompileStats stats;
  StatusOr<std::vector<uint8_t>> bytes = kiln::CompileOnnxFile(args.model, args.options, &stats);
  Status status = bytes.ok() ? WriteFileAtomically(args.output, *bytes) : bytes.status();
  if (!status.ok()) {
    std::fprintf(stderr, "kiln compile: %s\n", status.ToString().c_str());
    return 1;
  }
  std::printf(
      "%s: %d nodes (%d after passes, %d folded), %d kernels (%d fused from %d nodes), "
      "%d external regions (%d nodes), %d shape functions, %d constants (%lld bytes), "
      "%zu bytes written in %.2f s\n",
      args.output.c_str(), stats.nodes, stats.nodes_after_passes, stats.folded_nodes, stats.kernels,
      stats.fused_kernels, stats.fused_nodes, stats.external_regions, stats.external_nodes,
      stats.shape_functions, stats.constants, static_cast<long long>(stats.constant_bytes),
      bytes->size(), stats.seconds);
  if (stats.code_targets > 0) {
    std::printf("  code ahead of time: %d targets, %d objects, %lld bytes, compiled in %.2f s\n",
                stats.code_targets, stats.code_objects, static_cast<long long>(stats.code_bytes),
                stats.code_seconds);
  }
  return 0;
}

}  // namespace kiln::tools
