// The compiler's graph IR: values with symbolic shapes, nodes with ONNX attributes, use-def
// queries, topological order and a verifier.
#ifndef KILN_COMPILER_IR_GRAPH_H_
#define KILN_COMPILER_IR_GRAPH_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "compiler/ir/dim_expr.h"
#include "base/dtype.h"
#include "base/status.h"

namespace kiln::compiler {

class Graph;

/// Indices into a Graph's value and node tables. Stable for the graph's lifetime.
using ValueId = int32_t;
using NodeId = int32_t;
inline constexpr ValueId kNoValue = -1;  // an omitted optional input or output
inline constexpr NodeId kNoNode = -1;

/// A shape whose dims are symbolic expressions.
using SymbolicShape = std::vector<DimExpr>;
/// "[batch, seq*4, 3]"
std::string ShapeToString(const SymbolicShape& shape);

/// The kiln dtype for an ONNX TensorProto.DataType code. Unsupported naming the ONNX type for
/// types kiln has no dtype for (string, complex, float8); InvalidFormat for codes that are not
/// ONNX types.
StatusOr<DType> DTypeFromOnnx(int64_t onnx_type);
/// The ONNX TensorProto.DataType code of a kiln dtype (the inverse); 0 (UNDEFINED) for kInvalid.
int DTypeToOnnx(DType dtype);
/// "FLOAT", "UINT16", ... or "TYPE(<code>)".
std::string OnnxTypeName(int64_t onnx_type);

/// Immutable tensor bytes (row-major, little-endian) with dtype and static dims. The bytes are
/// shared, never copied: `owner` keeps them alive (a protobuf message, an mmapped file, or a
/// buffer the TensorData made itself). Thread-safe to share once built.
class TensorData {
 public:
  /// Checks that the byte count equals numel(dims) * DTypeSize(dtype) (overflow-safe, dims >= 0);
  /// InvalidFormat otherwise, naming the sizes.
  static StatusOr<std::shared_ptr<const TensorData>> Make(DType dtype, std::vector<int64_t> dims,
                                                          std::shared_ptr<const void> owner,
                                                          const void* bytes, size_t size);
  /// Copies `bytes` into a buffer the TensorData owns. Same checks as Make.
  static StatusOr<std::shared_ptr<const TensorData>> Copy(DType dtype, std::vector<int64_t> dims,
                                                          const void* bytes, size_t size);
  /// An int64 tensor (for tests and folded shape values).
  static std::shared_ptr<const TensorData> FromInt64s(std::vector<int64_t> dims,
                                                      const std::vector<int64_t>& values);

  DType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t num_elements() const { return num_elements_; }
  const void* data() const { return data_; }
  size_t size_bytes() const { return size_; }

  /// The elements converted to int64: integer and bool dtypes, and floats with integral values.
  /// InvalidArgument otherwise. (Shape inputs, axes, pads and the like go through here.)
  StatusOr<std::vector<int64_t>> ToInt64s() const;
  /// The elements converted to double (any dtype; f16/bf16 widened).
  std::vector<double> ToDoubles() const;

 private:
  TensorData() = default;
  DType dtype_ = DType::kInvalid;
  std::vector<int64_t> dims_;
  int64_t num_elements_ = 0;
  std::shared_ptr<const void> owner_;
  const void* data_ = nullptr;
  size_t size_ = 0;
};
using TensorDataRef = std::shared_ptr<const TensorData>;

/// An ONNX attribute. Graph attributes (If/Loop bodies) are owned by the attribute; copying an
/// Attribute shares the subgraph (Graph::Clone deep-copies).
class Attribute {
 public:
  enum class Type : uint8_t { kInt, kFloat, kString, kInts, kFloats, kStrings, kTensor, kGraph };

  Attribute() = default;
  static Attribute Int(int64_t v) { return Attribute(v); }
  static Attribute Float(float v) { return Attribute(v); }
  static Attribute String(std::string v) { return Attribute(std::move(v)); }
  static Attribute Ints(std::vector<int64_t> v) { return Attribute(std::move(v)); }
  static Attribute Floats(std::vector<float> v) { return Attribute(std::move(v)); }
  static Attribute Strings(std::vector<std::string> v) { return Attribute(std::move(v)); }
  static Attribute Tensor(TensorDataRef v) { return Attribute(std::move(v)); }
  static Attribute SubGraph(std::shared_ptr<Graph> v) { return Attribute(std::move(v)); }

  Type type() const { return static_cast<Type>(value_.index()); }
  /// "int", "float", "string", "ints", "floats", "strings", "tensor", "graph".
  static const char* TypeName(Type t);

