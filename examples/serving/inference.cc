// KServe v2 infer: request JSON -> checked input tensors -> Context::Invoke -> response JSON.
#include "examples/serving/inference.h"

#include <vector>

#include "examples/serving/tensor_json.h"

namespace kiln::serving {

Reply ErrorReply(int status, std::string_view message) {
  Reply r;
  r.status = status;
  JsonWriter w(&r.body);
  w.BeginObject();
  w.Key("error");
  w.String(message);
  w.EndObject();
  return r;
}

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

int FindSpec(const std::vector<ValueSpec>& specs, std::string_view name) {
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// A string member of `obj`, or InvalidArgument naming `where`.
StatusOr<const std::string*> StringField(const Json& obj, const char* key,
                                         const std::string& where) {
  const Json* v = obj.Find(key);
  if (v == nullptr) return InvalidArgument(where + ": missing '" + key + "'");
  if (!v->is_string()) return InvalidArgument(where + ": '" + key + "' must be a string");
  return &v->string_value();
}

StatusOr<Shape> ParseShape(const Json* v, const std::string& where) {
  if (v == nullptr) return InvalidArgument(where + ": missing 'shape'");
  if (!v->is_array()) return InvalidArgument(where + ": 'shape' must be a list of integers");
  if (v->size() > static_cast<size_t>(kMaxRank)) {
    return InvalidArgument(where + ": 'shape' has rank " + std::to_string(v->size()) +
                           ", more than " + std::to_string(kMaxRank));
  }
  int64_t dims[kMaxRank];
  for (size_t i = 0; i < v->size(); ++i) {
    const Json& d = v->items()[i];
    if (!d.is_int() || d.int_value() < 0) {
      return InvalidArgument(where + ": 'shape' must be a list of non-negative integers");
    }
    dims[i] = d.int_value();
  }
  auto shape = Shape::Make(dims, static_cast<int>(v->size()));
  if (!shape.ok()) return shape.status().WithContext(where);
  return shape;
}

// The request's shape against the model's declared one: rank and fixed dims. (Symbolic dims
// that must agree across inputs are checked by Context::Invoke.)
Status CheckShape(const Shape& shape, const ValueSpec& spec, const std::string& where) {
  bool ok = shape.rank() == static_cast<int>(spec.shape.size());
  for (int i = 0; ok && i < shape.rank(); ++i) {
    if (spec.shape[i].fixed() && spec.shape[i].value != shape[i]) ok = false;
  }
  if (ok) return Status::Ok();
  return InvalidArgument(where + ": shape " + shape.ToString() + " contradicts the model's " +
                         SpecShapeString(spec));
}

// Fills `inputs` in parameter order from the request's "inputs" list.
Status DecodeInputs(const Json& request, const FunctionSignature& sig,
                    std::vector<Tensor>* inputs) {
  const Json* list = request.Find("inputs");
  if (list == nullptr) return InvalidArgument("missing 'inputs'");
  if (!list->is_array()) return InvalidArgument("'inputs' must be a list");
  inputs->assign(sig.params.size(), Tensor());
  std::vector<bool> seen(sig.params.size(), false);
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& in = list->items()[i];
    std::string where = "inputs[" + std::to_string(i) + "]";
    if (!in.is_object()) return InvalidArgument(where + " must be an object");
    ASSIGN_OR_RETURN(const std::string* name, StringField(in, "name", where));
    where += " '" + *name + "'";
    int p = FindSpec(sig.params, *name);
    if (p < 0)
      return InvalidArgument(where + ": unknown input (the model has " + NameList(sig.params) +
                             ")");
    if (seen[p]) return InvalidArgument(where + ": given more than once");
    seen[p] = true;
    const ValueSpec& spec = sig.params[p];
    ASSIGN_OR_RETURN(const std::string* datatype, StringField(in, "datatype", where));
    std::optional<DType> dtype = ParseKServeDatatype(*datatype);
    if (!dtype) return InvalidArgument(where + ": unknown datatype '" + *datatype + "'");
    if (*dtype != spec.dtype) {
      return InvalidArgument(where + ": datatype " + *datatype + " but the model expects " +
                             KServeDatatype(spec.dtype));
    }
    ASSIGN_OR_RETURN(Shape shape, ParseShape(in.Find("shape"), where));
    RETURN_IF_ERROR(CheckShape(shape, spec, where));
    const Json* data = in.Find("data");
    if (data == nullptr) return InvalidArgument(where + ": missing 'data'");
    ASSIGN_OR_RETURN((*inputs)[p], DecodeTensorData(*data, *dtype, shape, where));
  }
  for (size_t p = 0; p < seen.size(); ++p) {
    if (!seen[p]) return InvalidArgument("missing input '" + sig.params[p].name + "'");
  }
  return Status::Ok();
}

// Indices of the results to return: those named in "outputs", or all.
Status SelectOutputs(const Json& request, const FunctionSignature& sig,
                     std::vector<int>* selected) {
  selected->clear();
  const Json* list = request.Find("outputs");
  if (list == nullptr) {
    for (size_t i = 0; i < sig.results.size(); ++i) selected->push_back(static_cast<int>(i));
    return Status::Ok();
  }
  if (!list->is_array()) return InvalidArgument("'outputs' must be a list");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& out = list->items()[i];
    std::string where = "outputs[" + std::to_string(i) + "]";
    if (!out.is_object()) return InvalidArgument(where + " must be an object");
    ASSIGN_OR_RETURN(const std::string* name, StringField(out, "name", where));
    int r = FindSpec(sig.results, *name);
    if (r < 0) {
      return InvalidArgument(where + ": unknown output '" + *name + "' (the model has " +
                             NameList(sig.results) + ")");
    }
    selected->push_back(r);
  }
  return Status::Ok();
}

