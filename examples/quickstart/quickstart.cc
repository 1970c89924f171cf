// Quickstart: compile a real ONNX model, load it with the Runtime, run it at several shapes.
//
//   bazel run //examples/quickstart [-- --runs=N --external=onednn|none --threads=N
//                                       --jit_cache=DIR|off MODEL.onnx]
//
// The model (examples/quickstart/make_model.cc writes it at build time) is a tiny text
// classifier with symbolic dims batch and seq: embedding Gather, LayerNormalization, a
// feed-forward block with exact Gelu, a residual Add, mean over seq, Gemm and Softmax. Every
// output is checked against a plain C++ reference (reference.h); `bazel test
// //examples/quickstart:quickstart_test` runs this program with fewer iterations.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "embed/compile.h"
#include "embed/runtime.h"
#include "examples/quickstart/model_def.h"
#include "examples/quickstart/reference.h"

namespace {

using Clock = std::chrono::steady_clock;

// f32 kernels against a double reference: each logit is a chain of dot products of at most 128
// terms over O(1) values, so its f32 rounding error is ~1e-6 relative; softmax turns an
// absolute logit error e into a relative probability error <= 2e. 1e-4 leaves room for
// vectorized erf/exp approximations (a few ulp) without hiding a wrong kernel, whose errors
// are O(1e-2) or more.
constexpr double kRtol = 1e-4;
constexpr double kAtol = 1e-6;

struct Args {
  std::string model = "examples/quickstart/quickstart.onnx";  // runfiles-relative
  int runs = 50;
  std::string external = "onednn";
  int threads = 0;
  std::string jit_cache;  // persistent JIT object cache ("": the default directory; "off")
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&](std::string_view flag) { return std::string(a.substr(flag.size())); };
    if (a.rfind("--runs=", 0) == 0) {
      args->runs = std::atoi(value("--runs=").c_str());
    } else if (a.rfind("--external=", 0) == 0) {
      args->external = value("--external=");
    } else if (a.rfind("--jit_cache=", 0) == 0) {
      args->jit_cache = value("--jit_cache=");
    } else if (a.rfind("--threads=", 0) == 0) {
      args->threads = std::atoi(value("--threads=").c_str());
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "quickstart: unknown flag %s\n", argv[i]);
      return false;
    } else {
      args->model = argv[i];
    }
  }
  return args->runs >= 1;
}

int Fail(const char* step, const kiln::Status& s) {
  std::fprintf(stderr, "quickstart: %s: %s\n", step, s.ToString().c_str());
  return 1;
}

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Shape {
  int64_t batch, seq;
};

// Checks the outputs' signature, then returns the largest |got - want| / (atol + rtol |want|)
// (<= 1 passes) in *ratio, keeping the larger of it and the value already there.
kiln::Status Compare(const std::vector<kiln::Tensor>& out, const std::vector<double>& want,
                     Shape shape, double* ratio) {
  if (out.size() != 1 || out[0].dtype() != kiln::DType::kF32 ||
      out[0].shape() != kiln::Shape{shape.batch, quickstart::kClasses}) {
    return kiln::Internal("expected one f32[" + std::to_string(shape.batch) + ", 4] output, got " +
                          (out.empty() ? std::string("none") : out[0].TypeString()));
  }
  for (size_t i = 0; i < want.size(); ++i) {
    double g = out[0].data_as<float>()[i];
    double r = std::abs(g - want[i]) / (kAtol + kRtol * std::abs(want[i]));
    *ratio = std::max(*ratio, std::isnan(g) ? INFINITY : r);
  }
  if (*ratio > 1) {
    return kiln::Internal("batch " + std::to_string(shape.batch) + " x seq " +
                          std::to_string(shape.seq) + ": output differs from the reference by " +
                          std::to_string(*ratio) + " x the tolerance (rtol 1e-4)");
  }
  return kiln::Status::Ok();
}

std::string Row(const kiln::Tensor& probs, int64_t row) {
  std::string s = "[" + std::to_string(row) + "] = [";
  for (int64_t c = 0; c < quickstart::kClasses; ++c) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%s%.4f", c ? " " : "",
                  probs.data_as<float>()[row * quickstart::kClasses + c]);
    s += buf;
  }
  return s + "]";
}

