// KServe v2 REST infer: request JSON (+ binary input data) -> checked inputs -> invoke -> reply
// JSON (+ binary output data).
#include "examples/serving/rest_infer.h"

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

// parameters.<key> of `obj` if present: nullptr if absent; InvalidArgument if "parameters" is
// not an object.
StatusOr<const Json*> Parameter(const Json& obj, const char* key, const std::string& where) {
  const Json* params = obj.Find("parameters");
  if (params == nullptr) return nullptr;
  if (!params->is_object()) return InvalidArgument(where + ": 'parameters' must be an object");
  return params->Find(key);
}

// The binary extension's data of one input: `binary_data_size` bytes taken from `*binary`.
StatusOr<std::string_view> TakeBinary(const Json& size, std::string_view* binary,
                                      const std::string& where) {
  if (!size.is_int() || size.int_value() < 0) {
    return InvalidArgument(where + ": 'binary_data_size' must be a non-negative integer");
  }
  auto n = static_cast<uint64_t>(size.int_value());
  if (n > binary->size()) {
    return InvalidArgument(where + ": 'binary_data_size' " + std::to_string(n) + " but only " +
                           std::to_string(binary->size()) + " bytes of binary data are left");
  }
  std::string_view data = binary->substr(0, n);
  binary->remove_prefix(n);
  return data;
}

// The inputs in parameter order from the request's "inputs" list; binary data is consumed from
// `binary` in order.
StatusOr<std::vector<Tensor>> DecodeInputs(const Json& request, const FunctionSignature& sig,
                                           std::string_view binary, const InferLimits& limits) {
  const Json* list = request.Find("inputs");
  if (list == nullptr) return InvalidArgument("missing 'inputs'");
  if (!list->is_array()) return InvalidArgument("'inputs' must be a list");
  InputBinder binder(sig, &limits);
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& in = list->items()[i];
    std::string where = "inputs[" + std::to_string(i) + "]";
    if (!in.is_object()) return InvalidArgument(where + " must be an object");
    ASSIGN_OR_RETURN(const std::string* name, StringField(in, "name", where));
    ASSIGN_OR_RETURN(int p, binder.Bind(*name, &where));
    ASSIGN_OR_RETURN(const std::string* datatype, StringField(in, "datatype", where));
    ASSIGN_OR_RETURN(DType dtype, binder.CheckDatatype(p, *datatype, where));
    ASSIGN_OR_RETURN(Shape shape, ParseShape(in.Find("shape"), where));
    RETURN_IF_ERROR(binder.CheckShape(p, shape, where));
    const Json* data = in.Find("data");
    ASSIGN_OR_RETURN(const Json* binary_size, Parameter(in, "binary_data_size", where));
    if (binary_size != nullptr) {
      if (data != nullptr) return InvalidArgument(where + ": both 'data' and 'binary_data_size'");
      ASSIGN_OR_RETURN(std::string_view bytes, TakeBinary(*binary_size, &binary, where));
      ASSIGN_OR_RETURN(Tensor t, DecodeRawTensorData(bytes, dtype, shape, where));
      binder.Set(p, std::move(t));
      continue;
    }
    if (data == nullptr) return InvalidArgument(where + ": missing 'data'");
    ASSIGN_OR_RETURN(Tensor t, DecodeTensorData(*data, dtype, shape, where));
    binder.Set(p, std::move(t));
  }
  if (!binary.empty()) {
    return InvalidArgument(std::to_string(binary.size()) +
                           " bytes of binary data that no input's 'binary_data_size' claims");
  }
  return binder.Finish();
}

// A boolean parameter (absent: `fallback`).
StatusOr<bool> BoolParameter(const Json& obj, const char* key, bool fallback,
                             const std::string& where) {
  ASSIGN_OR_RETURN(const Json* v, Parameter(obj, key, where));
  if (v == nullptr) return fallback;
  if (!v->is_bool()) return InvalidArgument(where + ": '" + key + "' must be true or false");
  return v->bool_value();
}

struct SelectedOutput {
  int result;
  bool binary;
};

