// Writing ONNX nodes from code: what the import-time expansions (expand_scan, expand_rnn,
// expand_quant) use to replace one node by several, and the graph walk that does the replacing.
#ifndef KILN_COMPILER_ONNX_NODE_WRITER_H_
#define KILN_COMPILER_ONNX_NODE_WRITER_H_

#include <onnx/onnx_pb.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

namespace kiln::compiler::onnx_internal {

onnx::AttributeProto IntAttr(const std::string& name, int64_t v);
onnx::AttributeProto IntsAttr(const std::string& name, const std::vector<int64_t>& v);
onnx::AttributeProto FloatAttr(const std::string& name, float v);
onnx::AttributeProto TensorAttr(const std::string& name, onnx::TensorProto t);
onnx::AttributeProto GraphAttr(const std::string& name, onnx::GraphProto g);

/// Appends nodes to one graph (the outer graph or a Loop body). Names are `prefix` + what +
/// "_" + a counter shared by every writer of one expanded node (Sub()), so they are unique
/// across a body and its scope. Constants of the "element type" are float converted to it:
/// `elem_type` (a TensorProto::DataType) when known, else CastLike(`like`) (opset 15+).
class NodeWriter {
 public:
  NodeWriter(std::string prefix, int64_t opset, int elem_type, std::string like);

  /// A writer for a subgraph: same names, types and counter.
  NodeWriter Sub() const;
  std::string Fresh(const std::string& what);

  std::vector<std::string> OpN(const std::string& op, const std::vector<std::string>& ins,
                               int outs, std::vector<onnx::AttributeProto> attrs = {});
  std::string Op(const std::string& op, const std::vector<std::string>& ins,
                 std::vector<onnx::AttributeProto> attrs = {});
  /// `x` copied to the value named `out` (the expanded node's own output names).
  void Rename(const std::string& x, const std::string& out);

  /// An int64 constant: a scalar when `dims` is empty.
  std::string I64(const std::vector<int64_t>& values, const std::vector<int64_t>& dims);
  std::string I64(int64_t v) { return I64({v}, {}); }
  /// A scalar of the element type.
  std::string Scalar(float v);
  /// A float value converted to the element type.
  std::string Typed(const std::string& f);

  int64_t opset() const { return opset_; }
  std::vector<onnx::NodeProto>& nodes() { return nodes_; }

 private:
  NodeWriter(std::string prefix, std::shared_ptr<int> counter, int64_t opset, int elem_type,
             std::string like);

  std::string prefix_;
  std::shared_ptr<int> counter_;
  int64_t opset_;
  int elem_type_;  // TensorProto::DataType, 0 when unknown (then CastLike from `like_`)
  std::string like_;
  std::vector<onnx::NodeProto> nodes_;
};

/// The element type `name` is declared with in `g` (input, value_info or initializer), or 0.
int DeclaredType(const onnx::GraphProto& g, const std::string& name);
/// The rank `name` is known to have in `g` (initializer dims, or a declared shape), or -1.
int DeclaredRank(const onnx::GraphProto& g, const std::string& name);

/// The nodes that replace `node`, writing its outputs. `name` is the node's name, or
/// "<op_type>_<index in its graph>" when it has none. `graph` is the graph being rewritten: its
/// inputs, initializers and value_info, and as nodes only those before `node` (already rewritten).
using ExpandNode = std::function<StatusOr<std::vector<onnx::NodeProto>>(
    const onnx::NodeProto& node, const std::string& name, const onnx::GraphProto& graph)>;

/// Rewrites `graph` in place: first every subgraph (graph attributes of its nodes, recursively),
/// then every node of `graph` for which `match` holds is replaced by what `expand` returns for
/// it; the other nodes keep their place. A graph without a matching node is left untouched.
/// Errors: the first error `expand` returns (the graph is then partly rewritten).
Status ExpandMatching(onnx::GraphProto* graph,
                      const std::function<bool(const onnx::NodeProto&)>& match,
                      const ExpandNode& expand);

}  // namespace kiln::compiler::onnx_internal

#endif  // KILN_COMPILER_ONNX_NODE_WRITER_H_
