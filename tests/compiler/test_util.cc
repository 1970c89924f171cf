// Helpers for compiler tests (see test_util.h).
#include "tests/compiler/test_util.h"

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <stdexcept>

#include "compiler/passes/shape_inference.h"

namespace kiln::compiler::testing {

std::string ModelBytes(const std::string& text) {
  onnx::ModelProto model;
  onnx::Status status = onnx::OnnxParser::Parse(model, text.c_str());
  if (!status.IsOK()) throw std::runtime_error("bad ONNX text: " + status.ErrorMessage());
  std::string bytes;
  if (!model.SerializeToString(&bytes)) throw std::runtime_error("cannot serialize the model");
  return bytes;
}

StatusOr<Graph> ImportText(const std::string& text, const ImportOptions& options) {
  return ImportOnnxBytes(ModelBytes(text), options);
}

StatusOr<Graph> InferText(const std::string& text, const ImportOptions& options) {
  ASSIGN_OR_RETURN(Graph g, ImportText(text, options));
  RETURN_IF_ERROR(InferShapes(g));
  return g;
}

std::string TypeOf(const Graph& g, const std::string& name) {
  std::optional<ValueId> id = g.FindValue(name);
  if (!id) return "<none>";
  const Value& v = g.value(*id);
  return std::string(DTypeName(v.dtype)) + (v.shape ? ShapeToString(*v.shape) : "[?]");
}

}  // namespace kiln::compiler::testing
