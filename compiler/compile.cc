// The compiler driver.
#include "compiler/compile.h"

#include <chrono>
#include <memory>
#include <set>

#include "compiler/emit/emit.h"
#include "compiler/lower/gemm.h"
#include "compiler/lower/lower.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/fold_constants.h"
#include "compiler/passes/pack_weights.h"
#include "compiler/passes/partition.h"
#include "external/onednn/codegen.h"
#include "external/onednn/rules.h"
#include "compiler/passes/shape_inference.h"
#include "compiler/passes/simplify.h"

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
  if (options.external != "none" && options.external != "onednn") {
    return Unsupported("--external=" + options.external +
                       ": unknown external compiler (kiln has: none, onednn)");
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
  SimplifyStats simplified;
  RETURN_IF_ERROR(Simplify(graph, &simplified));
  st.simplified_nodes = simplified.transposes_merged + simplified.views_shortcut;
  st.nodes_after_passes = graph.num_nodes();
  EmitOptions eo;
  if (options.external == "onednn") {
    ASSIGN_OR_RETURN(std::vector<Region> regions, PartitionGraph(graph, onednn::Rules(options.onednn)));
    int claimed = 0;
    for (size_t i = 0; i < regions.size(); ++i) {
      const Region& r = regions[i];
      StatusOr<onednn::RegionCode> code = onednn::Codegen(graph, r.nodes, r.inputs, r.outputs);
      if (!code.ok()) {
        // A region the codegen refuses stays on the JIT (the predicate was too optimistic).
        Progress(options, "oneDNN codegen declined region " + std::to_string(i) + ": " +
                              code.status().message());
        continue;
      }
      ExternalRegionToEmit e;
      e.vendor = r.vendor;
      e.name = "onednn_" + std::to_string(eo.regions.size());
      e.nodes = r.nodes;
      e.inputs = r.inputs;
      e.outputs = r.outputs;
      e.blob = std::move(code->blob);
      for (const onednn::RegionConstant& c : code->constants) e.constants.push_back({c.value, c.data});
      claimed += static_cast<int>(r.nodes.size());
      eo.regions.push_back(std::move(e));
    }
    st.external_regions = static_cast<int>(eo.regions.size());
    st.external_nodes = claimed;
    Progress(options, "oneDNN claimed " + std::to_string(claimed) + " nodes in " +
                          std::to_string(eo.regions.size()) + " regions");
  }
  if (options.pack_weights) {
    std::set<NodeId> claimed;
    for (const ExternalRegionToEmit& r : eo.regions) claimed.insert(r.nodes.begin(), r.nodes.end());
    PackWeightsStats packed;
    RETURN_IF_ERROR(PackMatMulWeights(graph, GemmPanelCols(), claimed, &packed));
    st.packed_matmuls = packed.matmuls + packed.gemms;
    if (st.packed_matmuls > 0)
      Progress(options, "prepacked the weights of " + std::to_string(st.packed_matmuls) +
                            " MatMul / Gemm nodes (" + std::to_string(packed.packed_bytes) +
                            " bytes)");
  }
  Progress(options, "lowering and emitting");
  eo.table = &LoweringTable::Global();
  EmitStats es;
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, EmitExecutable(graph, eo, &es));
  st.kernels = es.kernels;
  st.fused_kernels = es.fused_kernels;
  st.fused_nodes = es.fused_nodes;
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
