// Writing ONNX nodes from code: what the import-time expansions (expand_rnn, expand_quant) use
// to replace one node by several.
#ifndef KILN_COMPILER_ONNX_NODE_WRITER_H_
#define KILN_COMPILER_ONNX_NODE_WRITER_H_

#include <onnx/onnx_pb.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::compiler::onnx_internal {

onnx::AttributeProto IntAttr(const std::string& name, int64_t v);
onnx::AttributeProto IntsAttr(const std::string& name, const std::vector<int64_t>& v);
onnx::AttributeProto FloatAttr(const std::string& name, float v);
onnx::AttributeProto TensorAttr(const std::string& name, onnx::TensorProto t);

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

}  // namespace kiln::compiler::onnx_internal

#endif  // KILN_COMPILER_ONNX_NODE_WRITER_H_