  // Typed access; the caller checks type() first (asserts otherwise).
  int64_t i() const { return std::get<int64_t>(value_); }
  float f() const { return std::get<float>(value_); }
  const std::string& s() const { return std::get<std::string>(value_); }
  const std::vector<int64_t>& ints() const { return std::get<std::vector<int64_t>>(value_); }
  const std::vector<float>& floats() const { return std::get<std::vector<float>>(value_); }
  const std::vector<std::string>& strings() const {
    return std::get<std::vector<std::string>>(value_);
  }
  const TensorDataRef& tensor() const { return std::get<TensorDataRef>(value_); }
  const std::shared_ptr<Graph>& graph() const { return std::get<std::shared_ptr<Graph>>(value_); }

 private:
  using Storage =
      std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                   std::vector<std::string>, TensorDataRef, std::shared_ptr<Graph>>;
  template <typename T>
  explicit Attribute(T v) : value_(std::move(v)) {}
  Storage value_;
};

/// The domain of kiln's own ops, which compiler passes create (PackedMatMul); opset 1.
inline constexpr const char* kKilnDomain = "kiln";

/// Where a value comes from.
enum class ValueKind : uint8_t {
  kGraphInput,  // supplied by the caller; `data`, if set, is an overridable default
  kConstant,    // an initializer: `data` is the value
  kNodeOutput,  // produced by exactly one node
  kCapture,     // (subgraphs only) the value of the same name in an enclosing graph
};
const char* ValueKindName(ValueKind kind);

/// A tensor value. Type fields are filled by the importer (graph inputs, constants, declared
/// graph outputs) and by shape inference (everything else).
struct Value {
  std::string name;
  ValueKind kind = ValueKind::kNodeOutput;
  DType dtype = DType::kInvalid;       // kInvalid until known
  std::optional<SymbolicShape> shape;  // nullopt: rank not known yet (only before inference)
  /// kConstant: the value. kGraphInput: the default used when the caller passes nothing.
  /// kNodeOutput: a value shape inference folded (e.g. a Constant node's output).
  TensorDataRef data;
  /// The elements of a small integer tensor (rank 0 or 1) as dim expressions when shape
  /// inference knows them symbolically, e.g. Shape([batch, 3]) -> {batch, 3}. Elements that are
  /// computed from run-time data are fresh symbols.
  std::optional<std::vector<DimExpr>> symbolic_value;
  /// The type the model declares for a graph output (kInvalid / nullopt when it declares none).
  /// Shape inference checks what it infers against it: dtype, rank, and constant dims.
  DType declared_dtype = DType::kInvalid;
  std::optional<SymbolicShape> declared_shape;
  NodeId producer = kNoNode;
};

/// An operator application. Outputs are owned values (their producer is this node).
/// A relation between two dims that a shape rule relies on but cannot prove at compile time:
/// MatMul's inner dims are equal, a dim broadcast against another is 1 or equal to it. The
/// kernels emitted for the node check it before every call (a kernel would otherwise index
/// past a buffer), so a model run with contradictory shapes gets an error instead.
struct DimFact {
  enum class Kind : uint8_t {
    kEqual,       // a == b
    kBroadcasts,  // a == 1 or a == b (numpy broadcasting of a to b)
  };
  Kind kind = Kind::kEqual;
  DimExpr a, b;
};

struct Node {
  std::string name;  // unique in its graph, non-empty
  std::string op_type;
  std::string domain;            // "" is the default ONNX domain
  std::vector<ValueId> inputs;   // kNoValue for an omitted optional input
  std::vector<ValueId> outputs;  // kNoValue for an omitted optional output
  /// Values of this graph that the node's subgraphs read by name (ONNX lexical scoping). They
  /// order the node after their producers like ordinary inputs.
  std::vector<ValueId> implicit_inputs;
  std::map<std::string, Attribute> attributes;
  /// Set by shape inference: an output shape depends on run-time values (NonZero, Reshape from
  /// a computed tensor, ...), so a run-time shape function must read input data.
  bool data_dependent_shape = false;
  /// Set by shape inference: what its rule assumed about dims it could not compare.
  std::vector<DimFact> dim_facts;

  const Attribute* FindAttribute(std::string_view attr_name) const;
  /// "node 'name' (Op)" ("(domain.Op)" outside the default domain), for error messages.
  std::string Describe() const;
};

/// What Graph::ReadsOnlyConstants counts as a constant read. Passes differ in which way a
/// wrong guess is safe, so the caller says which answer it can afford to get wrong.
enum class ConstantReads : uint8_t {
  /// Every present input and capture has Value::data, a graph input's default included; a node
  /// without inputs qualifies. For passes where "constant" only keeps a node (dead-node walk).
  kHasData,
  /// The outputs are fixed whatever the caller passes, so they may be computed at compile time:
  /// at least one input, no captures (a subgraph may read run-time values), and no graph input
  /// (its default is overridable). For folding.
  kFoldable,
};

/// A graph: values, nodes, inputs and outputs. Owns its values, nodes and (through graph
/// attributes) its subgraphs. Move-only; Clone() deep-copies. Not thread-safe to mutate.
class Graph {
 public:
  Graph();
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  /// A deep copy (subgraphs included). The copy shares the symbol generator.
  Graph Clone() const;

