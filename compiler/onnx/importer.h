// ONNX import: a serialized ModelProto -> the compiler's graph IR with symbolic dims.
#ifndef KILN_COMPILER_ONNX_IMPORTER_H_
#define KILN_COMPILER_ONNX_IMPORTER_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "compiler/ir/graph.h"
#include "base/status.h"

namespace kiln::compiler {

/// Default-domain opsets kiln imports.
/// Opsets 1-6 are read with each op's definition at that opset: ops whose old definition kiln
/// does not implement (Add-6's legacy `broadcast`, say) are reported as needing a newer opset.
inline constexpr int64_t kMinOnnxOpset = 1;
inline constexpr int64_t kMaxOnnxOpset = 21;
/// Newest ONNX IR version (ModelProto.ir_version) the importer reads; newer is Unsupported.
inline constexpr int64_t kMaxIrVersion = 10;

struct ImportOptions {
  /// Dim pins (`kiln compile --dim batch=1`): every dim_param NAME becomes the constant VALUE.
  /// A pin whose name no dim_param uses is an error (a typo would otherwise go unnoticed).
  std::map<std::string, int64_t> dim_pins;
  /// Directory that external-data locations are relative to, for ImportOnnxBytes. ImportOnnxFile
  /// uses the model file's directory and ignores this.
  std::string external_data_dir;
};

/// Adds one "NAME=VALUE" pin to options->dim_pins. InvalidArgument naming the text when it is
/// malformed, the value is negative, or NAME is pinned twice.
Status ParseDimPin(std::string_view text, ImportOptions* options);

/// Imports an ONNX model file (external data relative to the file's directory).
///
/// The result: graph inputs (an input that is also an initializer is an overridable graph input
/// whose `data` is the default), constants for the other initializers (zero-copy: raw bytes are
/// moved out of the parsed message, external data is mmapped), one node per ONNX node (names
/// made unique; empty ones become "<OpType>_<index>"), subgraphs for If/Loop bodies with outer
/// values captured, declared output types, and the opset imports. Symbolic dims: dim_param ->
/// a named symbol (or its pin), an unnamed dynamic dim -> a fresh "?N" symbol.
/// An ai.onnx op kiln has no rule for, but whose ONNX schema defines a function body, is first
/// replaced by that body (compiler/onnx/function_expand.h).
///
/// Errors (never a crash, for any bytes):
///   - NotFound: the model file, or an external data file, cannot be opened (names the file and
///     the tensor).
///   - InvalidFormat: malformed or truncated protobuf (parsing is bounded in size and nesting),
///     no graph, a missing default-domain opset, a node input that nothing defines (names node
///     and input), a value produced twice, a cycle (names the nodes), tensor data of the wrong
///     size (names the tensor), an initializer whose dtype or dims contradict its declared input
///     type (names the input), external data escaping the model directory or too short.
///   - Unsupported: an opset outside [kMinOnnxOpset, kMaxOnnxOpset] (for a newer one the
///     message names onnx.version_converter); ONE error listing every op type the registry has
///     no rule for, each with its node names ("uses 2 unsupported op types: LSTM (node 'lstm1'),
///     com.microsoft.Attention (nodes 'a0', 'a1')"); string, complex, uint16/32/64 tensors;
///     sequence/optional/map types; sparse tensors.
///   - InvalidArgument: a dim pin that matches no dim_param; external data with no directory.
StatusOr<Graph> ImportOnnxFile(const std::string& path, const ImportOptions& options = {});

/// Imports a serialized ModelProto held in memory (the bytes are not retained).
StatusOr<Graph> ImportOnnxBytes(std::string_view bytes, const ImportOptions& options = {});

/// A serialized TensorProto (the .pb files of ONNX test data, `kiln run --input x=t.pb`).
/// External data is not allowed here. Errors as for initializers. When `name` is not null it
/// receives the TensorProto's name ("" when it has none).
StatusOr<TensorDataRef> ImportOnnxTensorBytes(std::string_view bytes, std::string* name = nullptr);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_ONNX_IMPORTER_H_
