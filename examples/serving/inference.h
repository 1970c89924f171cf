// One KServe v2 inference, independent of the wire protocol: binding and checking inputs against
// the model's signature, choosing outputs, invoking, and mapping errors to HTTP / gRPC codes.
// REST (rest_infer.h) and gRPC (grpc_service.h) both decode into this and encode from it, so
// every front end applies the same validation and limits.
#ifndef KILN_EXAMPLES_SERVING_INFERENCE_H_
#define KILN_EXAMPLES_SERVING_INFERENCE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "examples/serving/json.h"
#include "examples/serving/model_repository.h"
#include "vm/context.h"

namespace kiln::serving {

struct InferLimits {
  JsonLimits json;
  /// Deadline for the VM invocation (0: none); past it the reply is 504 / DEADLINE_EXCEEDED.
  std::chrono::milliseconds invoke_timeout{0};
  /// Tensor bytes one request may hold: its inputs (shape x element size, checked from the
  /// declared shapes before any data is decoded) plus its outputs (checked before invoking
  /// where the output shapes follow from the input shapes, and after invoking before a reply
  /// is encoded). Beyond it: ResourceExhausted naming the limit (413 / RESOURCE_EXHAUSTED).
  size_t max_request_bytes = kDefaultMaxRequestBytes;

  static constexpr size_t kDefaultMaxRequestBytes = size_t{256} << 20;
};

/// ResourceExhausted "<where>: <what> is N bytes, over the request limit of L bytes
/// (--max-request-bytes)" if bytes > limits.max_request_bytes.
Status CheckRequestBytes(const InferLimits& limits, uint64_t bytes, const std::string& where,
                         const std::string& what);

/// Collects a request's inputs in the model's parameter order, checking each as it comes.
class InputBinder {
 public:
  /// `limits`: max_request_bytes bounds the inputs' bytes (CheckShape); null: no bound.
  explicit InputBinder(const FunctionSignature& sig, const InferLimits* limits = nullptr)
      : sig_(sig), limits_(limits), inputs_(sig.params.size()), seen_(sig.params.size(), false) {}

  /// Binds one input by name: a parameter not given before. Appends " 'name'" to `where` and
  /// returns the parameter index; InvalidArgument naming `where` otherwise.
  StatusOr<int> Bind(std::string_view name, std::string* where);
  /// The type of parameter `param` if `datatype` is its KServe name; InvalidArgument naming
  /// `where` for an unknown or contradicting datatype.
  StatusOr<DType> CheckDatatype(int param, std::string_view datatype,
                                const std::string& where) const;
  /// InvalidArgument naming `where` unless `shape` has the declared rank and fixed dims;
  /// ResourceExhausted naming the limit once the inputs checked so far (shape x element size)
  /// hold more than limits.max_request_bytes. Call it before decoding the input's data.
  Status CheckShape(int param, const Shape& shape, const std::string& where);
  /// The decoded tensor of parameter `param` (an index Bind returned).
  void Set(int param, Tensor t) { inputs_[param] = std::move(t); }
  /// The inputs in parameter order; InvalidArgument naming the first input never given.
  StatusOr<std::vector<Tensor>> Finish();

 private:
  const FunctionSignature& sig_;
  const InferLimits* limits_;
  uint64_t input_bytes_ = 0;
  std::vector<Tensor> inputs_;
  std::vector<bool> seen_;
};

/// Bytes of `inputs` plus the outputs of `sig` whose shapes follow from the inputs' (every dim
/// fixed or a symbol some input dim binds); outputs of other shapes count 0.
uint64_t PredictedRequestBytes(const FunctionSignature& sig, const std::vector<Tensor>& inputs);
/// Bytes of `tensors` (shape x element size).
uint64_t TensorBytes(const std::vector<Tensor>& tensors);

/// The result index of output `name`; InvalidArgument naming `where` and the model's outputs.
StatusOr<int> FindOutput(const FunctionSignature& sig, std::string_view name,
                         const std::string& where);

/// Runs `model`'s entry function on `inputs` with `ctx` (a context of model.exe used by this
/// thread only), stopping at `deadline`. Errors are Context::Invoke's, prefixed with the model
/// name; Internal if the model returns another number of values than it declares.
StatusOr<std::vector<Tensor>> InvokeModel(const Model& model, Context& ctx,
                                          const std::vector<Tensor>& inputs,
                                          std::chrono::steady_clock::time_point deadline);

/// How a front end runs checked inputs: alone (InvokeModel on a pooled context) or batched
/// (ServingCore::Invoke). Errors as InvokeModel's.
using Invoker = std::function<StatusOr<std::vector<Tensor>>(
    const std::vector<Tensor>& inputs, std::chrono::steady_clock::time_point deadline)>;

/// The deadline of one invocation started now: `limits.invoke_timeout` from now, or never.
std::chrono::steady_clock::time_point InvokeDeadline(const InferLimits& limits);

/// Warm-up: runs `model` once on zero inputs so the JIT work of its first request is done
/// before the server reports ready. Each input has its declared shape, a symbolic dim taking its
/// value from `dims` (by symbol name; 1 when absent). Errors name the model. (One function, so
/// a Runtime-level warm-up can replace its body.)
Status WarmUp(const Model& model, const std::map<std::string, int64_t>& dims);

/// The HTTP status for an inference error of `code` (from checking or invoking): 400 for errors
/// the request caused (InvalidArgument, OutOfRange), 413 ResourceExhausted (a request over
/// max_request_bytes, or one whose tensors the allocator cannot hold), 504 DeadlineExceeded,
/// 500 otherwise.
int HttpStatusOf(StatusCode code);

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_INFERENCE_H_