struct ShapeReport {
  double first_ms = 0, median_ms = 0, max_error = 0;
  int warmup = 0;
  kiln::RuntimeStats before, after_first, after_warmup, after;
};

// Runs one shape: the first call (JIT compile included), warm-up calls until shape-specialized
// kernels are in, then `runs` timed calls. Every result is checked against `want`.
kiln::Status RunShape(const kiln::Runtime& rt, kiln::Context& ctx, int function, Shape shape,
                      const std::vector<kiln::Tensor>& inputs, const std::vector<double>& want,
                      int runs, std::vector<kiln::Tensor>* out, ShapeReport* r) {
  r->before = rt.stats();
  Clock::time_point t0 = Clock::now();
  RETURN_IF_ERROR(ctx.Invoke(function, inputs, out));
  r->first_ms = Ms(Clock::now() - t0);
  r->after_first = rt.stats();
  RETURN_IF_ERROR(Compare(*out, want, shape, &r->max_error));

  // A shape called specialize_after times gets specialized kernels, compiled on a background
  // thread; wait for them so the timing measures the steady state (on 2 cores a background
  // compile also stalls the OpenMP team of a concurrent run).
  r->warmup = std::max(rt.options().dispatch.specialize_after, 0) + 1;
  for (int i = 0; i < r->warmup; ++i) {
    RETURN_IF_ERROR(ctx.Invoke(function, inputs, out));
    RETURN_IF_ERROR(Compare(*out, want, shape, &r->max_error));
  }
  rt.WaitForBackgroundCompiles();
  r->after_warmup = rt.stats();

  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    Clock::time_point t = Clock::now();
    RETURN_IF_ERROR(ctx.Invoke(function, inputs, out));
    times.push_back(Ms(Clock::now() - t));
    RETURN_IF_ERROR(Compare(*out, want, shape, &r->max_error));
  }
  std::sort(times.begin(), times.end());
  r->median_ms = times[times.size() / 2];
  r->after = rt.stats();
  return kiln::Status::Ok();
}

