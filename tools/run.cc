// kiln run FILE [--function NAME] [--input NAME=PATH | PATH]... [--output-dir DIR]
//               [--output-format npy|pb] [--timeout-ms N]
#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/npy.h"
#include "tools/runtime.h"
#include "tools/tensor_file.h"
#include "vm/context.h"

namespace kiln::tools {
namespace {

constexpr char kUsage[] =
    "usage: kiln run FILE.kiln [--function NAME] [--input NAME=PATH]... [PATH]...\n"
    "                [--output-dir DIR] [--output-format npy|pb] [--timeout-ms N]\n"
    "                [--plugin PATH]...\n"
    "Runs a function (default: the model's entry) on inputs read from .npy (NumPy) or .pb (ONNX\n"
    "TensorProto) files, given by parameter name or positionally in parameter order, and prints\n"
    "a summary of each output. With --output-dir (made if missing), writes each output as\n"
    "DIR/NAME.npy, or with --output-format pb as DIR/output_0.pb, output_1.pb, ... in result\n"
    "order (TensorProtos named after the outputs). --timeout-ms stops a run that takes longer.\n"
    "--plugin loads a vendor runtime plugin (also: KILN_PLUGINS=PATH[:PATH...]).\n";

struct RunArgs {
  std::string file, function, output_dir;
  bool output_pb = false;  // --output-format pb
  std::vector<std::pair<std::string, std::string>> named;  // name -> path
  std::vector<std::string> positional;
  std::vector<std::string> plugins;
  long timeout_ms = 0;
};

// Parses argv; returns false (after printing why) on a usage error.
bool ParseArgs(int argc, char** argv, RunArgs* args) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kiln run: %s needs a value\n", flag);
        return nullptr;
      }
      return argv[++i];
    };
    if (a == "--function" || a == "--output-dir" || a == "--input" || a == "--timeout-ms" ||
        a == "--plugin" || a == "--output-format") {
      const char* v = value(a.c_str());
      if (v == nullptr) return false;
      if (a == "--function") args->function = v;
      if (a == "--output-dir") args->output_dir = v;
      if (a == "--plugin") args->plugins.push_back(v);
      if (a == "--output-format") {
        if (std::strcmp(v, "npy") != 0 && std::strcmp(v, "pb") != 0) {
          std::fprintf(stderr, "kiln run: --output-format wants npy or pb, got '%s'\n", v);
          return false;
        }
        args->output_pb = std::strcmp(v, "pb") == 0;
      }
      if (a == "--timeout-ms") {
        char* end = nullptr;
        args->timeout_ms = std::strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || args->timeout_ms <= 0) {
          std::fprintf(stderr, "kiln run: --timeout-ms wants a positive integer, got '%s'\n", v);
          return false;
        }
      }
      if (a == "--input") {
        const char* eq = std::strchr(v, '=');
        if (eq == nullptr) {
          args->positional.push_back(v);
        } else {
          args->named.emplace_back(std::string(v, eq), std::string(eq + 1));
        }
      }
    } else if (a.size() > 1 && a[0] == '-') {
      std::fprintf(stderr, "kiln run: unknown option '%s'\n%s", a.c_str(), kUsage);
      return false;
    } else if (args->file.empty()) {
      args->file = a;
    } else {
      args->positional.push_back(a);
    }
  }
  if (args->file.empty()) {
    std::fprintf(stderr, "%s", kUsage);
    return false;
  }
  return true;
}

// Checks what one file holds against parameter i: dtype, rank and fixed dims. (The VM checks
// again, and also that symbolic dims agree across inputs; this check names the file.)
Status CheckInput(const FunctionSignature& sig, size_t i, const Tensor& t, const std::string& path) {
  const ValueSpec& spec = sig.params[i];
  std::string where = "input " + std::to_string(i) + " '" + spec.name + "' (" + path + ")";
  std::string expected = "expected " + spec.ToString();
  if (t.dtype() != spec.dtype) {
    return InvalidArgument(where + ": dtype " + DTypeShortName(t.dtype()) + ", " + expected);
  }
  if (t.rank() != static_cast<int>(spec.shape.size())) {
    return InvalidArgument(where + ": rank " + std::to_string(t.rank()) + " (" + t.TypeString() +
                           "), " + expected);
  }
  for (int d = 0; d < t.rank(); ++d) {
    if (spec.shape[d].fixed() && spec.shape[d].value != t.dim(d)) {
      return InvalidArgument(where + ": dim " + std::to_string(d) + " is " + std::to_string(t.dim(d)) +
                             ", " + expected);
    }
  }
  return Status::Ok();
}

