// A KServe v2 REST inference request: JSON tensors, or the binary tensor extension (a JSON header
// of Inference-Header-Content-Length bytes followed by raw tensor data), on one model.
#ifndef KILN_EXAMPLES_SERVING_REST_INFER_H_
#define KILN_EXAMPLES_SERVING_REST_INFER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "examples/serving/inference.h"
#include "examples/serving/model_repository.h"
#include "vm/context.h"

namespace kiln::serving {

/// An HTTP status and body. With binary outputs the body is the JSON header followed by the
/// raw output data, `binary_header_length` is the header's size (sent as
/// Inference-Header-Content-Length) and the content type application/octet-stream.
struct Reply {
  int status = 200;
  std::string body;
  std::optional<size_t> binary_header_length;
};

/// {"error": message} with `status`.
Reply ErrorReply(int status, std::string_view message);

/// Runs `body` (a KServe v2 infer request) on `model`, its checked inputs through `invoke`. `binary_header_length` is the request's Inference-Header-Content-
/// Length if it had one: then the first that many bytes are the JSON header and the rest the
/// data of the inputs with a "binary_data_size" parameter, in input order. Outputs requested
/// with "binary_data": true (or all, with the request parameter "binary_data_output": true)
/// are returned raw after the JSON header, with "binary_data_size".
/// Replies: 200 with {"model_name","model_version","id"?,"outputs":[...]}; 400 for a malformed
/// body (JSON, missing or mistyped fields, unknown, missing or repeated inputs, a datatype or
/// shape contradicting the model, data not matching the shape, binary sizes not adding up,
/// unknown requested outputs) and for invocation errors caused by the inputs (InvalidArgument,
/// OutOfRange); 504 when the invoke deadline passes; 500 for anything else (named).
Reply RunInfer(const Model& model, std::string_view body, const InferLimits& limits,
               const Invoker& invoke, std::optional<size_t> binary_header_length = std::nullopt);

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_REST_INFER_H_
