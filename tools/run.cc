// kiln run FILE.kiln [PATH]... [--input NAME=PATH]... [--output-dir DIR] [--output-format npy|pb]
// and the flags run, bench and profile share (tools/inputs.h).
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "tools/commands.h"
#include "tools/inputs.h"
#include "tools/npy.h"
#include "tools/tensor_file.h"
#include "vm/context.h"

namespace kiln::tools {
namespace {

constexpr char kAbout[] =
    "Runs a function (default: the model's entry) on inputs read from .npy (NumPy) or .pb (ONNX "
    "TensorProto) files, given by parameter name or positionally in parameter order, checks "
    "them against the signature, and prints each output's type and first values.";

struct RunArgs {
  ModelArgs model;
  std::string output_dir;
  std::string output_format = "npy";
  std::vector<std::string> inputs;  // --input NAME=PATH or PATH
  std::vector<std::string> positional;
  bool stats = false;
};

// Declares run's flags; Parse fills `args`.
void AddFlags(FlagParser& flags, RunArgs* args) {
  AddModelFlags(flags,
                "check that each input file's symbolic dim NAME is VALUE (the files give the "
                "shapes)",
                &args->model);
  flags.AddRest("PATH", "input files in parameter order (.npy or .pb)", &args->positional);
  flags.AddList("--input", "NAME=PATH",
                "read parameter NAME from PATH (.npy or .pb); a bare PATH takes the next "
                "parameter in order",
                &args->inputs);
  flags.AddString("--output-dir", "DIR",
                  "write each output to DIR (made if missing): DIR/NAME.npy, or with "
                  "--output-format pb DIR/output_0.pb, output_1.pb, ... in result order",
                  &args->output_dir, "none: print only");
  flags.AddBool("--stats",
                "after the outputs, print to stderr how the kernels got their code: JIT "
                "compilations, kernels linked from code compiled ahead of time (kiln compile "
                "--target), loads from the JIT cache",
                &args->stats);
  flags.AddChoice("--output-format", "file format of the outputs --output-dir writes",
                  {"npy", "pb"}, &args->output_format);
}

// Orders the input files by parameter; errors name the parameter or the file.
StatusOr<std::vector<Tensor>> ReadInputs(const FunctionSignature& sig, const RunArgs& args,
                                         Allocator& allocator) {
  std::vector<std::string> positional = args.positional;
  std::vector<std::pair<std::string, std::string>> named;
  for (const std::string& input : args.inputs) {
    size_t eq = input.find('=');
    if (eq == std::string::npos) {
      positional.push_back(input);
    } else {
      named.emplace_back(input.substr(0, eq), input.substr(eq + 1));
    }
  }
  std::vector<std::string> paths(sig.params.size());
  if (positional.size() > sig.params.size()) {
    return InvalidArgument("'" + sig.name + "' takes " + std::to_string(sig.params.size()) +
                           " inputs, " + std::to_string(positional.size()) + " given");
  }
  for (size_t i = 0; i < positional.size(); ++i) paths[i] = positional[i];
  for (const auto& [name, path] : named) {
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
    std::string stored_name;
    ASSIGN_OR_RETURN(Tensor t, ReadTensorFile(paths[i], allocator, &stored_name));
    RETURN_IF_ERROR(CheckInput(sig, i, t, paths[i], args.model.dims, stored_name));
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
      case DType::kU16: std::snprintf(buf, sizeof(buf), "%u", *static_cast<const uint16_t*>(p)); break;
      case DType::kU32: std::snprintf(buf, sizeof(buf), "%u", *static_cast<const uint32_t*>(p)); break;
      case DType::kU64: std::snprintf(buf, sizeof(buf), "%" PRIu64, *static_cast<const uint64_t*>(p)); break;
      default: std::snprintf(buf, sizeof(buf), "?"); break;
    }
    s += (i ? ", " : "") + std::string(buf);
  }
  if (t.NumElements() > n) s += ", ...";
  return "[" + s + "]";
}

// --stats: where the code of this process's kernels came from.
void PrintStats(const Runtime& runtime) {
  RuntimeStats stats = runtime.stats();
  std::fprintf(stderr,
               "kiln run: jit: %lld compilations (%.1f ms; %lld of them loaded from the JIT "
               "cache), %lld kernels linked from code compiled ahead of time\n",
               static_cast<long long>(stats.engine.compilations),
               stats.engine.compile_seconds * 1000.0,
               static_cast<long long>(stats.engine.object_cache_hits),
               static_cast<long long>(stats.dispatch.aot_kernels));
}

Status Run(const RunArgs& args) {
  ASSIGN_OR_RETURN(LoadedFunction f, LoadFunction(args.model));
  // The kernels compile on every core while the inputs are read and the first ones run.
  f.runtime->Prefetch(f.exe, f.name);
  const FunctionSignature& sig = f.signature();
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs, ReadInputs(sig, args, f.runtime->allocator()));
  ASSIGN_OR_RETURN(auto ctx, f.runtime->NewContext(f.exe));
  InvokeOptions options;
  options.timeout = std::chrono::milliseconds(args.model.timeout_ms);
  auto start = std::chrono::steady_clock::now();
  StatusOr<std::vector<Tensor>> invoked = ctx->Invoke(f.index, inputs, options);
  if (invoked.status().code() == StatusCode::kDeadlineExceeded) {
    // How late the deadline fired is what a user tuning --timeout-ms needs to know.
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count();
    char late[96];
    std::snprintf(late, sizeof(late), " (stopped after %.2f ms; --timeout-ms %lld)", ms,
                  static_cast<long long>(args.model.timeout_ms));
    return DeadlineExceeded(invoked.status().message() + late);
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> outputs, std::move(invoked));
  // Made if missing (one level); if that fails, writing the first output says why.
  if (!args.output_dir.empty()) ::mkdir(args.output_dir.c_str(), 0777);
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string name = i < sig.results.size() && !sig.results[i].name.empty()
                           ? sig.results[i].name : "output_" + std::to_string(i);
    std::printf("%s: %s %s\n", name.c_str(), outputs[i].TypeString().c_str(), Preview(outputs[i]).c_str());
    if (args.output_dir.empty()) continue;
    if (args.output_format == "pb") {
      std::string path = args.output_dir + "/output_" + std::to_string(i) + ".pb";
      RETURN_IF_ERROR(WriteTensorProto(path, outputs[i], name));
    } else {
      std::string file = name;  // an ONNX name may hold '/', which must not make a directory
      for (char& c : file) c = c == '/' ? '_' : c;
      RETURN_IF_ERROR(WriteNpy(args.output_dir + "/" + file + ".npy", outputs[i]));
    }
  }
  // The call ran first-tier code; with a JIT cache the optimized code was queued at once, to be
  // stored for the next process. Outputs are out: finish those compiles (the process would
  // otherwise drop them at exit), so the next run starts warm.
  std::fflush(stdout);
  if (!f.runtime->jit_cache_dir().empty()) f.runtime->WaitForBackgroundCompiles();
  if (args.stats) PrintStats(*f.runtime);
  return Status::Ok();
}

}  // namespace

int RunMain(int argc, char** argv) {
  RunArgs args;
  FlagParser flags("kiln run", "FILE.kiln [PATH]... [flags]", kAbout);
  AddFlags(flags, &args);
  if (std::optional<int> exit = flags.Parse(argc, argv)) return *exit;
  Status status = Run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "kiln run: %s\n", status.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace kiln::tools
