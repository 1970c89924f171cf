// kiln.InferenceSession: binds feeds, runs the entry function without the GIL, wraps outputs.
#include "python/session.h"

#include <time.h>

#include <chrono>
#include <string_view>
#include <utility>

#include "python/errors.h"

namespace kiln::python {
namespace {

NodeArg ToNodeArg(const ValueSpec& spec) {
  NodeArg arg{spec.name, OrtTypeName(spec.dtype), py::list()};
  for (const DimSpec& d : spec.shape) {
    if (d.fixed()) {
      arg.shape.append(d.value);
    } else if (!d.symbol.empty()) {
      arg.shape.append(d.symbol);
    } else {
      arg.shape.append(py::none());
    }
  }
  return arg;
}

std::string NameList(const std::vector<ValueSpec>& specs) {
  std::string names;
  for (const ValueSpec& s : specs) names += (names.empty() ? "'" : ", '") + s.name + "'";
  return names;
}

}  // namespace

std::string OrtTypeName(DType dtype) {
  // ONNX's names are numpy's (base/dtype.h) but for its two oldest float types.
  const char* name = dtype == DType::kF32   ? "float"
                     : dtype == DType::kF64 ? "double"
                                            : DTypeName(dtype);
  return std::string("tensor(") + name + ")";
}

Session::Session(std::shared_ptr<Runtime> runtime, std::shared_ptr<const Executable> exe,
                 int function)
    : runtime_(std::move(runtime)), exe_(std::move(exe)), function_(function) {}

StatusOr<std::unique_ptr<Session>> Session::Create(std::shared_ptr<Runtime> runtime,
                                                   std::shared_ptr<const Executable> exe) {
  if (runtime == nullptr || exe == nullptr) {
    return InvalidArgument("Session: null runtime or executable");
  }
  std::string_view entry = exe->entry_function();
  int function = exe->FindFunction(entry);
  if (function < 0) {
    return NotFound("the executable has no entry function '" + std::string(entry) + "'");
  }
  auto session =
      std::unique_ptr<Session>(new Session(std::move(runtime), std::move(exe), function));
  // One context now, so a load error surfaces here and the first run finds one waiting.
  ASSIGN_OR_RETURN(std::unique_ptr<Context> context, session->runtime_->NewContext(session->exe_));
  session->idle_.push_back(std::move(context));
  return session;
}

std::vector<NodeArg> Session::GetInputs() const {
  std::vector<NodeArg> args;
  for (const ValueSpec& spec : exe_->signature(function_).params) args.push_back(ToNodeArg(spec));
  return args;
}

std::vector<NodeArg> Session::GetOutputs() const {
  std::vector<NodeArg> args;
  for (const ValueSpec& spec : exe_->signature(function_).results) args.push_back(ToNodeArg(spec));
  return args;
}

void Session::BindFeeds(py::handle feeds, std::vector<BoundInput>* bound) {
  const std::vector<ValueSpec>& params = exe_->signature(function_).params;
  if (!PyDict_Check(feeds.ptr())) {
    throw py::type_error("run: input_feed must be a dict {input name: array}, got " +
                         std::string(py::str(feeds.get_type())));
  }
  bound->assign(params.size(), BoundInput());
  std::vector<bool> seen(params.size(), false);
  for (auto item : py::reinterpret_borrow<py::dict>(feeds)) {
    if (!PyUnicode_Check(item.first.ptr())) {
      Raise(InvalidArgument("run: input names must be str, got " +
                            std::string(py::str(item.first.get_type()))));
    }
    std::string_view name = PyUnicode_AsUTF8(item.first.ptr());
    size_t i = 0;
    while (i < params.size() && params[i].name != name) ++i;
    if (i == params.size()) {
      Raise(InvalidArgument("run: the model has no input '" + std::string(name) +
                            "' (inputs: " + NameList(params) + ")"));
    }
    (*bound)[i] = Unwrap(BindInput(item.second, params[i].name, params[i].dtype));
    if ((*bound)[i].converted) input_copies_.fetch_add(1, std::memory_order_relaxed);
    seen[i] = true;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (!seen[i]) Raise(InvalidArgument("run: missing input '" + params[i].name + "'"));
  }
}

std::vector<int> Session::SelectOutputs(py::handle output_names) const {
  const std::vector<ValueSpec>& results = exe_->signature(function_).results;
  std::vector<int> selected;
  if (output_names.is_none()) {
    for (size_t i = 0; i < results.size(); ++i) selected.push_back(static_cast<int>(i));
    return selected;
  }
  if (PyUnicode_Check(output_names.ptr())) {
    throw py::type_error("run: output_names must be a list of names or None, not a str");
  }
  for (py::handle item : py::iter(output_names)) {
    std::string name = py::cast<std::string>(item);
    size_t i = 0;
    while (i < results.size() && results[i].name != name) ++i;
    if (i == results.size()) {
      Raise(InvalidArgument("run: the model has no output '" + name +
                            "' (outputs: " + NameList(results) + ")"));
    }
    selected.push_back(static_cast<int>(i));
  }
  return selected;
}

std::unique_ptr<Context> Session::TakeContext() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      std::unique_ptr<Context> context = std::move(idle_.back());
      idle_.pop_back();
      return context;
    }
  }
  auto context = runtime_->NewContext(exe_);
  return context.ok() ? std::move(*context) : nullptr;  // only fails for a null executable
}

