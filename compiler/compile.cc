// The compiler driver.
#include "compiler/compile.h"

#include <chrono>
#include <memory>

#include "compiler/emit/emit.h"
#include "compiler/lower/lower.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/fold_constants.h"
#include "compiler/passes/shape_inference.h"

namespace kiln::compiler {
namespace {

void Progress(const CompileOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

ImportOptions ImportOptionsFor(const CompileOptions& o) {
  ImportOptions io;
  io.dim_pins = o.dim_pins;
  return io;
}

}  // namespace

StatusOr<std::vector<uint8_t>> CompileGraph(Graph graph, const CompileOptions& options,
                                            CompileStats* stats) {
  auto start = std::chrono::steady_clock::now();
  if (options.external != "none") {
    return Unsupported("--external=" + options.external +
                       ": no external compiler is available in this build");
  }
  CompileStats local;
  CompileStats& st = stats ? *stats : local;
  st.nodes = graph.num_nodes();
  Progress(options, "inferring shapes of " + std::to_string(graph.num_nodes()) + " nodes" +
                        (options.fold_constants ? ", folding constants" : ""));
  ShapeInferenceOptions so;
  std::unique_ptr<Evaluator> evaluator;
  int folded = 0;
  if (options.fold_constants) {
    ASSIGN_OR_RETURN(evaluator, Evaluator::Create(&LoweringTable::Global()));
    so.fold = MakeFoldHook(evaluator.get(), FoldOptions(), &folded);
  }
  RETURN_IF_ERROR(InferShapes(graph, so));
  st.folded_nodes = folded;
  st.nodes_after_passes = graph.num_nodes();
  Progress(options, "lowering and emitting");
  EmitOptions eo;
  eo.table = &LoweringTable::Global();
  EmitStats es;
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, EmitExecutable(graph, eo, &es));
  st.kernels = es.kernels;
  st.shape_functions = es.shape_functions;
  st.constants = es.constants;
  st.constant_bytes = es.constant_bytes;
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return bytes;
}

StatusOr<std::vector<uint8_t>> CompileOnnxFile(const std::string& path,
                                               const CompileOptions& options,
                                               CompileStats* stats) {
  Progress(options, "importing " + path);
  ASSIGN_OR_RETURN(Graph g, ImportOnnxFile(path, ImportOptionsFor(options)));
  return CompileGraph(std::move(g), options, stats);
}

StatusOr<std::vector<uint8_t>> CompileOnnxBytes(const void* data, size_t size,
                                                const CompileOptions& options,
                                                CompileStats* stats) {
  ASSIGN_OR_RETURN(Graph g, ImportOnnxBytes(std::string_view(static_cast<const char*>(data), size),
                                            ImportOptionsFor(options)));
  return CompileGraph(std::move(g), options, stats);
}

}  // namespace kiln::compiler
