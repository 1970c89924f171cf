// The `kiln._kiln` extension module: InferenceSession, Runtime, compile, Tensor and errors.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>

#include "embed/omp_wait.h"
#include "embed/runtime.h"
#include "python/arrays.h"
#include "python/errors.h"
#include "python/load.h"
#include "python/session.h"

namespace kiln::python {
namespace {

// Loads `model` into `runtime` with the GIL released (compiling and JIT set-up take long).
std::unique_ptr<Session> Open(std::shared_ptr<Runtime> runtime, py::handle model, py::handle dims,
                              py::handle external) {
  ModelSource source = ToModelSource(model);
  CompileRequest request = ToCompileRequest(dims, external, runtime->options().num_threads);
  StatusOr<std::unique_ptr<Session>> session = Internal("not loaded");
  {
    py::gil_scoped_release release;
    auto exe = LoadModel(*runtime, source, request);
    session = exe.ok() ? Session::Create(runtime, std::move(*exe))
                       : StatusOr<std::unique_ptr<Session>>(exe.status());
  }
  return Unwrap(std::move(session));
}

py::dict StatsDict(const RuntimeStats& s) {
  py::dict d;
  d["jit_compilations"] = s.engine.compilations;
  d["jit_cache_hits"] = s.engine.cache_hits;
  d["jit_object_cache_hits"] = s.engine.object_cache_hits;
  d["jit_compile_seconds"] = s.engine.compile_seconds;
  d["jit_aot_kernels"] = s.dispatch.aot_kernels;  // linked from code compiled ahead of time
  d["allocator_bytes_in_use"] = s.allocator.bytes_in_use;
  d["allocator_bytes_cached"] = s.allocator.bytes_cached;
  d["allocator_allocations"] = s.allocator.allocations;
  return d;
}

void DefineNodeArg(py::module_& m) {
  py::class_<NodeArg>(m, "NodeArg", "A declared input or output, as ONNX Runtime's NodeArg.")
      .def_readonly("name", &NodeArg::name)
      .def_readonly("type", &NodeArg::type, "\"tensor(float)\", \"tensor(int64)\", ...")
      .def_readonly("shape", &NodeArg::shape,
                    "An int per fixed dim; the symbol (str) of a symbolic dim, None if unnamed.")
      .def("__repr__", [](const NodeArg& a) {
        return "NodeArg(name='" + a.name + "', type='" + a.type +
               "', shape=" + std::string(py::repr(a.shape)) + ")";
      });
}

void DefineRuntime(py::module_& m) {
  py::class_<Runtime, std::shared_ptr<Runtime>>(
      m, "Runtime",
      "The JIT (kernels compiled on first use, persistent object cache), vendor runtimes "
      "(oneDNN, plugins) and a pooling allocator. Create one and load many models into it; "
      "InferenceSession makes (and shares) one per option set by itself.")
      .def(py::init([](py::object threads, py::object jit_cache, py::object plugins,
                       bool require_vendor, bool ignore_tuned_fallback) {
             return Unwrap(Runtime::Create(ToRuntimeOptions(threads, jit_cache, plugins,
                                                            require_vendor,
                                                            ignore_tuned_fallback)));
           }),
           py::arg("threads") = py::none(), py::arg("jit_cache") = py::none(),
           py::arg("plugins") = py::none(), py::arg("require_vendor") = false,
           py::arg("ignore_tuned_fallback") = false,
           "threads: OpenMP threads of kernels and oneDNN regions (None: $OMP_NUM_THREADS, else "
           "every core); jit_cache: None (~/.cache/kiln), \"off\" or a directory; plugins: "
           "vendor plugin .so paths; require_vendor: a load fails when a vendor declines an "
           "external region or is not registered (default: the region runs its fallback, "
           "kiln's JIT, with one notice on stderr); ignore_tuned_fallback: regions `kiln "
           "compile --tune` measured slower than their fallback get their vendor runtime anyway "
           "(default: they run the fallback).")
      .def(
          "load",
          [](std::shared_ptr<Runtime> self, py::object model, py::object dims,
             py::object external) { return Open(std::move(self), model, dims, external); },
          py::arg("path_or_bytes"), py::arg("dims") = py::none(), py::arg("external") = "onednn",
          "An InferenceSession for a .kiln executable or an .onnx model (compiled in memory; "
          "dims pins its symbolic dims, external picks the external compiler: \"onednn\" or "
          "\"none\").")
      .def(
          "stats", [](const Runtime& r) { return StatsDict(r.stats()); },
          "Counters since the runtime was created: JIT compilations and cache hits, allocator "
          "bytes.")
      .def("wait_for_background_compiles", &Runtime::WaitForBackgroundCompiles,
           py::call_guard<py::gil_scoped_release>(),
           "Blocks until no shape-specialized kernel variant is compiling in the background "
           "(for warm-up before measuring).")
      .def_property_readonly("num_threads", &Runtime::num_threads)
      .def_property_readonly("jit_cache_dir", &Runtime::jit_cache_dir);
}

void DefineSession(py::module_& m) {
  py::class_<Session>(
      m, "InferenceSession",
      "A model ready to run, modelled on onnxruntime.InferenceSession. Safe to run from any "
      "number of Python threads at once; the GIL is released while kiln runs.")
      .def(py::init([](py::object model, py::object threads, py::object jit_cache,
                       py::object external, py::object dims, bool require_vendor,
                       bool ignore_tuned_fallback) {
             std::shared_ptr<Runtime> runtime = Unwrap(SharedRuntime(ToRuntimeOptions(
                 threads, jit_cache, py::none(), require_vendor, ignore_tuned_fallback)));
             return Open(std::move(runtime), model, dims, external);
           }),
           py::arg("path_or_bytes"), py::arg("threads") = py::none(),
           py::arg("jit_cache") = py::none(), py::arg("external") = "onednn",
           py::arg("dims") = py::none(), py::arg("require_vendor") = false,
           py::arg("ignore_tuned_fallback") = false,
           "Loads a .kiln executable, or compiles an .onnx model in memory first (path or "
           "bytes). threads / jit_cache / require_vendor / ignore_tuned_fallback as "
           "kiln.Runtime; external: the external compiler for an .onnx (\"onednn\" or "
           "\"none\"); dims: {symbol: size} pinned when compiling an .onnx.")
      .def("get_inputs", &Session::GetInputs)
      .def("get_outputs", &Session::GetOutputs)
      .def("run", &Session::Run, py::arg("output_names"), py::arg("input_feed"),
           py::arg("timeout_ms") = py::none(),
           "Runs the model and returns a list of numpy arrays, one per name in output_names "
           "(None: every output).\n\n"
           "input_feed: {input name: value}. A C-contiguous, aligned numpy array of the "
           "declared dtype is bound without copying (do not modify it during the call); a "
           "non-contiguous, unaligned or byte-swapped array is converted once (counted in "
           "input_copies); a kiln.Tensor or an object with __dlpack__ is used in place; lists "
           "and scalars are converted to the declared dtype. A wrong dtype, rank or dim raises "
           "kiln.InvalidArgument naming the input (no implicit casts).\n\n"
           "Outputs view kiln's buffers (no copy): each array's base keeps kiln's tensor alive "
           "(bfloat16, which numpy lacks, comes back as its uint16 bits). "
           "An output over memory kiln did not allocate (a model constant, or an input it "
           "reshapes) is read-only.\n\n"
           "timeout_ms: stop a longer run with kiln.DeadlineExceeded.")
      .def_property_readonly("input_copies", &Session::input_copies,
                             "Inputs converted (copied) instead of bound in place so far.")
      .def_property_readonly("runtime", &Session::runtime)
      .def("_bench_invoke", &Session::BenchInvoke, py::arg("input_feed"), py::arg("iters"),
           "(wall, thread CPU) seconds per C++ Context::Invoke on input_feed (no Python in "
           "the loop): the baseline for measuring run's per-call overhead.");
}

}  // namespace

// Everything the module holds (PYBIND11_MODULE below only names it).
void DefineModule(py::module_& m) {
  m.doc() = "kiln: run ONNX models and .kiln executables (see the kiln package).";
  m.attr("__version__") = kKilnVersion;
  m.attr("_OMP_SPIN_COUNT_DEFAULT") = kOmpSpinCountDefault;  // __init__.py repeats it
  DefineErrors(m);
  DefineTensor(m);
  DefineNodeArg(m);
  DefineRuntime(m);
  DefineSession(m);
  m.def(
      "compile",
      [](py::object model, py::object dims, py::object external, py::object threads,
         py::object targets, bool tune) {
        ModelSource source = ToModelSource(model);
        CompileRequest request = ToCompileRequest(
            dims, external, threads.is_none() ? 0 : py::cast<int>(threads), targets);
        request.tune = tune;
        StatusOr<std::vector<uint8_t>> bytes = Internal("not compiled");
        {
          py::gil_scoped_release release;
          bytes = CompileModel(source, request);
        }
        std::vector<uint8_t> b = Unwrap(std::move(bytes));
        return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
      },
      py::arg("model"), py::arg("dims") = py::none(), py::arg("external") = "onednn",
      py::arg("threads") = py::none(), py::arg("targets") = py::none(), py::arg("tune") = false,
      "Compiles an ONNX model (path or bytes) to .kiln bytes, as `kiln compile` does: dims "
      "pins symbolic dims ({\"batch\": 1}), external picks the external compiler (\"onednn\" or "
      "\"none\"), threads bounds constant folding's threads, targets names the CPUs to embed "
      "code for (as `kiln compile --target`: None is kiln's default, x86-64-v3 on x86-64, whose "
      "first inference links instead of JIT-compiling; \"none\" or [] embeds kernel IR only; "
      "\"native\", \"x86-64-v4\", or a list); tune=True makes now, on this host and `threads`' "
      "team, the measurements loading a oneDNN region would make, and records them in the "
      "executable (as `kiln compile --tune`).");
}

}  // namespace kiln::python

PYBIND11_MODULE(_kiln, m) { kiln::python::DefineModule(m); }
