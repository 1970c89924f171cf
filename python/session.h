// kiln.InferenceSession: one loaded executable, run from Python with the GIL released.
#ifndef KILN_PYTHON_SESSION_H_
#define KILN_PYTHON_SESSION_H_

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "embed/runtime.h"  // also Context and Executable (vm/), which its API uses
#include "python/arrays.h"

namespace kiln::python {

namespace py = pybind11;

/// A declared input or output as ONNX Runtime describes it (its NodeArg): `type` is
/// "tensor(float)", `shape` has an int per fixed dim and the name (str) of each symbolic
/// one, or None for an unnamed symbolic dim.
struct NodeArg {
  std::string name;
  std::string type;
  py::list shape;
};

/// "tensor(float)", "tensor(int64)", ... as ONNX Runtime spells kiln's dtype.
std::string OrtTypeName(DType dtype);

/// The entry function of one executable, ready to run from any number of Python threads at
/// once. Each run takes a VM context from a pool (made on demand, kept for reuse: one per
/// thread that has run concurrently), so steady-state runs allocate no context.
class Session {
 public:
  /// `exe` must be bound (loaded by `runtime`). InvalidArgument / NotFound if it has no entry
  /// function.
  static StatusOr<std::unique_ptr<Session>> Create(std::shared_ptr<Runtime> runtime,
                                                   std::shared_ptr<const Executable> exe);

  std::vector<NodeArg> GetInputs() const;
  std::vector<NodeArg> GetOutputs() const;

  /// Runs on `feeds` ({input name: value}, every declared input once; values as BindInput
  /// takes them) and returns the outputs named in `output_names` (a sequence of str), or all
  /// of them for None, as numpy arrays over kiln's buffers (ToNumpy). The GIL is released
  /// while the VM runs. `timeout_ms` (None or > 0) stops a longer run with
  /// DeadlineExceeded. Raises InvalidArgument for a missing, unknown or repeated input name,
  /// an unknown output name, or an input kiln rejects (dtype, rank, dims: kiln's message,
  /// naming the input); run-time errors as their kiln exception. Needs the GIL.
  py::list Run(py::object output_names, py::object feeds, py::object timeout_ms);

  /// (wall, calling thread's CPU) seconds per Context::Invoke over `iters` runs on `feeds`
  /// with the GIL released and no Python work in between: the C++ side of the per-call
  /// overhead measurement (CPU time is what a loaded machine's preemption does not inflate).
  std::pair<double, double> BenchInvoke(py::object feeds, int iters);

  /// Inputs converted (copied) rather than bound in place, since the session was made.
  int64_t input_copies() const { return input_copies_.load(std::memory_order_relaxed); }
  const std::shared_ptr<Runtime>& runtime() const { return runtime_; }
  const Executable& executable() const { return *exe_; }

 private:
  Session(std::shared_ptr<Runtime> runtime, std::shared_ptr<const Executable> exe, int function);
  // Binds `feeds` in declared order into `inputs` (and the objects owning their memory).
  void BindFeeds(py::handle feeds, std::vector<BoundInput>* bound);
  // Indices of the outputs to return.
  std::vector<int> SelectOutputs(py::handle output_names) const;
  std::unique_ptr<Context> TakeContext();
  void ReturnContext(std::unique_ptr<Context> context);

  std::shared_ptr<Runtime> runtime_;
  std::shared_ptr<const Executable> exe_;
  int function_;
  std::atomic<int64_t> input_copies_{0};
  std::mutex mu_;
  std::vector<std::unique_ptr<Context>> idle_;  // guarded by mu_
};

}  // namespace kiln::python

#endif  // KILN_PYTHON_SESSION_H_
