// ONNX function expansion: an op kiln has no rule for, but whose ONNX schema defines it as a
// function of other ops, is replaced by that function body before import.
#ifndef KILN_COMPILER_ONNX_FUNCTION_EXPAND_H_
#define KILN_COMPILER_ONNX_FUNCTION_EXPAND_H_

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>

#include "base/status.h"

namespace kiln::compiler::onnx_import {

/// Kiln's own definition of (domain, op_type) at `opset` (the registry's OpDef), or nullptr when
/// kiln has none. An op kiln defines is never expanded; two opsets with the same definition
/// mean the same thing to kiln.
using OpDefinitionFn = std::function<const void*(std::string_view domain,
                                                 std::string_view op_type, int64_t opset)>;

/// Replaces, in `model`'s graph and every subgraph, each ai.onnx node that kiln does not define
/// but whose ONNX schema at the model's opset has a function body (a fixed one, or one built
/// from the node's attributes and input types), or that has a body kiln keeps for opsets 18-21
/// (kiln_functions.h), by the nodes of that body. Bodies are expanded again where
/// they use such ops themselves (SoftmaxCrossEntropyLoss -> NegativeLogLikelihoodLoss).
///
/// The body's formal inputs and outputs become the node's actual names (a missing optional input
/// becomes a missing input; a missing output an internal value); every other value gets a new
/// name that is unique in the model, "<node name>/<body name>", and body nodes are named
/// "<node name>/<body node name or op type>", so errors still point at the model's node.
/// Attributes that refer to the node's (ref_attr_name) take its value, else the schema default,
/// else are dropped. Subgraph attributes of body nodes are renamed the same way.
///
/// Input types for context-dependent bodies come from the graph's declared types, or else from
/// ONNX shape inference run on a copy of the model; a node with an input whose tensor type
/// cannot be found stays as it is.
///
/// Nodes nothing can expand are left as they are (the importer then reports them). Errors:
/// Unsupported when a body's builder fails, or when a body node's op means something else at
/// the model's opset than at the body's (names the node and the op); InvalidFormat when the
/// node has more inputs or outputs than the body, or expansion does not end (a body that
/// expands into itself).
Status ExpandFunctions(onnx::ModelProto& model, const OpDefinitionFn& definition);

}  // namespace kiln::compiler::onnx_import

#endif  // KILN_COMPILER_ONNX_FUNCTION_EXPAND_H_
