// Protocol-independent inference: input binding and checks, output lookup, invocation.
#include "examples/serving/inference.h"

#include <algorithm>
#include <cstring>

#include "examples/serving/tensor_json.h"
#include "vm/context.h"

namespace kiln::serving {

namespace {

// "[-1, 4]" for the model's declared shape.
std::string SpecShapeString(const ValueSpec& spec) {
  std::string s = "[";
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(spec.shape[i].fixed() ? spec.shape[i].value : -1);
  }
  return s + "]";
}

std::string NameList(const std::vector<ValueSpec>& specs) {
  std::string s;
  for (const ValueSpec& v : specs) s += (s.empty() ? "'" : ", '") + v.name + "'";
  return s;
}

// Byte counts saturate here rather than wrap: anything this large is over every limit.
constexpr uint64_t kSaturated = uint64_t{1} << 62;

int FindSpec(const std::vector<ValueSpec>& specs, std::string_view name) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

StatusOr<int> InputBinder::Bind(std::string_view name, std::string* where) {
  *where += " '" + std::string(name) + "'";
  int p = FindSpec(sig_.params, name);
  if (p < 0) {
    return InvalidArgument(*where + ": unknown input (the model has " + NameList(sig_.params) +
                           ")");
  }
  if (seen_[p]) return InvalidArgument(*where + ": given more than once");
  seen_[p] = true;
  return p;
}

StatusOr<DType> InputBinder::CheckDatatype(int param, std::string_view datatype,
                                           const std::string& where) const {
  const ValueSpec& spec = sig_.params[param];
  std::optional<DType> dtype = ParseKServeDatatype(datatype);
  if (!dtype) return InvalidArgument(where + ": unknown datatype '" + std::string(datatype) + "'");
  if (*dtype != spec.dtype) {
    return InvalidArgument(where + ": datatype " + std::string(datatype) +
                           " but the model expects " + KServeDatatype(spec.dtype));
  }
  return *dtype;
}

Status CheckRequestBytes(const InferLimits& limits, uint64_t bytes, const std::string& where,
                         const std::string& what) {
  if (bytes <= limits.max_request_bytes) return Status::Ok();
  return ResourceExhausted(where + ": " + what + " " + std::to_string(bytes) +
                           " bytes, over the request limit of " +
                           std::to_string(limits.max_request_bytes) +
                           " bytes (--max-request-bytes)");
}

Status InputBinder::CheckShape(int param, const Shape& shape, const std::string& where) {
  const ValueSpec& spec = sig_.params[param];
  bool ok = shape.rank() == static_cast<int>(spec.shape.size());
  for (int i = 0; ok && i < shape.rank(); ++i) {
    if (spec.shape[i].fixed() && spec.shape[i].value != shape[i]) ok = false;
  }
  if (!ok) {
    return InvalidArgument(where + ": shape " + shape.ToString() + " contradicts the model's " +
                           SpecShapeString(spec));
  }
  if (limits_ == nullptr) return Status::Ok();
  // Saturating: an element count past 2^47 (or one overflowing) is over any limit.
  StatusOr<int64_t> n = shape.CheckedNumElements();
  uint64_t bytes = n.ok() ? static_cast<uint64_t>(*n) * DTypeSize(spec.dtype) : kSaturated;
  input_bytes_ = std::min(input_bytes_ + bytes, kSaturated);
  return CheckRequestBytes(*limits_, input_bytes_, where,
                           "shape " + shape.ToString() + " makes the inputs");
}

StatusOr<std::vector<Tensor>> InputBinder::Finish() {
  for (size_t p = 0; p < seen_.size(); ++p) {
    if (!seen_[p]) return InvalidArgument("missing input '" + sig_.params[p].name + "'");
  }
  return std::move(inputs_);
}

uint64_t TensorBytes(const std::vector<Tensor>& tensors) {
  uint64_t bytes = 0;
  for (const Tensor& t : tensors) bytes += t.NumBytes();
  return bytes;
}

uint64_t PredictedRequestBytes(const FunctionSignature& sig, const std::vector<Tensor>& inputs) {
  std::map<std::string_view, int64_t> bound;
  for (size_t p = 0; p < sig.params.size() && p < inputs.size(); ++p) {
    const std::vector<DimSpec>& dims = sig.params[p].shape;
    for (size_t d = 0; d < dims.size() && static_cast<int>(d) < inputs[p].rank(); ++d) {
      if (!dims[d].fixed() && !dims[d].symbol.empty()) bound.emplace(dims[d].symbol, inputs[p].dim(static_cast<int>(d)));
    }
  }
  uint64_t bytes = TensorBytes(inputs);
  for (const ValueSpec& out : sig.results) {
    uint64_t n = DTypeSize(out.dtype);
    for (const DimSpec& d : out.shape) {
      auto it = d.fixed() ? bound.end() : bound.find(d.symbol);
      if (!d.fixed() && it == bound.end()) {
        n = 0;
        break;
      }
      auto v = static_cast<uint64_t>(d.fixed() ? d.value : it->second);
      n = (v != 0 && n > kSaturated / v) ? kSaturated : n * v;
    }
    bytes = std::min(bytes + n, kSaturated);
  }
  return bytes;
}

StatusOr<int> FindOutput(const FunctionSignature& sig, std::string_view name,
                         const std::string& where) {
  int r = FindSpec(sig.results, name);
  if (r < 0) {
    return InvalidArgument(where + ": unknown output '" + std::string(name) +
                           "' (the model has " + NameList(sig.results) + ")");
  }
  return r;
}

StatusOr<std::vector<Tensor>> InvokeModel(const Model& model, Context& ctx,
                                          const std::vector<Tensor>& inputs,
                                          std::chrono::steady_clock::time_point deadline) {
  InvokeOptions options;
  options.deadline = deadline;
  auto outputs = ctx.Invoke(model.function, inputs, options);
  if (!outputs.ok()) {
    return Status(outputs.status().code(),
                  "model '" + model.name + "': " + outputs.status().ToString());
  }
  if (outputs->size() != model.signature().results.size()) {
    return Internal("model '" + model.name + "' returned " + std::to_string(outputs->size()) +
                    " values, declared " + std::to_string(model.signature().results.size()));
  }
  return outputs;
}

std::chrono::steady_clock::time_point InvokeDeadline(const InferLimits& limits) {
  if (limits.invoke_timeout.count() <= 0) return std::chrono::steady_clock::time_point::max();
  return std::chrono::steady_clock::now() + limits.invoke_timeout;
}

Status WarmUp(const Model& model, const std::map<std::string, int64_t>& dims) {
  std::string where = "warm-up of model '" + model.name + "'";
  std::vector<Tensor> inputs;
  for (const ValueSpec& spec : model.signature().params) {
    int64_t shape_dims[kMaxRank];
    for (size_t d = 0; d < spec.shape.size() && d < static_cast<size_t>(kMaxRank); ++d) {
      const DimSpec& dim = spec.shape[d];
      auto it = dims.find(dim.symbol);
      shape_dims[d] = dim.fixed() ? dim.value : (it != dims.end() ? it->second : 1);
    }
    auto shape = Shape::Make(shape_dims, static_cast<int>(spec.shape.size()));
    if (!shape.ok()) return shape.status().WithContext(where + ", input '" + spec.name + "'");
    auto t = Tensor::Allocate(DefaultAllocator(), spec.dtype, *shape);
    if (!t.ok()) return t.status().WithContext(where);
    if (t->NumBytes() > 0) std::memset(t->data(), 0, t->NumBytes());
    inputs.push_back(std::move(*t));
  }
  auto ctx = model.AcquireContext();
  if (!ctx.ok()) return ctx.status().WithContext(where);
  auto outputs = InvokeModel(model, **ctx, inputs, std::chrono::steady_clock::time_point::max());
  if (!outputs.ok()) return outputs.status().WithContext(where);
  return Status::Ok();
}

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kResourceExhausted:
      return 413;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

}  // namespace kiln::serving
