// Function bodies kiln keeps for ai.onnx ops of opsets 18-21 that libonnx 1.12's schema registry
// does not know (Mish, Gelu, GroupNormalization, CenterCropPad), expanded like schema bodies.
#ifndef KILN_COMPILER_ONNX_KILN_FUNCTIONS_H_
#define KILN_COMPILER_ONNX_KILN_FUNCTIONS_H_

#include <onnx/defs/function.h>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kiln::compiler::onnx_import {

/// One op's body over the opsets where it has one meaning.
struct KilnFunction {
  const char* op_type;
  int since_version;
  int until_version;  // inclusive
  /// The body in ONNX text syntax for the node `ctx` describes, written against opset
  /// `since_version`. "" when it needs an input type that ctx does not know (getInputType
  /// returned nullptr). InvalidArgument naming `desc` for attribute values ONNX forbids.
  StatusOr<std::string> (*build)(const onnx::FunctionBodyBuildContext& ctx,
                                 const std::string& desc);
};

/// The kept body of ai.onnx `op_type` at `opset`, or nullptr.
const KilnFunction* FindKilnFunction(std::string_view op_type, int64_t opset);

/// Parses a body built by a KilnFunction. Internal naming `desc` on a syntax error (a kiln bug).
StatusOr<onnx::FunctionProto> ParseKilnFunction(const std::string& text, const std::string& desc);

}  // namespace kiln::compiler::onnx_import

#endif  // KILN_COMPILER_ONNX_KILN_FUNCTIONS_H_
