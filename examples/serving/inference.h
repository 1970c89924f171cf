// One KServe v2 inference request against one model, independent of HTTP: parse, check, run.
#ifndef KILN_EXAMPLES_SERVING_INFERENCE_H_
#define KILN_EXAMPLES_SERVING_INFERENCE_H_

#include <chrono>
#include <string>
#include <string_view>

#include "examples/serving/json.h"
#include "examples/serving/model_repository.h"
#include "vm/context.h"

namespace kiln::serving {

/// An HTTP status and a JSON body.
struct Reply {
  int status = 200;
  std::string body;
};

/// {"error": message} with `status`.
Reply ErrorReply(int status, std::string_view message);

struct InferLimits {
  JsonLimits json;
  /// Deadline for the VM invocation (0: none); past it the reply is 504.
  std::chrono::milliseconds invoke_timeout{0};
};

/// Runs `body` (a KServe v2 infer request) on `model` with `ctx` (a context of model.exe owned
/// by the calling worker). Replies: 200 with {"model_name","id"?,"outputs":[...]}; 400 for a
/// malformed body (JSON, missing or mistyped fields, unknown, missing or repeated inputs,
/// a datatype or shape contradicting the model, data not matching the shape, unknown
/// requested outputs) and for invocation errors caused by the inputs (InvalidArgument,
/// OutOfRange); 504 when the invoke deadline passes; 500 for anything else (named).
Reply RunInfer(const Model& model, Context& ctx, std::string_view body, const InferLimits& limits);

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_INFERENCE_H_
