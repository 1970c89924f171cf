// The emitter's internals, shared by the files of compiler/emit/: one Emitter per VM function
// (the graph's "main", each If branch, each Loop body) over state every function of one
// executable shares. Not a public interface: only compiler/emit/*.cc include it.
//
// The files, by responsibility:
//   emit.cc          the driver: EmitExecutable, parameters, the order of the steps (Run)
//   plan.cc          units, dead code, emission order, last uses, the static arena
//   fuse.cc          lowering of every live node and the fusion decisions
//   shapes.cc        symbols, batched shape functions, kernel preconditions
//   emit_node.cc     kernels, views, node shape functions, regions, output allocation, tables
//   control_flow.cc  If and Loop as VM functions, captures
//   fallback.cc      each external region's fallback function (its nodes on the JIT)
#ifndef KILN_COMPILER_EMIT_EMITTER_H_
#define KILN_COMPILER_EMIT_EMITTER_H_

#include <climits>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "compiler/emit/emit.h"
#include "compiler/lower/fusion.h"
#include "jit/kernel_ir.h"
#include "vm/builder.h"

namespace kiln::compiler::emit_internal {

inline constexpr int64_t kAlign = 64;
// Largest tensor a shape function lets the program allocate; larger (or overflowing) sizes
// become kShapeTooLarge (vm/providers.h), which the VM reports as inputs too large.
inline constexpr int64_t kMaxTensorBytes = int64_t{1} << 50;

inline int64_t AlignUp(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

inline bool IsControlFlow(const Node& n) {
  return (n.domain.empty() || n.domain == "ai.onnx") && (n.op_type == "If" || n.op_type == "Loop");
}

inline bool IsStatic(const SymbolicShape& s) {
  for (const DimExpr& d : s) {
    if (!d.is_const()) return false;
  }
  return true;
}

/// The dims of a shape whose dims are all constants (IsStatic).
inline std::vector<int64_t> StaticDims(const SymbolicShape& s) {
  std::vector<int64_t> out;
  for (const DimExpr& d : s) out.push_back(d.const_value());
  return out;
}

/// Byte size of a value of static shape whose size CheckStaticBytes accepted.
inline int64_t StaticBytes(const Value& v) {
  int64_t n = 1;
  for (const DimExpr& d : *v.shape) n *= d.const_value();
  return n * static_cast<int64_t>(DTypeSize(v.dtype));
}

/// OK when a value of static shape has a byte size that, rounded up to `align`, fits in int64
/// (the largest the file's 64-bit dims and offsets can describe); InvalidArgument naming the
/// value otherwise, so an oversized tensor is a compile error and never a wrapped size.
inline Status CheckStaticBytes(const Value& v, int64_t align) {
  int64_t n = static_cast<int64_t>(DTypeSize(v.dtype));
  for (const DimExpr& d : *v.shape) {
    if (d.const_value() < 0 || __builtin_mul_overflow(n, d.const_value(), &n)) {
      return InvalidArgument("value '" + v.name + "': static shape " + ShapeToString(*v.shape) +
                             " is negative or more than 2^63 - 1 bytes");
    }
  }
  if (n > INT64_MAX - align) {
    return InvalidArgument("value '" + v.name + "': " + std::to_string(n) +
                           " bytes is more than a 64-bit byte offset can hold");
  }
  return Status::Ok();
}

/// The values of `vs` that are present (optional inputs and outputs are kNoValue).
inline std::vector<ValueId> Present(const std::vector<ValueId>& vs) {
  std::vector<ValueId> out;
  for (ValueId v : vs) {
    if (v != kNoValue) out.push_back(v);
  }
  return out;
}

/// True when every symbol the dims of `s` read is in `names` (a set or a map by name).
template <typename Names>
bool SymbolsIn(const SymbolicShape& s, const Names& names) {
  for (const DimExpr& d : s) {
    std::set<std::string> used;
    d.CollectSymbols(&used);
    for (const std::string& n : used) {
      if (!names.count(n)) return false;
    }
  }
  return true;
}

/// A parameter, result or metadata signature entry for `v` (symbols by name).
ValueSpec SpecOf(const Value& v);

// Where a symbol's value comes from at run time.
struct SymbolSource {
  int reg = -1;       // a tensor register
  int index = 0;      // axis (dim source) or element (shape-tensor source)
  bool dim = true;    // true: DimOf(tensor, index); false: shape_tensor[index]
  DType dtype = DType::kI64;
  int rank = 1;
  int64_t offset = 0;  // the source holds symbol + offset (a dim `seq + 192`)
};

// Per-value emission state.
struct ValueState {
  int reg = -1;
  bool live = false;
  bool dynamic = false;   // a shape with non-constant dims
  int shape_reg = -1;     // dynamic: i64[rank] computed by a shape function
  int bytes_reg = -1;     // dynamic: i64[1] byte size
  int64_t arena_offset = -1;  // static intermediates placed in the arena
  int def = -1;           // position of the unit producing it
  int last_use = -1;      // position of the last unit reading it (INT_MAX: a graph output)
};

// Kernels (or shape functions) already in the executable, by structural hash: identical ones
// are stored once across all functions.
using KernelTable = std::map<uint64_t, std::vector<std::pair<jit::Kernel, int>>>;

// What every function of one executable shares: the builder, the kernel and shape-function
// tables (identical kernels stored once across functions), the function names and the
// statistics.
struct Shared {
  explicit Shared(const EmitOptions& o) : opts(o), table(*o.table), eb(o.producer) {}
  /// A name for the VM function of `node`'s `role` ("then", "else", "body") that no function
  /// of this executable has yet, and reserves it. Readable first ("If_0/then"); when taken (an
  /// If nested in two branches under one node name) the path of the parent function goes in
  /// front ("If_2/then/If_0/then"), and a counter after that if even this is taken.
  std::string UniqueFunctionName(const std::string& parent, const Node& node, NodeId id,
                                 const std::string& role);

  const EmitOptions& opts;
  const LoweringTable& table;
  ExecutableBuilder eb;
  KernelTable kernels;
  KernelTable shape_funcs;
  std::map<std::vector<int64_t>, int> const_shapes;  // i64 constant -> constant index
  std::map<int, std::vector<jit::Expr>> kernel_pre, shape_func_pre;  // by table index
  std::set<std::string> function_names;  // the loader requires them unique
  // Constants by their bytes' identity, so a fallback function reads the very constants main
  // (and its region) already store instead of a second copy.
  std::map<const TensorData*, int> constant_by_data;
  // Constants by their contents (dtype, dims, a hash of the bytes) -> the stored constants with
  // them: a value whose bytes equal a stored constant's reads that one. Weights tied across
  // layers (an Identity of a shared initializer, folded into a copy, and each copy packed) are
  // then stored and read once: bert_tiny's 4 layers share 3 MiB of weights, which stay in the
  // cache between layers instead of 12 MiB streamed per run.
  std::multimap<std::tuple<DType, std::vector<int64_t>, uint64_t>,
                std::pair<std::shared_ptr<const TensorData>, int>>
      constant_by_content;
  std::vector<int> region_index;  // per EmitOptions::regions: its table index (-1: not emitted)
  EmitStats st;
  int subgraphs = 0;
};

class Emitter {
 public:
  /// Emits `g` into a new function `name` (unique in the executable: Shared reserves it).
  /// The main graph carries the external regions; subgraphs (If branches, Loop bodies) take
  /// their captured outer values as extra parameters after their formal inputs.
  Emitter(Shared& sh, const Graph& g, const std::string& name, bool main);

  /// Emits the whole function. Errors name the node (or region) and what cannot be emitted.
  Status Run();
  int function_index() const { return fb_.index(); }
  /// The captured outer values, by name, in parameter order (after the formal inputs).
  const std::vector<std::string>& captures() const { return captures_; }
  /// Parent registers passed after the captures: tensors the parent reads symbols from that
  /// no captured shape carries bare (a capture of shape [floordiv(seq, 64)] cannot give seq).
  const std::vector<int>& symbol_sources() const { return symbol_sources_; }
  /// Constants already stored for another function (Shared::constant_by_data) are reused, not
  /// stored again. For fallback functions, whose constants are main's.
  void ShareConstants() { share_constants_ = true; }
  /// After a failed Run: empties the function and makes it stop with `message` (fatal), so
  /// the executable stays valid. Tables the failed run added to stay (unused).
  void Abandon(const std::string& message);

 private:
  // Emission units: a node outside every region, or a whole region.
  struct Unit {
    int region = -1;
    NodeId node = kNoNode;
  };
  // What is emitted, in order: a node's kernel or view, a region, or a fused kernel.
  struct Item {
    int region = -1;           // an external region
    NodeId node = kNoNode;     // a node (or, for a fused kernel, its last member)
    int fused = -1;            // index into fused_
    std::vector<ValueId> ins, outs;
  };
  struct FusionState;  // fuse.cc: the decisions Fuse's steps share
  struct Scan;         // control_flow.cc: one Loop scan output

  static const std::vector<ExternalRegionToEmit>& NoRegions() {
    static const std::vector<ExternalRegionToEmit> none;
    return none;
  }

  // emit.cc: the driver.
  Status BindParams();
  Status EmitItems();
  Status EmitReturn();

  // plan.cc: units, liveness, order, arena.
  Status Plan();
  Status BuildUnits();
  int ProducerUnit(ValueId v) const;
  StatusOr<std::vector<bool>> LiveUnits();
  Status CheckRegionReads(int u, const std::vector<ValueId>& reads) const;
  Status OrderUnits(const std::vector<bool>& unit_live);
  std::vector<ValueId> UnitInputs(const Unit& u) const;
  std::vector<ValueId> UnitOutputs(const Unit& u) const;
  Status Liveness();
  Status PlanArena();
  std::map<int, std::vector<ValueId>> KillSchedule() const;

  // fuse.cc: lowering and fusion.
  Status Prepare();           // lower every live node (collecting unsupported ones)
  Status UnsupportedError() const;
  void Fuse(bool enable);     // fusion decisions -> items_
  bool Elementwise(NodeId n) const;
  bool SingleOutput(NodeId n) const;
  std::vector<ElementwiseMember> GroupOf(const std::vector<NodeId>& members) const;
  void DecideChains(FusionState& fs) const;
  void FuseChains(FusionState& fs);
  void FuseEpilogues(FusionState& fs);
  std::optional<NodeId> EpilogueAnchor(ValueId v, const std::set<NodeId>& members,
                                       const FusionState& fs) const;
  bool FuseEpilogueOf(NodeId root, FusionState& fs);
  void BuildItems(const FusionState& fs);

  // shapes.cc: symbols and shape functions.
  Status EnsureShapes(const std::vector<ValueId>& need, NodeId at);
  struct ShapeBatch;
  Status CollectShapeBatch(const std::vector<ValueId>& need, NodeId at, ShapeBatch& b) const;
  void ReadSymbols(ShapeBatch& b) const;
  StatusOr<int> BatchShapeFunction(ShapeBatch& b);
  void EmitShapeViews(const ShapeBatch& b, int sf);
  bool SymbolsBound(const SymbolicShape& s) const;
  void BindSymbols(const Value& v, int reg);
  void BindParentSymbols();
  static std::optional<std::pair<std::string, int64_t>> Invertible(const DimExpr& d);
  jit::Expr ToExpr(const DimExpr& d, const std::map<std::string, jit::Expr>& vars) const;
  /// Preconditions of a kernel whose buffers hold `values` (in order): every dim equals its
  /// symbolic value, symbols bound at their first bare occurrence; then the DimFacts of the
  /// nodes `computes` (those over symbols the buffers carry); then `extra`.
  std::vector<jit::Expr> Preconditions(const jit::Kernel& k, const std::vector<ValueId>& values,
                                       std::vector<jit::Expr> extra = {},
                                       const std::vector<NodeId>& computes = {}) const;

  // emit_node.cc: per-item emission and the shared tables.
  Status EmitNode(NodeId n);
  Status EmitNodeShapeFunction(NodeId n, const jit::Kernel& sk, const std::vector<int>& in_regs,
                               const std::vector<ValueId>& outs);
  Status EmitView(NodeId n, const LoweredNode& lowered, ValueId dst);
  Status EmitKernel(NodeId n, const jit::Kernel& k, const std::vector<int>& in_regs,
                    const std::vector<ValueId>& outs);
  Status EmitFused(const Item& item);
  Status EmitRegion(int r);
  Status RegionConstants(const ExternalRegionToEmit& region, const std::string& where,
                         ExternalRegionDef& def);
  StatusOr<std::vector<int>> AllocOutputs(const std::vector<ValueId>& outs, NodeId at);
  StatusOr<int> RegFor(ValueId v);
  StatusOr<int> ConstantIndexOf(ValueId v);
  int AddConstantData(const std::string& name, const TensorData& d);
  // The index of a stored constant with d's dtype, dims and bytes, else of a new one.
  int StoredConstant(const std::string& name, const std::shared_ptr<const TensorData>& d);
  int NewReg() { return next_reg_++; }
  int ConstI64Tensor(const std::vector<int64_t>& values);
  int ScratchStorage(int64_t bytes);
  int AddKernel(const jit::Kernel& k, std::vector<DType> ins, std::vector<DType> outs,
                const std::vector<jit::Expr>& pre = {});
  int AddShapeFunction(const jit::Kernel& k, int num_inputs, std::vector<bool> data_dependent,
                       const std::vector<jit::Expr>& pre = {});

  // control_flow.cc: If and Loop.
  Status EmitIf(NodeId n);
  Status EmitKnownIf(NodeId n, const Graph& branch);
  std::vector<int> ResultRegs(const Node& node, std::vector<ValueId>* present);
  Status EmitLoop(NodeId n);
  StatusOr<Emitter*> Subgraph(const Graph& body, const std::string& name);
  StatusOr<std::vector<int>> CaptureRegs(const Emitter& sub);
  void BindFromResults(const std::vector<ValueId>& outs);
  struct LoopRegs;  // control_flow.cc: the registers one Loop iterates with
  Status LoopInit(NodeId n, int carried, LoopRegs& lr);
  StatusOr<Scan> ScanOutput(NodeId n, const Value& per_iteration, bool has_m);
  std::pair<int, int> LoopControlKernels(bool has_m);
  void EmitIterations(const LoopRegs& lr, const std::vector<Scan>& scans);
  void AppendScans(const LoopRegs& lr, const std::vector<Scan>& scans);
  void FinishScans(const LoopRegs& lr, const std::vector<Scan>& scans);

  Shared& sh_;
  const Graph& g_;
  const std::string name_;  // of this VM function
  const EmitOptions& opts_;
  const LoweringTable& table_;
  ExecutableBuilder& eb_;
  FunctionBuilder& fb_;
  std::vector<ValueState> vals_;
  const std::vector<ExternalRegionToEmit>& regions_;
  std::vector<std::string> captures_;
  std::vector<int> symbol_sources_;
  const Emitter* parent_ = nullptr;  // the function calling this subgraph's
  int num_params_ = 0;
  std::vector<std::unique_ptr<Emitter>> subs_;
  std::set<ValueId> callee_allocated_;  // If/Loop results: the callee allocates them

  std::vector<NodeId> order_;
  std::vector<int> topo_pos_;
  std::vector<int> region_of_node_;
  std::vector<Item> items_;
  std::map<NodeId, LoweredNode> lowered_;
  std::vector<bool> need_sf_;
  std::vector<FusedKernel> fused_;
  std::vector<Unit> units_;        // live units in emission order
  std::vector<int> unit_of_node_;  // index into all_units_
  std::vector<Unit> all_units_;
  std::map<ValueId, int> constant_index_;
  std::map<std::string, SymbolSource> bound_;
  KernelTable& kernels_;
  KernelTable& shape_funcs_;
  std::map<std::vector<int64_t>, int>& const_shapes_;
  int next_reg_ = 0;
  int arena_reg_ = -1;
  int64_t arena_bytes_ = 0;
  EmitStats& st_;
  std::map<std::string, std::vector<std::string>> unsupported_;  // op type -> node names
  bool share_constants_ = false;
};

/// The nodes of region `r` of `g` as a graph of their own (inputs, outputs and constants
/// shared by reference); `topo_pos` is each node's position in g's topological order.
/// Unsupported for a node with subgraphs reading outer values.
StatusOr<Graph> RegionGraph(const Graph& g, const std::vector<int>& topo_pos,
                            const ExternalRegionToEmit& r);
/// Emits every emitted region's fallback function and links the region to it (fallback.cc).
void EmitFallbacks(Shared& sh, const Graph& g);

}  // namespace kiln::compiler::emit_internal

#endif  // KILN_COMPILER_EMIT_EMITTER_H_