  // ---- Building ----
  /// Adds a value. InvalidFormat if the name is empty or already used in this graph.
  StatusOr<ValueId> AddValue(std::string name, ValueKind kind);
  /// Adds a node. Every input/output id must be kNoValue or a value of this graph; outputs must
  /// be kNodeOutput values not yet produced by another node (InvalidFormat naming both nodes).
  /// The name must be non-empty and unique (InvalidFormat).
  StatusOr<NodeId> AddNode(Node node);
  void AddInput(ValueId v) { inputs_.push_back(v); }
  void AddOutput(ValueId v) { outputs_.push_back(v); }
  /// A node name not used yet: `base` if free, else base_1, base_2, ...
  std::string UniqueNodeName(const std::string& base) const;
  /// A value name not used yet: `base` if free, else base_1, base_2, ...
  std::string UniqueValueName(const std::string& base) const;

  // ---- Queries ----
  int num_values() const { return static_cast<int>(values_.size()); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const Value& value(ValueId id) const { return values_[id]; }
  Value& mutable_value(ValueId id) { return values_[id]; }
  const Node& node(NodeId id) const { return nodes_[id]; }
  Node& mutable_node(NodeId id) { return nodes_[id]; }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::optional<ValueId> FindValue(std::string_view name) const;
  std::optional<NodeId> FindNode(std::string_view name) const;
  /// Nodes reading the value (as an input or implicit input), each once, in insertion order.
  const std::vector<NodeId>& Users(ValueId id) const { return users_[id]; }
  /// "node 'Add_3' (Add)": how errors name a node.
  std::string DescribeNode(NodeId id) const;
  /// Whether node `id` reads only compile-time constants under `rule` (see ConstantReads).
  /// Omitted optional inputs (kNoValue) are ignored.
  bool ReadsOnlyConstants(NodeId id, ConstantReads rule) const;

  /// Every node, producers before users (ties keep insertion order). InvalidFormat naming the
  /// nodes on a cycle ("cycle: node 'a' (Add) -> node 'b' (Mul) -> node 'a' (Add)").
  StatusOr<std::vector<NodeId>> TopologicalOrder() const;
  /// Checks structure, recursively into subgraphs: value and node names unique; every node
  /// input defined (a graph input, constant, capture or node output with a producer); a
  /// constant has data; graph outputs defined; captures name a value of an enclosing graph and
  /// the owning node lists it as an implicit input; no cycles. InvalidFormat naming the node.
  Status Verify() const;

  // ---- Editing (keeps use lists consistent) ----
  /// Points input `slot` of `node` at `value` (kNoValue to omit it).
  void SetNodeInput(NodeId node, int slot, ValueId value);
  /// Drops every node whose `keep` entry is false (one entry per node) together with the
  /// values it produces, except values shape inference folded (they have data): those stay as
  /// constants. Kept nodes and values keep their order but are renumbered: NodeIds and
  /// ValueIds held across the call are stale (names stay). InvalidArgument naming the value,
  /// and nothing changed, when a kept node or a graph output reads a dropped node's output.
  Status RemoveNodes(const std::vector<bool>& keep);

  // ---- Model-level facts ----
  /// Opset version per domain ("" = ai.onnx). Subgraphs carry their model's map.
  const std::map<std::string, int64_t>& opset_imports() const { return opset_imports_; }
  void set_opset_imports(std::map<std::string, int64_t> m) { opset_imports_ = std::move(m); }
  /// The opset the model imports for `domain` ("ai.onnx" is ""); 0 if not imported.
  int64_t OpsetFor(std::string_view domain) const;
  const std::string& name() const { return name_; }
  void set_name(std::string n) { name_ = std::move(n); }

  /// Fresh symbols for unknown dims; shared with subgraphs so names are unique model-wide.
  SymbolGenerator& symbols() { return *symbols_; }
  const std::shared_ptr<SymbolGenerator>& shared_symbols() const { return symbols_; }
  void set_shared_symbols(std::shared_ptr<SymbolGenerator> s) { symbols_ = std::move(s); }

 private:
  Status VerifyInScope(const std::vector<const Graph*>& enclosing) const;
  void AddUse(ValueId value, NodeId node);
  void RemoveUse(ValueId value, NodeId node);

  std::string name_;
  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<std::vector<NodeId>> users_;  // per value
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::map<std::string, ValueId, std::less<>> value_by_name_;
  std::map<std::string, NodeId, std::less<>> node_by_name_;
  std::map<std::string, int64_t> opset_imports_;
  std::shared_ptr<SymbolGenerator> symbols_;
};

/// The branch (then_branch or else_branch graph) an If node takes whatever the inputs, when its
/// cond is a compile-time constant bool scalar in `g` (Value::data, not a graph input's
/// default); null when cond is only known at run time. Shape inference infers only that branch
/// and the emitter emits only it: the other never runs and may not even be typable.
const Graph* ConstantIfBranch(const Graph& g, const Node& node);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_GRAPH_H_
