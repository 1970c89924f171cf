// The C API over Executable / Context / Tensor: handles wrap the C++ objects; every error is a
// kiln_status; nothing throws across the boundary (allocation failure aside, which the C++
// runtime cannot report either).
#include "embed/c_api.h"

#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "external/registry/registry.h"
#include "vm/context.h"
#include "embed/runtime.h"

// The C enum numbers the dtypes as kiln::DType does (both follow the file format).
static_assert(KILN_BOOL == static_cast<int>(kiln::DType::kBool) &&
              KILN_U64 == static_cast<int>(kiln::DType::kU64) && KILN_U64 == kiln::kNumDTypes - 1);

struct kiln_status {
  kiln_status_code code;
  std::string message;
};

struct kiln_executable {
  std::shared_ptr<const kiln::Executable> exe;
};

struct kiln_context {
  std::unique_ptr<kiln::Context> ctx;
  std::vector<kiln::Tensor> inputs, outputs;  // reused across invocations
};

struct kiln_tensor {
  kiln::Tensor tensor;
};

struct kiln_runtime {
  std::shared_ptr<kiln::Runtime> runtime;
};

namespace {

kiln_status* MakeStatus(const kiln::Status& s) {
  if (s.ok()) return nullptr;
  return new kiln_status{static_cast<kiln_status_code>(s.code()), s.message()};
}

kiln_status* Error(kiln_status_code code, const std::string& message) {
  return new kiln_status{code, message};
}

kiln_status* NullArgument(const char* function, const char* argument) {
  return Error(KILN_INVALID_ARGUMENT, std::string(function) + ": " + argument + " is null");
}

const kiln::FunctionSignature* Signature(const kiln_executable* e, int function) {
  if (e == nullptr || function < 0 || function >= e->exe->num_functions()) return nullptr;
  return &e->exe->signature(function);
}

kiln_status* Describe(const kiln_executable* e, int function, int index, bool param,
                      kiln_value_info* out, const char* api) {
  if (out == nullptr) return NullArgument(api, "out");
  const kiln::FunctionSignature* sig = Signature(e, function);
  if (sig == nullptr) return Error(KILN_NOT_FOUND, std::string(api) + ": no function " + std::to_string(function));
  const auto& list = param ? sig->params : sig->results;
  if (index < 0 || index >= static_cast<int>(list.size())) {
    return Error(KILN_OUT_OF_RANGE, std::string(api) + ": index " + std::to_string(index) + " of " +
                                        std::to_string(list.size()));
  }
  const kiln::ValueSpec& v = list[index];
  std::memset(out, 0, sizeof(*out));
  out->name = v.name.c_str();
  out->dtype = static_cast<kiln_dtype>(v.dtype);
  out->rank = static_cast<int32_t>(v.shape.size());
  for (size_t i = 0; i < v.shape.size() && i < KILN_MAX_RANK; ++i) {
    out->dims[i] = v.shape[i].fixed() ? v.shape[i].value : -1;
    out->symbols[i] = v.shape[i].symbol.c_str();
  }
  return nullptr;
}

kiln::StatusOr<kiln::Shape> CheckedShape(kiln_dtype dtype, const int64_t* shape, int32_t rank) {
  if (!kiln::IsValidDType(static_cast<uint8_t>(dtype))) {
    return kiln::InvalidArgument("invalid dtype " + std::to_string(static_cast<int>(dtype)));
  }
  if (rank > 0 && shape == nullptr) return kiln::InvalidArgument("shape is null");
  ASSIGN_OR_RETURN(kiln::Shape s, kiln::Shape::Make(shape, rank));
  RETURN_IF_ERROR(s.CheckedNumElements().status());
  return s;
}

kiln::StatusOr<std::shared_ptr<const kiln::Executable>> Load(const char* path, const void* data,
                                                              size_t size) {
  const std::shared_ptr<kiln::ExternalRegistry>& registry = kiln::ExternalRegistry::Global();
  RETURN_IF_ERROR(registry->LoadPluginsFromEnvironment());
  kiln::LoadOptions options;
  options.externals = registry;
  if (path != nullptr) return kiln::Executable::LoadFile(path, options);
  return kiln::Executable::LoadBytes(static_cast<const uint8_t*>(data), size, options);
}

}  // namespace

