// The compiler driver: ONNX model -> .kiln bytes (import, shape inference, simplification,
// constant folding, partitioning for an external compiler, lowering, emission). Vendors come
// from an ExternalCompilerRegistry; embed/compile.h wraps these calls with the built-in ones.
#ifndef KILN_COMPILER_COMPILE_H_
#define KILN_COMPILER_COMPILE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "compiler/external_compiler.h"
#include "compiler/ir/graph.h"
#include "vm/providers.h"

namespace kiln::compiler {

struct CompileOptions {
  /// Pins symbolic dims to values (`--dim batch=1`): shapes become static, kernels specialize.
  std::map<std::string, int64_t> dim_pins;
  /// Which external compiler claims regions: a name registered in `external_compilers`
  /// ("onednn", the default, once embed/compile.h registered the built-ins) or "none"
  /// (everything on the JIT). Anything else is Unsupported, naming the registered choices.
  std::string external = "onednn";
  /// Options of that compiler (ExternalCompiler::Rules), e.g. the oneDNN compiler's
  /// "regions_without_conv" = "1". Ignored with external == "none".
  ExternalOptions external_options;
  /// Where `external` is looked up; null: ExternalCompilerRegistry::Global(). Not owned; must
  /// outlive the call.
  const ExternalCompilerRegistry* external_compilers = nullptr;
  /// OpenMP threads for the kernels the compiler runs itself (constant folding); 0: OpenMP's
  /// default. Applied by embed/compile.h (the compiler links no OpenMP) for the duration of the
  /// call, on the calling thread.
  int num_threads = 0;
  /// Evaluate nodes whose inputs are all constants at compile time (through the same kernels).
  bool fold_constants = true;
  /// Store the constant B of JIT MatMul / Gemm nodes prepacked for the GEMM's tiles
  /// (compiler/passes/pack_weights.h).
  bool pack_weights = true;
  /// CPU targets to compile every kernel for ahead of time (`kiln compile --target`): "native"
  /// (this host), or an x86-64 CPU name ("x86-64-v3", "x86-64-v4", ...; jit/aot_compile.h).
  /// The objects travel in the executable, and a runtime whose host runs one of them links its
  /// kernels instead of compiling them. Empty: kernel IR only. An unknown name is
  /// InvalidArgument, reported before anything is compiled.
  std::vector<std::string> code_targets;
  /// Give every external region a fallback function (its nodes on the JIT, as with external
  /// "none"), which the VM runs when the vendor declines the region at load or is absent.
  /// Costs file size (the kernels, and constants the vendor's codegen rewrote) and compile
  /// time. Regions the JIT cannot run get none (reported through `progress`).
  bool external_fallbacks = true;
  /// `kiln compile --tune`: each region a vendor's codegen made goes through `tune_region`,
  /// which measures once what the vendor's runtime would measure at every load (oneDNN: the
  /// Winograd accuracy probe, timed Conv tiles, MatMul weight layouts) and records it in the
  /// blob, on the calling thread's OpenMP team (`num_threads`). Without `tune_region`,
  /// InvalidArgument (embed/compile.h sets it).
  bool tune = false;
  /// Given a region as a loader would create it (its blob, its constants by reference), returns
  /// the blob to store and sets `*note` to a line of progress ("" for none); errors fail the
  /// compile. Called on the compiling thread, once per region, when `tune` is set.
  std::function<StatusOr<std::vector<uint8_t>>(const ExternalRegionSpec& spec, std::string* note)>
      tune_region;
  /// Receives one human-readable progress line per stage ("lowering 120/400 nodes"); may be
  /// empty. Called on the compiling thread.
  std::function<void(std::string_view)> progress;
};

struct CompileStats {
  int nodes = 0;            // nodes after import
  int nodes_after_passes = 0;
  int folded_nodes = 0;     // evaluated at compile time
  int simplified_nodes = 0; // transpose chains merged, view chains shortcut, constant Reshape
                            // targets (ConstantReshapeShapes)
  int kernels = 0;          // distinct kernels in the executable
  int fused_kernels = 0;    // kernels made of several nodes
  int fused_nodes = 0;      // nodes that disappeared into them
  int external_regions = 0; // regions a vendor claimed
  int external_nodes = 0;   // nodes in those regions
  int fallback_functions = 0;  // regions with a fallback function (CompileOptions)
  int packed_matmuls = 0;   // JIT MatMul / Gemm nodes whose weights were prepacked
  int shape_functions = 0;
  int constants = 0;
  int64_t constant_bytes = 0;
  int code_targets = 0;     // CPU targets with code compiled ahead of time
  int code_objects = 0;     // objects in all (kernels and shape functions, per target)
  int64_t code_bytes = 0;   // their bytes
  double code_seconds = 0;  // wall time compiling them
  double seconds = 0;       // wall time of the whole compile
};

/// Compiles the ONNX model at `path` (external data resolved next to it). Errors name what is
/// wrong: Unsupported listing every unsupported op with a node name each, or naming an
/// external compiler that is not registered; InvalidArgument from the external compiler's
/// options; InvalidFormat naming the node for contradictory shapes or dtypes; NotFound /
/// InvalidFormat for a missing or malformed file. `stats` may be null. A region the external
/// codegen declines stays on the JIT (reported through `progress`).
StatusOr<std::vector<uint8_t>> CompileOnnxFile(const std::string& path,
                                               const CompileOptions& options,
                                               CompileStats* stats = nullptr);
/// As CompileOnnxFile for a serialized ModelProto in memory (no external data).
StatusOr<std::vector<uint8_t>> CompileOnnxBytes(const void* data, size_t size,
                                                const CompileOptions& options,
                                                CompileStats* stats = nullptr);
/// Compiles an imported graph (shape inference not yet run).
StatusOr<std::vector<uint8_t>> CompileGraph(Graph graph, const CompileOptions& options,
                                            CompileStats* stats = nullptr);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_COMPILE_H_