void Session::ReturnContext(std::unique_ptr<Context> context) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(context));
}

py::list Session::Run(py::object output_names, py::object feeds, py::object timeout_ms) {
  std::vector<int> selected = SelectOutputs(output_names);
  InvokeOptions options;
  if (!timeout_ms.is_none()) {
    auto ms = py::cast<int64_t>(timeout_ms);
    if (ms <= 0)
      Raise(
          InvalidArgument("run: timeout_ms must be positive (or None), got " + std::to_string(ms)));
    options.timeout = std::chrono::milliseconds(ms);
  }
  std::vector<BoundInput> bound;
  BindFeeds(feeds, &bound);
  std::vector<Tensor> inputs;
  inputs.reserve(bound.size());
  for (const BoundInput& b : bound) inputs.push_back(b.tensor);
  std::vector<Tensor> outputs;
  Status status;
  {
    py::gil_scoped_release release;
    std::unique_ptr<Context> context = TakeContext();
    status = context ? context->Invoke(function_, inputs, &outputs, options)
                     : Internal("run: cannot create a VM context");
    if (context) ReturnContext(std::move(context));
  }
  ThrowIfError(status);
  py::list result(selected.size());
  for (size_t k = 0; k < selected.size(); ++k) {
    const Tensor& out = outputs[selected[k]];
    // An output over an input's memory (a reshape of it, say) must keep that input alive.
    py::handle owner;
    for (const BoundInput& b : bound) {
      if (b.tensor.storage().get() == out.storage().get()) owner = b.owner;
    }
    result[k] = ToNumpy(out, owner);
  }
  return result;
}

namespace {

double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

}  // namespace

std::pair<double, double> Session::BenchInvoke(py::object feeds, int iters) {
  if (iters < 1) Raise(InvalidArgument("_bench_invoke: iters must be >= 1"));
  std::vector<BoundInput> bound;
  BindFeeds(feeds, &bound);
  std::vector<Tensor> inputs;
  for (const BoundInput& b : bound) inputs.push_back(b.tensor);
  Status status;
  double wall = 0;
  double cpu = 0;
  {
    py::gil_scoped_release release;
    std::unique_ptr<Context> context = TakeContext();
    if (context == nullptr) status = Internal("_bench_invoke: cannot create a VM context");
    std::vector<Tensor> outputs;
    auto start = std::chrono::steady_clock::now();
    double cpu_start = ThreadCpuSeconds();
    for (int i = 0; i < iters && status.ok(); ++i)
      status = context->Invoke(function_, inputs, &outputs);
    cpu = ThreadCpuSeconds() - cpu_start;
    wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    outputs.clear();
    if (context) ReturnContext(std::move(context));
  }
  ThrowIfError(status);
  return {wall / iters, cpu / iters};
}

}  // namespace kiln::python