int InvokeErrorStatus(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
      return 400;
    case StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

}  // namespace

Reply RunInfer(const Model& model, Context& ctx, std::string_view body, const InferLimits& limits) {
  auto request = ParseJson(body, limits.json);
  if (!request.ok()) return ErrorReply(400, "malformed JSON: " + request.status().message());
  if (!request->is_object()) return ErrorReply(400, "the request must be a JSON object");
  const Json* id = request->Find("id");
  if (id != nullptr && !id->is_string()) return ErrorReply(400, "'id' must be a string");

  const FunctionSignature& sig = model.signature();
  std::vector<Tensor> inputs;
  if (Status st = DecodeInputs(*request, sig, &inputs); !st.ok())
    return ErrorReply(400, st.message());
  std::vector<int> selected;
  if (Status st = SelectOutputs(*request, sig, &selected); !st.ok()) {
    return ErrorReply(400, st.message());
  }

  InvokeOptions options;
  options.timeout = limits.invoke_timeout;
  auto outputs = ctx.Invoke(model.function, inputs, options);
  if (!outputs.ok()) {
    return ErrorReply(InvokeErrorStatus(outputs.status().code()),
                      "model '" + model.name + "': " + outputs.status().ToString());
  }
  if (outputs->size() != sig.results.size()) {
    return ErrorReply(500, "model '" + model.name + "' returned " +
                               std::to_string(outputs->size()) + " values, declared " +
                               std::to_string(sig.results.size()));
  }

  Reply reply;
  JsonWriter w(&reply.body);
  w.BeginObject();
  w.Key("model_name");
  w.String(model.name);
  w.Key("model_version");
  w.String("1");
  if (id != nullptr) {
    w.Key("id");
    w.String(id->string_value());
  }
  w.Key("outputs");
  w.BeginArray();
  for (int r : selected) {
    const Tensor& t = (*outputs)[r];
    w.BeginObject();
    w.Key("name");
    w.String(sig.results[r].name);
    w.Key("datatype");
    w.String(KServeDatatype(t.dtype()));
    w.Key("shape");
    w.BeginArray();
    for (int d = 0; d < t.rank(); ++d) w.Int(t.dim(d));
    w.EndArray();
    w.Key("data");
    EncodeTensorData(t, w);
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return reply;
}

}  // namespace kiln::serving
