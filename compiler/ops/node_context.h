// The base of every per-node context (shape inference's InferenceContext, lowering's
// NodeContext): a node's typed attributes, its inputs in the graph, and errors that name it.
#ifndef KILN_COMPILER_OPS_NODE_CONTEXT_H_
#define KILN_COMPILER_OPS_NODE_CONTEXT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"
#include "compiler/ir/dim_expr.h"
#include "compiler/ir/graph.h"

namespace kiln::compiler {

/// Typed reads of one node's attributes, and errors that name the node. Needs only the node,
/// so attribute parsers (attributes.h) and vendor codegens can use it without a context.
/// Borrows the node, which must outlive it. Thread-compatible.
class NodeAttributes {
 public:
  explicit NodeAttributes(const Node& node) : node_(&node) {}

  const Node& node() const { return *node_; }

  // ---- Attributes (InvalidFormat naming node and attribute on a type mismatch) ----
  bool HasAttr(std::string_view name) const { return node().FindAttribute(name) != nullptr; }
  StatusOr<int64_t> GetInt(std::string_view name, int64_t default_value) const;
  /// Absent -> InvalidFormat naming the attribute.
  StatusOr<int64_t> GetRequiredInt(std::string_view name) const;
  StatusOr<float> GetFloat(std::string_view name, float default_value) const;
  StatusOr<std::string> GetString(std::string_view name, std::string default_value) const;
  /// Absent -> nullopt.
  StatusOr<std::optional<std::vector<int64_t>>> GetInts(std::string_view name) const;
  StatusOr<std::optional<std::vector<float>>> GetFloats(std::string_view name) const;
  /// Absent -> nullptr.
  StatusOr<TensorDataRef> GetTensor(std::string_view name) const;

  // ---- Errors, naming the node ----
  /// InvalidFormat "node 'name' (Op): message" — the model contradicts itself.
  Status Error(std::string_view message) const;
  /// InvalidFormat "node 'name' (Op): attribute 'attr': message".
  Status AttrError(std::string_view attr, std::string_view message) const;
  /// Unsupported "node 'name' (Op): message" — valid ONNX kiln does not handle.
  Status UnsupportedError(std::string_view message) const;

 protected:
  /// The attribute, nullptr when absent; Error when it has another type.
  StatusOr<const Attribute*> FindTyped(std::string_view name, Attribute::Type type) const;

 private:
  const Node* node_;
};

/// What every per-node context reads of its node in its graph: opset, inputs (types, symbolic
/// shapes, compile-time data) and outputs. Borrows the graph, which must outlive it and keep
/// its nodes while it lives. Index i counts omitted optional inputs and outputs.
class NodeContextBase : public NodeAttributes {
 public:
  NodeContextBase(const Graph& graph, NodeId node, int64_t opset);
  virtual ~NodeContextBase() = default;

  const Graph& graph() const { return graph_; }
  NodeId node_id() const { return node_; }
  int64_t opset() const { return opset_; }

  // ---- Inputs ----
  int num_inputs() const { return static_cast<int>(node().inputs.size()); }
  bool has_input(int i) const { return i >= 0 && i < num_inputs() && node().inputs[i] != kNoValue; }
  const Value& input(int i) const { return graph_.value(node().inputs[i]); }
  DType input_dtype(int i) const { return input(i).dtype; }
  /// Requires has_input(i); shape inference guarantees the rank is known.
  const SymbolicShape& input_shape(int i) const { return *input(i).shape; }
  int input_rank(int i) const { return static_cast<int>(input_shape(i).size()); }
  /// Compile-time constant data of input i (an initializer or a folded value), else nullptr.
  /// An overridable graph input's default is not a constant.
  const TensorData* input_data(int i) const;

  // ---- Outputs ----
  int num_outputs() const { return static_cast<int>(node().outputs.size()); }
  bool has_output(int i) const {
    return i >= 0 && i < num_outputs() && node().outputs[i] != kNoValue;
  }

  /// axis in [-rank, rank) -> [0, rank); Error naming `what` otherwise.
  StatusOr<int> NormalizeAxis(int64_t axis, int rank, std::string_view what = "axis") const;

 protected:
  const Graph& graph_;
  NodeId node_;
  int64_t opset_;
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_OPS_NODE_CONTEXT_H_