extern "C" {

kiln_status_code kiln_status_get_code(const kiln_status* s) { return s ? s->code : KILN_OK; }
const char* kiln_status_message(const kiln_status* s) { return s ? s->message.c_str() : ""; }
void kiln_status_free(kiln_status* s) { delete s; }

kiln_status* kiln_executable_load_file(const char* path, kiln_executable** out) {
  if (path == nullptr) return NullArgument("kiln_executable_load_file", "path");
  if (out == nullptr) return NullArgument("kiln_executable_load_file", "out");
  *out = nullptr;
  auto exe = Load(path, nullptr, 0);
  if (!exe.ok()) return MakeStatus(exe.status());
  *out = new kiln_executable{std::move(*exe)};
  return nullptr;
}

kiln_status* kiln_executable_load_bytes(const void* data, size_t size, kiln_executable** out) {
  if (data == nullptr && size > 0) return NullArgument("kiln_executable_load_bytes", "data");
  if (out == nullptr) return NullArgument("kiln_executable_load_bytes", "out");
  *out = nullptr;
  auto exe = Load(nullptr, data ? data : "", size);  // no keepalive: the loader copies
  if (!exe.ok()) return MakeStatus(exe.status());
  *out = new kiln_executable{std::move(*exe)};
  return nullptr;
}

void kiln_executable_free(kiln_executable* e) { delete e; }

int kiln_executable_num_functions(const kiln_executable* e) {
  return e ? e->exe->num_functions() : -1;
}

const char* kiln_executable_function_name(const kiln_executable* e, int function) {
  const kiln::FunctionSignature* sig = Signature(e, function);
  return sig ? sig->name.c_str() : nullptr;
}

const char* kiln_executable_entry_function(const kiln_executable* e) {
  if (e == nullptr) return nullptr;
  int index = e->exe->FindFunction(e->exe->entry_function());
  return index >= 0 ? e->exe->signature(index).name.c_str() : nullptr;
}

int kiln_function_num_params(const kiln_executable* e, int function) {
  const kiln::FunctionSignature* sig = Signature(e, function);
  return sig ? static_cast<int>(sig->params.size()) : -1;
}

int kiln_function_num_results(const kiln_executable* e, int function) {
  const kiln::FunctionSignature* sig = Signature(e, function);
  return sig ? static_cast<int>(sig->results.size()) : -1;
}

kiln_status* kiln_function_param(const kiln_executable* e, int function, int index,
                                 kiln_value_info* out) {
  return Describe(e, function, index, true, out, "kiln_function_param");
}

kiln_status* kiln_function_result(const kiln_executable* e, int function, int index,
                                  kiln_value_info* out) {
  return Describe(e, function, index, false, out, "kiln_function_result");
}

kiln_status* kiln_tensor_wrap(void* data, kiln_dtype dtype, const int64_t* shape, int32_t rank,
                              kiln_tensor** out) {
  if (out == nullptr) return NullArgument("kiln_tensor_wrap", "out");
  *out = nullptr;
  auto s = CheckedShape(dtype, shape, rank);
  if (!s.ok()) return MakeStatus(s.status().WithContext("kiln_tensor_wrap"));
  if (data == nullptr && s->NumElements() > 0) return NullArgument("kiln_tensor_wrap", "data");
  *out = new kiln_tensor{kiln::Tensor::Wrap(data, static_cast<kiln::DType>(dtype), *s)};
  return nullptr;
}

kiln_status* kiln_tensor_create(kiln_dtype dtype, const int64_t* shape, int32_t rank,
                                kiln_tensor** out) {
  if (out == nullptr) return NullArgument("kiln_tensor_create", "out");
  *out = nullptr;
  auto s = CheckedShape(dtype, shape, rank);
  if (!s.ok()) return MakeStatus(s.status().WithContext("kiln_tensor_create"));
  auto t = kiln::Tensor::Allocate(kiln::DefaultAllocator(), static_cast<kiln::DType>(dtype), *s);
  if (!t.ok()) return MakeStatus(t.status().WithContext("kiln_tensor_create"));
  std::memset(t->data(), 0, t->NumBytes());
  *out = new kiln_tensor{std::move(*t)};
  return nullptr;
}

void kiln_tensor_free(kiln_tensor* t) { delete t; }
kiln_dtype kiln_tensor_dtype(const kiln_tensor* t) {
  return t ? static_cast<kiln_dtype>(t->tensor.dtype()) : KILN_DTYPE_INVALID;
}
int32_t kiln_tensor_rank(const kiln_tensor* t) { return t ? t->tensor.rank() : -1; }
const int64_t* kiln_tensor_shape(const kiln_tensor* t) { return t ? t->tensor.shape().data() : nullptr; }
void* kiln_tensor_data(const kiln_tensor* t) { return t ? t->tensor.data() : nullptr; }
size_t kiln_tensor_size_bytes(const kiln_tensor* t) { return t ? t->tensor.NumBytes() : 0; }

kiln_status* kiln_context_create(const kiln_executable* e, kiln_context** out) {
  if (e == nullptr) return NullArgument("kiln_context_create", "executable");
  if (out == nullptr) return NullArgument("kiln_context_create", "out");
  *out = nullptr;
  auto ctx = kiln::Context::Create(e->exe);
  if (!ctx.ok()) return MakeStatus(ctx.status());
  *out = new kiln_context{std::move(*ctx), {}, {}};
  return nullptr;
}

void kiln_context_free(kiln_context* c) { delete c; }

kiln_status* kiln_context_invoke(kiln_context* c, const char* function,
                                 const kiln_tensor* const* inputs, size_t num_inputs,
                                 kiln_tensor** outputs, size_t outputs_capacity,
                                 size_t* num_outputs, int64_t timeout_ms) {
  const char* api = "kiln_context_invoke";
  if (c == nullptr) return NullArgument(api, "context");
  if (function == nullptr) return NullArgument(api, "function");
  if (num_inputs > 0 && inputs == nullptr) return NullArgument(api, "inputs");
  if (num_outputs == nullptr) return NullArgument(api, "num_outputs");
  if (outputs_capacity > 0 && outputs == nullptr) return NullArgument(api, "outputs");
  *num_outputs = 0;
  int index = c->ctx->executable().FindFunction(function);
  if (index < 0) return Error(KILN_NOT_FOUND, std::string(api) + ": no function named '" + function + "'");
  c->inputs.clear();
  for (size_t i = 0; i < num_inputs; ++i) {
    if (inputs[i] == nullptr) {
      return Error(KILN_INVALID_ARGUMENT, std::string(api) + ": input " + std::to_string(i) + " is null");
    }
    c->inputs.push_back(inputs[i]->tensor);
  }
  kiln::InvokeOptions options;
  options.timeout = std::chrono::milliseconds(timeout_ms > 0 ? timeout_ms : 0);
  kiln::Status s = c->ctx->Invoke(index, c->inputs, &c->outputs, options);
  c->inputs.clear();  // do not keep the caller's buffers referenced
  if (!s.ok()) return MakeStatus(s);
  if (c->outputs.size() > outputs_capacity) {
    size_t n = c->outputs.size();
    c->outputs.clear();
    return Error(KILN_OUT_OF_RANGE, std::string(api) + ": '" + function + "' returns " +
                                        std::to_string(n) + " outputs but outputs_capacity is " +
                                        std::to_string(outputs_capacity));
  }
  for (size_t i = 0; i < c->outputs.size(); ++i) outputs[i] = new kiln_tensor{std::move(c->outputs[i])};
  *num_outputs = c->outputs.size();
  c->outputs.clear();
  return nullptr;
}

kiln_status* kiln_runtime_create(const kiln_runtime_options* options, kiln_runtime** out) {
  if (out == nullptr) return NullArgument("kiln_runtime_create", "out");
  *out = nullptr;
  kiln::RuntimeOptions o;
  if (options != nullptr) {
    if (options->num_plugins > 0 && options->plugins == nullptr) {
      return NullArgument("kiln_runtime_create", "options->plugins");
    }
    o.num_threads = options->num_threads;
    if (options->jit_cache != nullptr) o.jit_cache = options->jit_cache;
    if (options->jit_cache_bytes > 0) o.jit_cache_bytes = options->jit_cache_bytes;
    o.dispatch.tiering = options->jit_tiering_off == 0;
    o.require_vendor = options->require_vendor != 0;
    o.ignore_tuned_fallback = options->ignore_tuned_fallback != 0;
    if (options->allocator_cache_bytes > 0) {
      o.allocator_cache_bytes = options->allocator_cache_bytes;
    }
    for (size_t i = 0; i < options->num_plugins; ++i) {
      if (options->plugins[i] == nullptr) {
        std::string which = "options->plugins[" + std::to_string(i) + "]";
        return NullArgument("kiln_runtime_create", which.c_str());
      }
      o.plugins.push_back(options->plugins[i]);
    }
  }
  auto rt = kiln::Runtime::Create(o);
  if (!rt.ok()) return MakeStatus(rt.status());
  *out = new kiln_runtime{std::move(*rt)};
  return nullptr;
}

void kiln_runtime_free(kiln_runtime* r) { delete r; }

kiln_status* kiln_runtime_load_file(const kiln_runtime* r, const char* path,
                                    kiln_executable** out) {
  if (r == nullptr) return NullArgument("kiln_runtime_load_file", "runtime");
  if (path == nullptr) return NullArgument("kiln_runtime_load_file", "path");
  if (out == nullptr) return NullArgument("kiln_runtime_load_file", "out");
  *out = nullptr;
  auto exe = r->runtime->LoadFile(path);
  if (!exe.ok()) return MakeStatus(exe.status());
  *out = new kiln_executable{std::move(*exe)};
  return nullptr;
}

kiln_status* kiln_runtime_load_bytes(const kiln_runtime* r, const void* data, size_t size,
                                     kiln_executable** out) {
  if (r == nullptr) return NullArgument("kiln_runtime_load_bytes", "runtime");
  if (data == nullptr && size > 0) return NullArgument("kiln_runtime_load_bytes", "data");
  if (out == nullptr) return NullArgument("kiln_runtime_load_bytes", "out");
  *out = nullptr;
  auto exe = r->runtime->LoadBytes(static_cast<const uint8_t*>(data ? data : ""), size);
  if (!exe.ok()) return MakeStatus(exe.status());
  *out = new kiln_executable{std::move(*exe)};
  return nullptr;
}

kiln_status* kiln_runtime_warmup(const kiln_runtime* r, const kiln_executable* e,
                                 const char* function, const char* const* dim_names,
                                 const int64_t* dim_values, size_t num_dims) {
  if (r == nullptr) return NullArgument("kiln_runtime_warmup", "runtime");
  if (e == nullptr) return NullArgument("kiln_runtime_warmup", "executable");
  if (num_dims > 0 && (dim_names == nullptr || dim_values == nullptr)) {
    return NullArgument("kiln_runtime_warmup", dim_names == nullptr ? "dim_names" : "dim_values");
  }
  std::map<std::string, int64_t> dims;
  for (size_t i = 0; i < num_dims; ++i) {
    if (dim_names[i] == nullptr) {
      std::string which = "dim_names[" + std::to_string(i) + "]";
      return NullArgument("kiln_runtime_warmup", which.c_str());
    }
    if (!dims.emplace(dim_names[i], dim_values[i]).second || dim_values[i] < 0) {
      return Error(KILN_INVALID_ARGUMENT, std::string("kiln_runtime_warmup: dim '") + dim_names[i] +
                                              "' given twice or negative");
    }
  }
  kiln::WarmupOptions options;
  if (function != nullptr) options.function = function;
  return MakeStatus(r->runtime->Warmup(e->exe, dims, options));
}

kiln_status* kiln_runtime_context_create(const kiln_runtime* r, const kiln_executable* e,
                                         kiln_context** out) {
  if (r == nullptr) return NullArgument("kiln_runtime_context_create", "runtime");
  if (e == nullptr) return NullArgument("kiln_runtime_context_create", "executable");
  if (out == nullptr) return NullArgument("kiln_runtime_context_create", "out");
  *out = nullptr;
  auto ctx = r->runtime->NewContext(e->exe);
  if (!ctx.ok()) return MakeStatus(ctx.status());
  *out = new kiln_context{std::move(*ctx), {}, {}};
  return nullptr;
}

void kiln_runtime_get_stats(const kiln_runtime* r, kiln_runtime_stats* out) {
  if (out == nullptr) return;
  std::memset(out, 0, sizeof(*out));
  if (r == nullptr) return;
  kiln::RuntimeStats s = r->runtime->stats();
  out->jit_compilations = s.engine.compilations;
  out->jit_cache_hits = s.engine.cache_hits;
  out->jit_object_cache_hits = s.engine.object_cache_hits;
  out->jit_compile_seconds = s.engine.compile_seconds;
  out->specialized_calls = s.dispatch.hits;
  out->generic_calls = s.dispatch.misses;
}

void kiln_runtime_get_jit_stats(const kiln_runtime* r, kiln_jit_stats* out) {
  if (out == nullptr) return;
  std::memset(out, 0, sizeof(*out));
  if (r == nullptr) return;
  kiln::RuntimeStats s = r->runtime->stats();
  const kiln::jit::EngineStats& e = s.engine;
  out->compilations = e.compilations;
  out->fast_compilations = e.fast_compilations;
  out->failures = e.failures;
  out->cache_hits = e.cache_hits;
  out->object_cache_hits = e.object_cache_hits;
  out->object_cache_misses = e.object_cache_misses;
  out->aot_linked = e.aot_linked;
  out->aot_link_failures = e.aot_link_failures;
  out->kernels_alive = e.cached_kernels;
  out->kernels_freed = e.freed_kernels;
  out->compile_seconds = e.compile_seconds;
  const kiln::jit::DispatchStats& d = s.dispatch;
  out->variant_requests = d.compilations;
  out->specializations = d.specializations;
  out->tier_ups = d.tier_ups;
  out->specialized_calls = d.hits;
  out->generic_calls = d.misses;
}

}  // extern "C"