// Orders the input files by parameter; errors name the parameter or the file.
StatusOr<std::vector<Tensor>> ReadInputs(const FunctionSignature& sig, const RunArgs& args) {
  std::vector<std::string> paths(sig.params.size());
  if (args.positional.size() > sig.params.size()) {
    return InvalidArgument("'" + sig.name + "' takes " + std::to_string(sig.params.size()) +
                           " inputs, " + std::to_string(args.positional.size()) + " given");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) paths[i] = args.positional[i];
  for (const auto& [name, path] : args.named) {
    size_t i = 0;
    while (i < sig.params.size() && sig.params[i].name != name) ++i;
    if (i == sig.params.size()) {
      std::string names;
      for (const ValueSpec& p : sig.params) names += (names.empty() ? "" : ", ") + p.name;
      return InvalidArgument("'" + sig.name + "' has no input named '" + name + "' (inputs: " + names + ")");
    }
    if (!paths[i].empty()) return InvalidArgument("input '" + name + "' given twice");
    paths[i] = path;
  }
  for (size_t i = 0; i < paths.size(); ++i) {  // before reading anything: a usage slip first
    if (paths[i].empty()) {
      return InvalidArgument("missing input " + std::to_string(i) + " '" + sig.params[i].name +
                             "' (" + sig.params[i].ToString() + ")");
    }
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < paths.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor t, ReadTensorFile(paths[i], DefaultAllocator()));
    RETURN_IF_ERROR(CheckInput(sig, i, t, paths[i]));
    inputs.push_back(std::move(t));
  }
  return inputs;
}

std::string Preview(const Tensor& t) {
  std::string s;
  int64_t n = std::min<int64_t>(t.NumElements(), 8);
  for (int64_t i = 0; i < n; ++i) {
    char buf[48];
    const void* p = static_cast<const char*>(t.data()) + i * DTypeSize(t.dtype());
    switch (t.dtype()) {
      case DType::kF32: std::snprintf(buf, sizeof(buf), "%g", *static_cast<const float*>(p)); break;
      case DType::kF64: std::snprintf(buf, sizeof(buf), "%g", *static_cast<const double*>(p)); break;
      case DType::kI64: std::snprintf(buf, sizeof(buf), "%" PRId64, *static_cast<const int64_t*>(p)); break;
      case DType::kI32: std::snprintf(buf, sizeof(buf), "%d", *static_cast<const int32_t*>(p)); break;
      case DType::kI8: std::snprintf(buf, sizeof(buf), "%d", *static_cast<const int8_t*>(p)); break;
      case DType::kU8:
      case DType::kBool: std::snprintf(buf, sizeof(buf), "%u", *static_cast<const uint8_t*>(p)); break;
      case DType::kI16: std::snprintf(buf, sizeof(buf), "%d", *static_cast<const int16_t*>(p)); break;
      default: std::snprintf(buf, sizeof(buf), "?"); break;
    }
    s += (i ? ", " : "") + std::string(buf);
  }
  if (t.NumElements() > n) s += ", ...";
  return "[" + s + "]";
}

Status Run(const RunArgs& args) {
  ASSIGN_OR_RETURN(LoadedFunction f, LoadFunction(args.file, args.function, args.plugins));
  std::shared_ptr<const Executable> exe = f.exe;
  int index = f.index;
  const FunctionSignature& sig = exe->signature(index);
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs, ReadInputs(sig, args));
  ASSIGN_OR_RETURN(auto ctx, Context::Create(exe));
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(args.timeout_ms);
  ASSIGN_OR_RETURN(std::vector<Tensor> outputs, ctx->Invoke(index, inputs, options));
  // Made if missing (one level); if that fails, writing the first output says why.
  if (!args.output_dir.empty()) ::mkdir(args.output_dir.c_str(), 0777);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name = i < sig.results.size() && !sig.results[i].name.empty()
                           ? sig.results[i].name : "output_" + std::to_string(i);
    std::printf("%s: %s %s\n", name.c_str(), outputs[i].TypeString().c_str(), Preview(outputs[i]).c_str());
    if (args.output_dir.empty()) continue;
    if (args.output_pb) {
      std::string path = args.output_dir + "/output_" + std::to_string(i) + ".pb";
      RETURN_IF_ERROR(WriteTensorProto(path, outputs[i], name));
    } else {
      std::string file = name;  // an ONNX name may hold '/', which must not make a directory
      for (char& c : file) c = c == '/' ? '_' : c;
      RETURN_IF_ERROR(WriteNpy(args.output_dir + "/" + file + ".npy", outputs[i]));
    }
  }
  return Status::Ok();
}

}  // namespace

int RunMain(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--help") == 0) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  RunArgs args;
  if (!ParseArgs(argc, argv, &args)) return 2;
  Status status = Run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "kiln run: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kiln::tools