// The results to return: those named in "outputs", or all; each raw or JSON.
StatusOr<std::vector<SelectedOutput>> SelectOutputs(const Json& request,
                                                    const FunctionSignature& sig) {
  ASSIGN_OR_RETURN(bool all_binary, BoolParameter(request, "binary_data_output", false, "request"));
  std::vector<SelectedOutput> selected;
  const Json* list = request.Find("outputs");
  if (list == nullptr) {
    for (size_t i = 0; i < sig.results.size(); ++i) {
      selected.push_back({static_cast<int>(i), all_binary});
    }
    return selected;
  }
  if (!list->is_array()) return InvalidArgument("'outputs' must be a list");
  for (size_t i = 0; i < list->size(); ++i) {
    const Json& out = list->items()[i];
    std::string where = "outputs[" + std::to_string(i) + "]";
    if (!out.is_object()) return InvalidArgument(where + " must be an object");
    ASSIGN_OR_RETURN(const std::string* name, StringField(out, "name", where));
    ASSIGN_OR_RETURN(int r, FindOutput(sig, *name, where));
    ASSIGN_OR_RETURN(bool binary, BoolParameter(out, "binary_data", all_binary, where));
    selected.push_back({r, binary});
  }
  return selected;
}

// The reply: JSON header, then the raw data of binary outputs in order.
Reply EncodeReply(const Model& model, const Json* id, const std::vector<Tensor>& outputs,
                  const std::vector<SelectedOutput>& selected) {
  Reply reply;
  std::string binary;
  JsonWriter w(&reply.body);
  w.BeginObject();
  w.Key("model_name");
  w.String(model.name);
  w.Key("model_version");
  w.String(model.version);
  if (id != nullptr) {
    w.Key("id");
    w.String(id->string_value());
  }
  w.Key("outputs");
  w.BeginArray();
  bool any_binary = false;
  for (const SelectedOutput& s : selected) {
    const Tensor& t = outputs[s.result];
    w.BeginObject();
    w.Key("name");
    w.String(model.signature().results[s.result].name);
    w.Key("datatype");
    w.String(KServeDatatype(t.dtype()));
    w.Key("shape");
    w.BeginArray();
    for (int d = 0; d < t.rank(); ++d) w.Int(t.dim(d));
    w.EndArray();
    if (s.binary) {
      any_binary = true;
      size_t before = binary.size();
      AppendRawTensorData(t, &binary);
      w.Key("parameters");
      w.BeginObject();
      w.Key("binary_data_size");
      w.Int(static_cast<int64_t>(binary.size() - before));
      w.EndObject();
    } else {
      w.Key("data");
      EncodeTensorData(t, w);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  if (any_binary) {
    reply.binary_header_length = reply.body.size();
    reply.body += binary;
  }
  return reply;
}

}  // namespace

Reply RunInfer(const Model& model, std::string_view body, const InferLimits& limits,
               const Invoker& invoke, std::optional<size_t> binary_header_length) {
  std::string_view header = body, binary;
  if (binary_header_length) {
    if (*binary_header_length > body.size()) {
      return ErrorReply(400, "Inference-Header-Content-Length " +
                                 std::to_string(*binary_header_length) + " exceeds the body (" +
                                 std::to_string(body.size()) + " bytes)");
    }
    header = body.substr(0, *binary_header_length);
    binary = body.substr(*binary_header_length);
  }
  auto request = ParseJson(header, limits.json);
  if (!request.ok()) return ErrorReply(400, "malformed JSON: " + request.status().message());
  if (!request->is_object()) return ErrorReply(400, "the request must be a JSON object");
  const Json* id = request->Find("id");
  if (id != nullptr && !id->is_string()) return ErrorReply(400, "'id' must be a string");

  const FunctionSignature& sig = model.signature();
  auto inputs = DecodeInputs(*request, sig, binary, limits);
  if (!inputs.ok()) {
    return ErrorReply(HttpStatusOf(inputs.status().code()), inputs.status().message());
  }
  auto selected = SelectOutputs(*request, sig);
  if (!selected.ok()) return ErrorReply(400, selected.status().message());
  auto outputs = invoke(*inputs, InvokeDeadline(limits));
  if (!outputs.ok()) {
    return ErrorReply(HttpStatusOf(outputs.status().code()), outputs.status().message());
  }
  return EncodeReply(model, id, *outputs, *selected);
}

}  // namespace kiln::serving
