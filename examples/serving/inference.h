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
#include "embed/runtime.h"
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

/// What a warm-up covers: a value for symbolic dims by name (`dims`; 1 for a dim not named
/// there nor in `values`), and the values a dim takes in turn (`values`, e.g. the buckets of a
/// range, WarmupBucketValues in embed/runtime.h). A name the model does not use is ignored (one
/// server warms several models up).
struct WarmupShapes {
  std::map<std::string, int64_t> dims;
  std::map<std::string, std::vector<int64_t>> values;
};

/// Parses a `--warmup-dims` value, NAME=LO:HI (the values of [LO, HI] that `bucketing` puts in
/// distinct shape-table entries, WarmupBucketValues) or NAME=V1,V2,... (those values, ascending),
/// into `shapes->values`. InvalidArgument naming the flag value for a malformed one, a value
/// below 1, HI below LO or a NAME given twice.
Status ParseWarmupDims(const std::string& flag, jit::Bucketing bucketing, WarmupShapes* shapes);

/// The dims of every warm-up call of `sig`: each combination of `shapes.values` of the dims
/// `sig` uses (in ascending order of each), the other symbols from `shapes.dims` or 1.
std::vector<std::map<std::string, int64_t>> WarmupPoints(const FunctionSignature& sig,
                                                         const WarmupShapes& shapes);

/// Warm-up: compiles before the server reports ready what the first requests at the warm-up
/// shapes (WarmupPoints) need, through Runtime::Warmup on zero inputs: the optimized code of
/// every kernel they call and, as each shape is run specialize_after times, the specialized
/// variants those shapes get once hot; it returns when every compile is done, so requests at
/// those shapes compile nothing. The shapes are first each run once, so the dispatcher learns
/// which dims vary before it files them by bucket. Errors name the model: InvalidArgument when
/// the points exceed the shapes a kernel tracks (DispatchOptions::max_shapes; they would evict
/// one another), else Runtime::Warmup's.
Status WarmUp(const Model& model, const WarmupShapes& shapes);

/// The HTTP status for an inference error of `code` (from checking or invoking): 400 for errors
/// the request caused (InvalidArgument, OutOfRange), 413 ResourceExhausted (a request over
/// max_request_bytes, or one whose tensors the allocator cannot hold), 504 DeadlineExceeded,
/// 500 otherwise.
int HttpStatusOf(StatusCode code);

}  // namespace kiln::serving

#endif  // KILN_EXAMPLES_SERVING_INFERENCE_H_