void PrintShape(int step, Shape shape, int runs, const kiln::Tensor& probs, const ShapeReport& r) {
  std::printf(
      "(%d) batch %lld x seq %lld: first call %.2f ms (%lld kernels JIT-compiled in %.1f "
      "ms); %d warm-up calls (%lld variants specialized in the background); steady "
      "median %.3f ms over %d runs\n",
      step, static_cast<long long>(shape.batch), static_cast<long long>(shape.seq), r.first_ms,
      static_cast<long long>(r.after_first.engine.compilations - r.before.engine.compilations),
      1e3 * (r.after_first.engine.compile_seconds - r.before.engine.compile_seconds), r.warmup,
      static_cast<long long>(r.after_warmup.dispatch.specializations -
                             r.after_first.dispatch.specializations),
      r.median_ms, runs);
  std::string rows = Row(probs, 0);
  if (shape.batch > 1) rows += "  " + Row(probs, shape.batch - 1);
  std::printf("    probabilities%s\n", rows.c_str());
  std::printf(
      "    kernel calls at this shape: %lld generic, %lld specialized; max error %.3g of "
      "the tolerance\n",
      static_cast<long long>(r.after.dispatch.misses - r.before.dispatch.misses),
      static_cast<long long>(r.after.dispatch.hits - r.before.dispatch.hits), r.max_error);
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) {
    std::fprintf(stderr,
                 "usage: quickstart [--runs=N] [--external=onednn|none] [--threads=N] "
                 "[--jit_cache=DIR|off] [MODEL.onnx]\n");
    return 2;
  }

  // (1) Compile the ONNX model to .kiln bytes (what `kiln compile` does; kiln::CompileOnnxFile
  //     is the compiler with the built-in external compilers, oneDNN's, registered).
  std::printf("(1) compiling %s (external: %s) ...\n", args.model.c_str(), args.external.c_str());
  std::fflush(stdout);
  kiln::compiler::CompileOptions copts;
  copts.external = args.external;
  copts.progress = [](std::string_view line) {
    std::printf("    %.*s\n", static_cast<int>(line.size()), line.data());
    std::fflush(stdout);
  };
  kiln::compiler::CompileStats cs;
  auto bytes = kiln::CompileOnnxFile(args.model, copts, &cs);
  if (!bytes.ok()) return Fail("compile", bytes.status());
  std::printf(
      "    %d nodes -> %d after passes; %d kernels (%d fused, absorbing %d nodes), "
      "%d shape functions, %d external regions (%d nodes), %d constants (%.0f KiB); "
      "%zu bytes in %.0f ms\n",
      cs.nodes, cs.nodes_after_passes, cs.kernels, cs.fused_kernels, cs.fused_nodes,
      cs.shape_functions, cs.external_regions, cs.external_nodes, cs.constants,
      cs.constant_bytes / 1024.0, bytes->size(), cs.seconds * 1e3);

  // (2) Create the runtime (JIT, vendor runtimes, allocator) and load the executable:
  //     verified, kernels bound (compiled on first use, or loaded from the persistent JIT
  //     cache a previous run filled), oneDNN regions initialized.
  kiln::RuntimeOptions ropts;
  ropts.num_threads = args.threads;
  ropts.jit_cache = args.jit_cache;  // "": $XDG_CACHE_HOME/kiln, else ~/.cache/kiln
  auto rt = kiln::Runtime::Create(ropts);
  if (!rt.ok()) return Fail("runtime", rt.status());
  auto exe = (*rt)->LoadBytes(bytes->data(), bytes->size());
  if (!exe.ok()) return Fail("load", exe.status());
  int entry = (*exe)->FindFunction((*exe)->entry_function());
  if (entry < 0) return Fail("load", kiln::NotFound("no entry function"));
  const kiln::FunctionSignature& sig = (*exe)->signature(entry);
  std::printf("(2) loaded and verified: @%s(%s) -> %s; %d OpenMP threads\n", sig.name.c_str(),
              sig.params[0].ToString().c_str(), sig.results[0].ToString().c_str(),
              (*rt)->num_threads());

  // (3) One context (per thread/request), run at several shapes; back to the first shape at
  //     the end: its kernels are not compiled again.
  auto ctx = (*rt)->NewContext(*exe);
  if (!ctx.ok()) return Fail("context", ctx.status());
  quickstart::Weights weights = quickstart::MakeWeights();
  const Shape shapes[] = {{1, 8}, {4, 32}, {2, 128}, {1, 8}};
  int step = 3;
  std::vector<kiln::Tensor> out;
  for (const Shape& shape : shapes) {
    std::vector<int64_t> ids = quickstart::MakeInputIds(shape.batch, shape.seq, 1);
    std::vector<kiln::Tensor> inputs = {
        kiln::Tensor::Wrap(ids.data(), kiln::DType::kI64, {shape.batch, shape.seq})};
    std::vector<double> want = quickstart::Reference(weights, ids, shape.batch, shape.seq);
    ShapeReport report;
    kiln::Status s = RunShape(**rt, **ctx, entry, shape, inputs, want, args.runs, &out, &report);
    if (!s.ok()) return Fail("run", s);
    PrintShape(step++, shape, args.runs, out[0], report);
  }

  // (4) Totals.
  (*rt)->WaitForBackgroundCompiles();
  kiln::RuntimeStats st = (*rt)->stats();
  std::printf(
      "(%d) all outputs match the C++ reference (rtol 1e-4). JIT: %lld compilations (%.0f ms, "
      "%lld loaded from the object cache), %lld specializations; allocator: %llu "
      "allocations, %.0f%% from cache, peak %.0f KiB\n",
      step, static_cast<long long>(st.engine.compilations), st.engine.compile_seconds * 1e3,
      static_cast<long long>(st.engine.object_cache_hits),
      static_cast<long long>(st.dispatch.specializations),
      static_cast<unsigned long long>(st.allocator.allocations),
      st.allocator.allocations ? 100.0 * st.allocator.cache_hits / st.allocator.allocations : 0.0,
      st.allocator.peak_bytes / 1024.0);
  return 0;
}
