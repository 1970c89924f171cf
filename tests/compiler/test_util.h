// Helpers for compiler tests: models written in ONNX text syntax, imported and inferred.
#ifndef KILN_TESTS_COMPILER_TEST_UTIL_H_
#define KILN_TESTS_COMPILER_TEST_UTIL_H_

#include <string>

#include "compiler/ir/graph.h"
#include "compiler/onnx/importer.h"
#include "base/status.h"

namespace kiln::compiler::testing {

/// The serialized ModelProto for ONNX text syntax (onnx::OnnxParser). Throws
/// std::runtime_error with the parser's message on a syntax error (a bug in the test).
std::string ModelBytes(const std::string& text);
/// ModelBytes + ImportOnnxBytes.
StatusOr<Graph> ImportText(const std::string& text, const ImportOptions& options = {});
/// ImportText + InferShapes.
StatusOr<Graph> InferText(const std::string& text, const ImportOptions& options = {});
/// The type of the value named `name` as "float32[batch, 4]" ("<none>" if absent).
std::string TypeOf(const Graph& g, const std::string& name);

}  // namespace kiln::compiler::testing

#endif  // KILN_TESTS_COMPILER_TEST_UTIL_H_
