// kiln compile MODEL.onnx -o OUT.kiln [--dim NAME=VALUE]... [--external=onednn|none] [--quiet]
#include "compiler/compile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/onnx/importer.h"
#include "embed/compile.h"
#include "tools/commands.h"

namespace kiln::tools {
namespace {

constexpr char kUsage[] =
    "usage: kiln compile MODEL.onnx -o OUT.kiln [--dim NAME=VALUE]... [--external=none|onednn]\n"
    "                    [--quiet]\n"
    "Compiles an ONNX model to a kiln executable. --dim pins a symbolic dim (an ONNX dim_param)\n"
    "to a value so shapes become static. --external picks the external compiler that claims\n"
    "regions: onednn (the default) or none (every op on the JIT). Progress goes to stderr\n"
    "(--quiet: only errors), a one-line summary to stdout.\n";

struct CompileArgs {
  std::string model, output;
  compiler::CompileOptions options;
  bool quiet = false;
};

// If argv[*i] is `flag` ("--flag=value" or "--flag value"), stores the value in *out and
// returns 1 (advancing *i past a separate value); 0 if it is another argument; -1 (after
// printing why) if the value is missing.
int FlagValue(int argc, char** argv, int* i, std::string_view flag, std::string* out) {
  std::string_view a = argv[*i];
  if (a.size() > flag.size() && a.substr(0, flag.size()) == flag && a[flag.size()] == '=') {
    *out = std::string(a.substr(flag.size() + 1));
    return 1;
  }
  if (a != flag) return 0;
  if (*i + 1 >= argc) {
    std::fprintf(stderr, "kiln compile: %s needs a value\n", argv[*i]);
    return -1;
  }
  *out = argv[++*i];
  return 1;
}

// Parses argv; returns false (after printing why) on a usage error.
bool ParseArgs(int argc, char** argv, CompileArgs* args) {
  compiler::ImportOptions pins;  // ParseDimPin's checks (syntax, sign, duplicates)
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string v;
    int o = FlagValue(argc, argv, &i, "-o", &v);
    if (o == 0) o = FlagValue(argc, argv, &i, "--output", &v);
    int dim = o == 0 ? FlagValue(argc, argv, &i, "--dim", &v) : 0;
    int ext = o == 0 && dim == 0 ? FlagValue(argc, argv, &i, "--external", &v) : 0;
    if (o < 0 || dim < 0 || ext < 0) return false;
    if (o > 0) {
      args->output = v;
    } else if (dim > 0) {
      Status s = compiler::ParseDimPin(v, &pins);
      if (!s.ok()) {
        std::fprintf(stderr, "kiln compile: --dim: %s\n", s.message().c_str());
        return false;
      }
    } else if (ext > 0) {
      args->options.external = v;
    } else if (a == "--quiet" || a == "-q") {
      args->quiet = true;
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "kiln compile: unknown option '%s'\n%s", a.c_str(), kUsage);
      return false;
    } else if (args->model.empty()) {
      args->model = a;
    } else {
      std::fprintf(stderr, "kiln compile: more than one model given ('%s', '%s')\n%s",
                   args->model.c_str(), a.c_str(), kUsage);
      return false;
    }
  }
  if (args->model.empty() || args->output.empty()) {
    std::fprintf(stderr, "kiln compile: %s\n%s",
                 args->model.empty() ? "no model given" : "no -o OUT.kiln given", kUsage);
    return false;
  }
  args->options.dim_pins = pins.dim_pins;
  return true;
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
  if (argc == 2 && (std::strcmp(argv[1], "--help") == 0 || std::strcmp(argv[1], "-h") == 0)) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  CompileArgs args;
  if (!ParseArgs(argc, argv, &args)) return 2;
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
  return 0;
}

}  // namespace kiln::tools
