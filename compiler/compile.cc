// The compiler driver: the stages in order, and the hand-off of regions to an external compiler.
#include "compiler/compile.h"

#include <chrono>
#include <memory>
#include <set>

#include "base/tensor.h"
#include "compiler/emit/emit.h"
#include "compiler/lower/gemm.h"
#include "compiler/lower/lower.h"
#include "compiler/onnx/importer.h"
#include "compiler/passes/conv_transpose_phases.h"
#include "compiler/passes/dead_nodes.h"
#include "compiler/passes/fold_constants.h"
#include "compiler/passes/pack_weights.h"
#include "compiler/passes/partition.h"
#include "compiler/passes/pointwise_conv_rows.h"
#include "compiler/passes/reshape_shapes.h"
#include "compiler/passes/shape_inference.h"
#include "compiler/passes/simplify.h"
#include "compiler/passes/wide_nodes.h"
#include "jit/aot_compile.h"
#include "jit/dispatch.h"

namespace kiln::compiler {
namespace {

void Progress(const CompileOptions& o, const std::string& line) {
  if (o.progress) o.progress(line);
}

// The targets options.code_targets names, each once (resolved before the long compile, so a
// misspelt name fails at once).
StatusOr<std::vector<jit::TargetInfo>> ResolveCodeTargets(const CompileOptions& o) {
  std::vector<jit::TargetInfo> out;
  for (const std::string& name : o.code_targets) {
    ASSIGN_OR_RETURN(jit::TargetInfo t, jit::ResolveCodeTarget(name));
    bool seen = false;
    for (const jit::TargetInfo& u : out) seen |= u.cpu == t.cpu && u.features == t.features;
    if (!seen) out.push_back(std::move(t));
  }
  return out;
}

// Adds the code of every kernel the entry function uses (`es`: not those only fallback
// functions use) for each target to the executable `b` is building.
Status AddCodeTargets(const std::vector<jit::TargetInfo>& targets, const CompileOptions& o,
                      const EmitStats& es, ExecutableBuilder& b, CompileStats* st) {
  auto start = std::chrono::steady_clock::now();
  for (const jit::TargetInfo& t : targets) {
    Progress(o, "compiling " + std::to_string(es.main_kernels) + " kernels and " +
                    std::to_string(es.main_shape_functions) + " shape functions for " + t.cpu);
    ASSIGN_OR_RETURN(AotTargetDef def,
                     jit::CompileCodeTarget(t, b.kernels(), b.shape_functions(), o.num_threads,
                                            es.main_kernels, es.main_shape_functions));
    for (const auto* table : {&def.kernels, &def.shape_functions}) {
      for (const AotObjectDef& object : *table) {
        st->code_objects += object.object.empty() ? 0 : 1;
        st->code_bytes += static_cast<int64_t>(object.object.size());
      }
    }
    ++st->code_targets;
    b.AddAotTarget(std::move(def));
  }
  st->code_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

ImportOptions ImportOptionsFor(const CompileOptions& o) {
  ImportOptions io;
  io.dim_pins = o.dim_pins;
  return io;
}

// The external compiler `options` names with its rules, or a null compiler for "none".
struct External {
  std::shared_ptr<const ExternalCompiler> compiler;
  VendorRules rules;
};

StatusOr<External> FindExternal(const CompileOptions& options) {
  External e;
  if (options.external == "none") return e;
  const ExternalCompilerRegistry& registry = options.external_compilers != nullptr
                                                 ? *options.external_compilers
                                                 : ExternalCompilerRegistry::Global();
  e.compiler = registry.Find(options.external);
  if (e.compiler == nullptr) {
    std::vector<std::string> names = registry.names();
    std::string choices = "none";
    for (const std::string& name : names) choices += ", " + name;
    return Unsupported("--external=" + options.external +
                       ": unknown external compiler (kiln has: " + choices + ")" +
                       (names.empty() ? "; kiln::RegisterBuiltInCompilers (embed/compile.h) "
                                        "registers the built-in ones"
                                      : ""));
  }
  StatusOr<VendorRules> rules = e.compiler->Rules(options.external_options);
  if (!rules.ok()) return rules.status().WithContext("--external=" + options.external);
  e.rules = std::move(*rules);
  e.rules.vendor = std::string(e.compiler->name());
  return e;
}

// Replaces `code`'s blob with the one options.tune_region returns for it (the region named
// `name`, over its constants as a loader would bind them), reporting its note as progress.
Status Tune(const Graph& graph, const PartitionedRegion& r, const std::string& name,
            const std::string& vendor, const CompileOptions& options, ExternalCode* code) {
  ExternalRegionSpec spec;
  spec.name = name;
  spec.vendor = vendor;
  spec.blob = code->blob.data();
  spec.blob_size = code->blob.size();
  spec.num_inputs = static_cast<int>(r.inputs.size());
  spec.num_outputs = static_cast<int>(r.outputs.size());
  for (const ExternalConstant& c : code->constants) {
    const TensorData* d = c.value != kNoValue ? graph.value(c.value).data.get() : c.data.get();
    if (d == nullptr) return Internal(name + ": a constant without data");
    ASSIGN_OR_RETURN(Shape shape,
                     Shape::Make(d->dims().data(), static_cast<int>(d->dims().size())));
    spec.constants.push_back(Tensor::Wrap(const_cast<void*>(d->data()), d->dtype(), shape));
  }
  std::string note;
  StatusOr<std::vector<uint8_t>> blob = options.tune_region(spec, &note);
  if (!blob.ok()) return blob.status().WithContext("--tune");
  code->blob = std::move(*blob);
  if (!note.empty()) Progress(options, name + ": " + note);
  return Status::Ok();
}

// Partitions `graph` for `external` and keeps the regions its codegen accepts (a declined one
// stays on the JIT) as `eo->regions`, named "<vendor>_<index>".
Status Offload(const Graph& graph, const External& external, const CompileOptions& options,
               EmitOptions* eo, CompileStats* st) {
  ASSIGN_OR_RETURN(std::vector<PartitionedRegion> regions, PartitionGraph(graph, external.rules));
  const std::string& vendor = external.rules.vendor;
  int claimed = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    const PartitionedRegion& r = regions[i];
    StatusOr<ExternalCode> code = external.compiler->Codegen(graph, r);
    if (!code.ok()) {
      // The rules were more optimistic than the codegen: the region's nodes stay on the JIT,
      // which computes the same, so the compile goes on.
      Progress(options, vendor + " codegen declined region " + std::to_string(i) + ": " +
                            code.status().message());
      continue;
    }
    ExternalRegionToEmit e;
    e.vendor = vendor;
    e.name = vendor + "_" + std::to_string(eo->regions.size());
    if (options.tune) RETURN_IF_ERROR(Tune(graph, r, e.name, vendor, options, &*code));
    e.nodes = r.nodes;
    e.inputs = r.inputs;
    e.outputs = r.outputs;
    e.blob = std::move(code->blob);
    for (const ExternalConstant& c : code->constants) e.constants.push_back({c.value, c.data});
    claimed += static_cast<int>(r.nodes.size());
    eo->regions.push_back(std::move(e));
  }
  st->external_regions = static_cast<int>(eo->regions.size());
  st->external_nodes = claimed;
  Progress(options, vendor + " claimed " + std::to_string(claimed) + " nodes in " +
                        std::to_string(eo->regions.size()) + " regions");
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<uint8_t>> CompileGraph(Graph graph, const CompileOptions& options,
                                            CompileStats* stats) {
  auto start = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(External external, FindExternal(options));
  if (options.tune && !options.tune_region)
    return InvalidArgument("tune is set without tune_region (embed/compile.h provides it)");
  ASSIGN_OR_RETURN(std::vector<jit::TargetInfo> code_targets, ResolveCodeTargets(options));
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
  // Before Simplify, so that the Transpose it moves below a reduction merges with the
  // Transpose a reader applies next (DGCNN's next layer reads its points as [N, P, C]).
  ASSIGN_OR_RETURN(int pointwise, PointwiseConvsOverRows(graph));
  SimplifyStats simplified;
  RETURN_IF_ERROR(Simplify(graph, &simplified));
  st.simplified_nodes =
      simplified.transposes_merged + simplified.views_shortcut + simplified.pads_bypassed +
      simplified.castlikes_to_cast + simplified.pads_folded + simplified.reduce_max_pooled +
      simplified.reduce_mean_pooled + simplified.dropouts_bypassed + simplified.transposes_sunk;
  // ConvTranspose layers as the convolutions of their output phases (both back ends run
  // convolutions faster), before partitioning so that oneDNN can claim them.
  ASSIGN_OR_RETURN(int phased, ConvTransposeToPhaseConvs(graph));
  st.simplified_nodes += phased + pointwise;
  // Before partitioning: a Reshape whose target was computed from Shape(x) of a region's value
  // could not join that region (the chain closes a cycle), e.g. ShuffleNet's channel shuffle.
  ASSIGN_OR_RETURN(int reshapes, ConstantReshapeShapes(graph));
  st.simplified_nodes += reshapes;
  // A kernel takes at most kMaxDispatchBuffers buffers, one of them its output.
  RETURN_IF_ERROR(NarrowWideNodes(graph, jit::kMaxDispatchBuffers - 1).status());
  // What Simplify bypassed, the shape chains behind folded values, and anything else unread go
  // before partitioning, so a dead reader neither makes a value a region output nor stops a
  // vendor fusing it into its producer.
  RETURN_IF_ERROR(RemoveDeadNodes(graph).status());
  st.nodes_after_passes = graph.num_nodes();
  EmitOptions eo;
  if (external.compiler != nullptr) RETURN_IF_ERROR(Offload(graph, external, options, &eo, &st));
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
  EmitStats es;  // filled before before_finish runs
  if (!code_targets.empty()) {
    eo.before_finish = [&](ExecutableBuilder& b) {
      return AddCodeTargets(code_targets, options, es, b, &st);
    };
  }
  eo.fallbacks = options.external_fallbacks;
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, EmitExecutable(graph, eo, &es));
  st.fallback_functions = es.fallback_functions;
  for (const std::string& failure : es.fallback_failures) {
    Progress(options, "no fallback function for " + failure + " (it needs its vendor at load)");
  }
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
