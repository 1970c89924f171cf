// The op registry: per ONNX op type and opset range, its type-and-shape rule over symbolic dims.
// (Lowering to kernel IR is compiler/lower's LoweringTable.)
#ifndef KILN_COMPILER_OPS_REGISTRY_H_
#define KILN_COMPILER_OPS_REGISTRY_H_

#include <climits>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "compiler/ir/dim_expr.h"
#include "compiler/ir/graph.h"
#include "compiler/ops/node_context.h"

namespace kiln::compiler {

class InferenceContext;
/// The type and shape rule of an op: reads the node's input types, known input values and
/// attributes from `ctx`, and sets the dtype and shape of every present output. Errors come from
/// ctx.Error() / ctx.UnsupportedError() so they name the node.
using ShapeRule = Status (*)(InferenceContext& ctx);

/// A set of dtypes, one bit per kiln::DType.
using DTypeSet = uint32_t;
constexpr DTypeSet DTypeBit(DType t) { return 1u << static_cast<int>(t); }
inline constexpr DTypeSet kFloatTypes =
    DTypeBit(DType::kF32) | DTypeBit(DType::kF16) | DTypeBit(DType::kBF16) | DTypeBit(DType::kF64);
inline constexpr DTypeSet kUnsignedTypes =
    DTypeBit(DType::kU8) | DTypeBit(DType::kU16) | DTypeBit(DType::kU32) | DTypeBit(DType::kU64);
inline constexpr DTypeSet kIntTypes = DTypeBit(DType::kI8) | DTypeBit(DType::kI16) |
                                      DTypeBit(DType::kI32) | DTypeBit(DType::kI64) |
                                      kUnsignedTypes;
inline constexpr DTypeSet kNumericTypes = kFloatTypes | kIntTypes;
inline constexpr DTypeSet kBoolTypes = DTypeBit(DType::kBool);
inline constexpr DTypeSet kAllTypes = kNumericTypes | kBoolTypes;
/// "float32, float16, bfloat16, float64"
std::string DTypeSetToString(DTypeSet set);

inline constexpr int kLatestOpset = INT_MAX;
inline constexpr int kVariadic = INT_MAX;

/// One op type over one opset range whose semantics are uniform.
struct OpDef {
  std::string domain;  // "" is ai.onnx
  std::string op_type;
  int since_version = 1;             // first opset with these semantics
  int until_version = kLatestOpset;  // last opset with them (inclusive)
  int min_inputs = 1;
  int max_inputs = 1;  // kVariadic for no limit
  int min_outputs = 1;
  int max_outputs = 1;
  DTypeSet input0_types = kAllTypes;  // dtypes input 0 may have (ONNX type constraint "T")
  ShapeRule infer = nullptr;          // required
  // Lowering to kernel IR and run-time shape functions live in compiler/lower (LoweringTable),
  // so this registry — type rules only — does not depend on the kernel IR.
};

/// Op type -> OpDefs by opset range. Built once; lookups are const and thread-safe.
class OpRegistry {
 public:
  /// Every op kiln supports (all families in compiler/ops/), built on first use.
  static const OpRegistry& Global();

  /// Adds a def. InvalidArgument when it has no rule, a bad range, or a range overlapping an
  /// existing def of the same op.
  Status Register(OpDef def);
  /// The def for op_type in domain ("ai.onnx" == "") at `opset`; nullptr if there is none.
  const OpDef* Find(std::string_view domain, std::string_view op_type, int64_t opset) const;
  /// Why Find() fails, for error messages: "is not supported", "needs opset >= 14 (the model
  /// imports 13)", "is not supported at opset 7 (supported from 9)"; "" when it does not fail.
  std::string WhyUnsupported(std::string_view domain, std::string_view op_type,
                             int64_t opset) const;
  /// Every registered (domain, op type), sorted.
  std::vector<std::pair<std::string, std::string>> OpTypes() const;
  /// Every def of one op type, by opset.
  std::vector<const OpDef*> Defs(std::string_view domain, std::string_view op_type) const;

 private:
  std::map<std::pair<std::string, std::string>, std::vector<OpDef>, std::less<>> defs_;
};

/// A dtype and shape, as passed to a subgraph's formal inputs.
struct ValueType {
  DType dtype = DType::kInvalid;
  SymbolicShape shape;
};

/// What a shape rule sees of one node, and where it puts its answer. Built by shape inference
/// for one rule invocation; the rule's results are applied to the graph only if it succeeds.
/// Inputs, attributes and errors come from NodeContextBase.
class InferenceContext : public NodeContextBase {
 public:
  /// Infers a subgraph (If/Loop body) whose formal inputs get `inputs`, in the scope of the
  /// node's graph. Supplied by shape inference (compiler/passes), which the registry cannot see.
  using SubgraphInferer = std::function<Status(Graph& body, const std::vector<ValueType>& inputs)>;

  /// Everything is borrowed and must outlive the context.
  InferenceContext(Graph& graph, NodeId node, int64_t opset, SubgraphInferer subgraphs);

  /// The elements of a rank-0/1 integer input as dims when they are known at compile time,
  /// from constant data or from symbolic values (Shape -> Gather -> Concat chains). Elements
  /// only known at run time are fresh symbols. nullopt when nothing is known.
  std::optional<std::vector<DimExpr>> InputValues(int i) const;
  /// Like InputValues when every element is a constant.
  std::optional<std::vector<int64_t>> InputConstInts(int i) const;
  /// A graph attribute (If/Loop bodies); absent -> InvalidFormat.
  StatusOr<Graph*> GetGraph(std::string_view name) const;

  // ---- Outputs ----
  /// Sets output i's type (ignored for an omitted output).
  void SetOutput(int i, DType dtype, SymbolicShape shape);
  /// Output i is a small integer tensor whose elements are known symbolically.
  void SetOutputValues(int i, std::vector<DimExpr> values);
  /// Output i is a compile-time constant.
  void SetOutputData(int i, TensorDataRef data);

  struct Result {
    DType dtype = DType::kInvalid;
    std::optional<SymbolicShape> shape;
    std::optional<std::vector<DimExpr>> values;
    TensorDataRef data;
  };
  const std::vector<Result>& results() const { return results_; }

  // ---- Helpers ----
  /// A new dim unknown until run time. Does not by itself mark the node data-dependent: a dim
  /// computed from input shapes at run time (broadcast of two unrelated symbols) is not.
  DimExpr FreshDim() { return mutable_graph_.symbols().Fresh(); }
  /// Records that the rule relies on `fact` (see DimFact), unless it holds trivially (equal
  /// dims, or a constant 1 broadcast). The node's kernels check it at run time.
  void Assume(DimFact::Kind kind, const DimExpr& a, const DimExpr& b);
  const std::vector<DimFact>& facts() const { return facts_; }
  /// An output shape depends on input values known only at run time.
  void MarkDataDependent() { data_dependent_ = true; }
  bool data_dependent() const { return data_dependent_; }
  /// Runs shape inference on `body` (see SubgraphInferer).
  Status InferSubgraph(Graph& body, const std::vector<ValueType>& inputs) const;

 private:
  Graph& mutable_graph_;  // the same graph as graph(): FreshDim adds symbols to it
  SubgraphInferer subgraphs_;
  std::vector<Result> results_;
  std::vector<DimFact> facts_;
  bool data_dependent_ = false;
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_OPS_REGISTRY_H_
