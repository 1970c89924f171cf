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

namespace {

// "LO:HI" or "V1,V2,..." (each a positive integer) into `out`, ascending.
Status ParseWarmupValues(const std::string& text, jit::Bucketing bucketing,
                         std::vector<int64_t>* out) {
  auto number = [](const std::string& n, int64_t* v) {
    if (n.empty() || n.size() > 12 || n.find_first_not_of("0123456789") != std::string::npos) {
      return false;
    }
    *v = std::stoll(n);
    return *v >= 1;
  };
  size_t colon = text.find(':');
  if (colon != std::string::npos) {
    int64_t lo = 0, hi = 0;
    if (!number(text.substr(0, colon), &lo) || !number(text.substr(colon + 1), &hi)) {
      return InvalidArgument("LO and HI must be integers >= 1");
    }
    if (hi < lo) return InvalidArgument("HI is below LO");
    *out = WarmupBucketValues(lo, hi, bucketing);
    return Status::Ok();
  }
  for (size_t start = 0; start <= text.size();) {
    size_t comma = std::min(text.find(',', start), text.size());
    int64_t v = 0;
    if (!number(text.substr(start, comma - start), &v)) {
      return InvalidArgument("'" + text.substr(start, comma - start) + "' is not an integer >= 1");
    }
    out->push_back(v);
    start = comma + 1;
  }
  std::sort(out->begin(), out->end());
  out->erase(std::unique(out->begin(), out->end()), out->end());
  return Status::Ok();
}

}  // namespace

Status ParseWarmupDims(const std::string& flag, jit::Bucketing bucketing, WarmupShapes* shapes) {
  size_t eq = flag.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("wants NAME=LO:HI or NAME=V1,V2,..., got '" + flag + "'");
  }
  std::string name = flag.substr(0, eq);
  if (shapes->values.count(name) != 0) {
    return InvalidArgument(flag + ": '" + name + "' is given twice");
  }
  std::vector<int64_t> values;
  RETURN_IF_ERROR(ParseWarmupValues(flag.substr(eq + 1), bucketing, &values).WithContext(flag));
  shapes->values[name] = std::move(values);
  return Status::Ok();
}

std::vector<std::map<std::string, int64_t>> WarmupPoints(const FunctionSignature& sig,
                                                         const WarmupShapes& shapes) {
  std::map<std::string, int64_t> base;
  for (const std::string& symbol : sig.symbols) {
    auto it = shapes.dims.find(symbol);
    base[symbol] = it != shapes.dims.end() ? it->second : 1;
  }
  std::vector<std::map<std::string, int64_t>> points = {base};
  for (const std::string& symbol : sig.symbols) {
    auto it = shapes.values.find(symbol);
    if (it == shapes.values.end() || it->second.empty()) continue;
    std::vector<std::map<std::string, int64_t>> next;
    for (const auto& point : points) {
      for (int64_t v : it->second) {
        next.push_back(point);
        next.back()[symbol] = v;
      }
    }
    points = std::move(next);
  }
  return points;
}

Status WarmUp(const Model& model, const WarmupShapes& shapes) {
  std::string where = "warm-up of model '" + model.name + "'";
  std::vector<std::map<std::string, int64_t>> points = WarmupPoints(model.signature(), shapes);
  const int max_shapes = model.runtime().options().dispatch.max_shapes;
  if (points.size() > 1 && static_cast<int64_t>(points.size()) > max_shapes) {
    return InvalidArgument(where + ": " + std::to_string(points.size()) +
                           " shapes, more than the " + std::to_string(max_shapes) +
                           " a kernel keeps (they would evict one another)");
  }
  WarmupOptions options;
  options.function = model.signature().name;
  // Once each first: a dim seen with a second value is bucketed from then on.
  if (points.size() > 1) {
    for (const auto& dims : points) {
      RETURN_IF_ERROR(model.runtime().Warmup(model.exe, dims, options).WithContext(where));
    }
  }
  options.specialize = true;
  for (const auto& dims : points) {
    RETURN_IF_ERROR(model.runtime().Warmup(model.exe, dims, options).WithContext(where));
  }
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
