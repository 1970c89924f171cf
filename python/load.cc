// Loading models from Python: shared runtimes per option set, ONNX compiled in memory, .kiln.
#include "python/load.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>

#include "embed/compile.h"
#include "python/errors.h"

namespace kiln::python {
namespace {

// A .kiln file starts with its size prefix and root offset, then the identifier.
bool IsKiln(const uint8_t* data, size_t size) {
  return size >= 12 && std::memcmp(data + 8, "KILN", 4) == 0;
}

bool FileIsKiln(const std::string& path) {
  uint8_t head[12];
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) return false;  // the compiler reports the missing file
  size_t n = std::fread(head, 1, sizeof(head), f);
  std::fclose(f);
  return IsKiln(head, n);
}

}  // namespace

RuntimeOptions ToRuntimeOptions(py::handle threads, py::handle jit_cache, py::handle plugins,
                                bool require_vendor, bool ignore_tuned_fallback) {
  RuntimeOptions options;
  options.require_vendor = require_vendor;
  options.ignore_tuned_fallback = ignore_tuned_fallback;
  if (!threads.is_none()) options.num_threads = py::cast<int>(threads);
  if (!jit_cache.is_none())
    options.jit_cache = py::str(py::module_::import("os").attr("fspath")(jit_cache));
  if (!plugins.is_none()) {
    for (py::handle p : py::iter(plugins)) {
      options.plugins.push_back(py::str(py::module_::import("os").attr("fspath")(p)));
    }
  }
  return options;
}

StatusOr<std::shared_ptr<Runtime>> SharedRuntime(const RuntimeOptions& options) {
  static std::mutex mu;
  using Key = std::tuple<int, std::string, bool, bool>;
  static auto* runtimes = new std::map<Key, std::weak_ptr<Runtime>>();
  std::lock_guard<std::mutex> lock(mu);
  const Key key{options.num_threads, options.jit_cache, options.require_vendor,
                options.ignore_tuned_fallback};
  if (std::shared_ptr<Runtime> runtime = (*runtimes)[key].lock()) return runtime;
  ASSIGN_OR_RETURN(std::shared_ptr<Runtime> runtime, Runtime::Create(options));
  (*runtimes)[key] = runtime;
  return runtime;
}

CompileRequest ToCompileRequest(py::handle dims, py::handle external, int threads,
                                py::handle targets) {
  CompileRequest request;
  if (PyUnicode_Check(targets.ptr())) {
    request.targets = std::vector<std::string>{py::cast<std::string>(targets)};
  } else if (!targets.is_none()) {
    std::vector<std::string> names;
    for (auto name : py::iter(targets)) {
      if (!PyUnicode_Check(name.ptr())) {
        throw py::type_error("targets must be None, a str or a sequence of str, got a " +
                             std::string(py::str(name.get_type())) + " in it");
      }
      names.push_back(py::cast<std::string>(name));
    }
    request.targets = std::move(names);
  }
  if (!dims.is_none()) {
    for (auto item : py::cast<py::dict>(dims)) {
      request.dims[py::cast<std::string>(item.first)] = py::cast<int64_t>(item.second);
    }
  }
  if (!external.is_none()) request.external = py::cast<std::string>(external);
  request.threads = threads;
  return request;
}

ModelSource ToModelSource(py::handle model) {
  ModelSource source;
  if (PyBytes_Check(model.ptr()) || PyByteArray_Check(model.ptr()) ||
      PyMemoryView_Check(model.ptr())) {
    py::buffer_info info = py::reinterpret_borrow<py::buffer>(model).request();
    const auto* data = static_cast<const uint8_t*>(info.ptr);
    source.bytes.assign(data, data + info.size * info.itemsize);
    return source;
  }
  if (!PyUnicode_Check(model.ptr()) && !py::hasattr(model, "__fspath__")) {
    throw py::type_error("the model must be a path (str or os.PathLike) or bytes, got " +
                         std::string(py::str(model.get_type())));
  }
  source.path = py::str(py::module_::import("os").attr("fspath")(model));
  source.is_path = true;
  return source;
}

StatusOr<std::vector<uint8_t>> CompileModel(const ModelSource& model,
                                            const CompileRequest& request) {
  kiln::CompileOptions options;  // kiln's default code targets, as `kiln compile`'s
  if (request.targets) options.code_targets = *request.targets;  // {} as {"none"}
  options.dim_pins = request.dims;
  options.external = request.external;
  options.num_threads = request.threads;
  options.tune = request.tune;
  if (model.is_path) return kiln::CompileOnnxFile(model.path, options);
  return kiln::CompileOnnxBytes(model.bytes.data(), model.bytes.size(), options);
}

StatusOr<std::shared_ptr<const Executable>> LoadModel(const Runtime& runtime,
                                                      const ModelSource& model,
                                                      const CompileRequest& request) {
  bool kiln =
      model.is_path ? FileIsKiln(model.path) : IsKiln(model.bytes.data(), model.bytes.size());
  if (kiln && !request.dims.empty()) {
    return InvalidArgument(
        "dims pins symbolic dims when compiling an ONNX model; this is a "
        "compiled .kiln executable (compile it again with the dims instead)");
  }
  if (kiln && model.is_path) return runtime.LoadFile(model.path);
  if (kiln) return runtime.LoadBytes(model.bytes.data(), model.bytes.size());
  CompileRequest in_memory = request;
  if (!in_memory.targets) in_memory.targets.emplace();  // see load.h: the JIT's first tier
  ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, CompileModel(model, in_memory));
  return runtime.LoadBytes(bytes.data(), bytes.size());
}

}  // namespace kiln::python
