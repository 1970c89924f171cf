// Loading models from Python: runtimes from keyword options, .onnx compiled in memory, .kiln.
#ifndef KILN_PYTHON_LOAD_H_
#define KILN_PYTHON_LOAD_H_

#include <pybind11/pybind11.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "embed/runtime.h"

namespace kiln::python {

namespace py = pybind11;

/// RuntimeOptions from Python's keywords: `threads` None or an int (0: OpenMP's default),
/// `jit_cache` None (the default directory), "off" or a directory, `plugins` a sequence of
/// paths, and the load policy (RuntimeOptions::require_vendor, ::ignore_tuned_fallback).
/// Needs the GIL.
RuntimeOptions ToRuntimeOptions(py::handle threads, py::handle jit_cache, py::handle plugins,
                                bool require_vendor = false, bool ignore_tuned_fallback = false);

/// The runtime InferenceSession uses for `options` (threads, jit_cache, the load policy, no
/// plugins): one per distinct combination in the process while any session holds it, so
/// sessions share compiled kernels, vendor runtimes and the allocator. Errors are
/// Runtime::Create's. Thread-safe.
StatusOr<std::shared_ptr<Runtime>> SharedRuntime(const RuntimeOptions& options);

/// How to compile an .onnx: `dims` pins symbolic dims, `external` names the external compiler,
/// `targets` the CPU targets to embed code for (kiln::CompileOptions: "none" for kernel IR
/// only; absent: kiln's default, x86-64-v3 on x86-64).
struct CompileRequest {
  std::map<std::string, int64_t> dims;
  std::string external = "onednn";
  int threads = 0;
  std::optional<std::vector<std::string>> targets;
  bool tune = false;  // kiln.compile(tune=True): `kiln compile --tune`
};

/// Fills a CompileRequest from Python (`dims` None or {str: int}; `targets` None, a str or a
/// sequence of str, [] meaning "none"). Needs the GIL; TypeError for other types.
CompileRequest ToCompileRequest(py::handle dims, py::handle external, int threads,
                                py::handle targets = py::none());

/// A model given as a path (str or os.PathLike) or bytes-like object: the path, or a copy of
/// the bytes (so the GIL can be released while they are used). Needs the GIL.
struct ModelSource {
  std::string path;
  std::vector<uint8_t> bytes;
  bool is_path = false;
};
ModelSource ToModelSource(py::handle model);

/// Compiles an ONNX model (path or bytes) to .kiln bytes: embed/compile.h's errors.
StatusOr<std::vector<uint8_t>> CompileModel(const ModelSource& model,
                                            const CompileRequest& request);

/// Loads `model` into `runtime`: a .kiln executable as it is (`request.dims` must be empty:
/// InvalidArgument, a compiled file's dims are already fixed), anything else compiled as
/// ONNX first, in memory and without code ahead of time unless `request.targets` names some:
/// this process would compile every kernel at O3 before the first run, where the JIT compiles
/// only what runs, at its cheaper first tier. Errors are the runtime's load errors and the
/// compiler's.
StatusOr<std::shared_ptr<const Executable>> LoadModel(const Runtime& runtime,
                                                      const ModelSource& model,
                                                      const CompileRequest& request);

}  // namespace kiln::python

#endif  // KILN_PYTHON_LOAD_H_
