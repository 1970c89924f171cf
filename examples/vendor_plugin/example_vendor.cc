// A toy vendor runtime ("example") as a plugin: a shared library that speaks only the C ABI in
// external/registry/plugin_abi.h and links nothing from kiln — a vendor added without
// rebuilding kiln. Its regions hold one f32 elementwise op; the blob is the op's name:
//   "Add" (2 inputs), "Mul" (2 inputs), "Relu" (1 input); inputs and output of equal shape.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <string_view>

#include "external/registry/plugin_abi.h"

namespace {

constexpr int32_t kF32 = 1;  // kiln DType numbering

enum class Op { kAdd, kMul, kRelu };

struct Region {
  Op op;
};

int64_t Elements(const KilnTensorC& t) {
  int64_t n = 1;
  for (int i = 0; i < t.rank; ++i) n *= t.shape[i];
  return n;
}

bool SameShape(const KilnTensorC& a, const KilnTensorC& b) {
  if (a.rank != b.rank) return false;
  for (int i = 0; i < a.rank; ++i) {
    if (a.shape[i] != b.shape[i]) return false;
  }
  return true;
}

// (1) Init: parse and check the blob once per region.
void* Create(void*, const KilnRegionSpecC* spec, char* error, size_t size) {
  std::string_view blob(reinterpret_cast<const char*>(spec->blob), spec->blob_size);
  Op op;
  int inputs;
  if (blob == "Add") {
    op = Op::kAdd, inputs = 2;
  } else if (blob == "Mul") {
    op = Op::kMul, inputs = 2;
  } else if (blob == "Relu") {
    op = Op::kRelu, inputs = 1;
  } else {
    std::snprintf(error, size, "region '%s': unknown op '%.*s' (expected Add, Mul or Relu)",
                  spec->name, static_cast<int>(blob.size()), blob.data());
    return nullptr;
  }
  if (spec->num_inputs != inputs || spec->num_outputs != 1) {
    std::snprintf(error, size, "region '%s': %.*s takes %d inputs and 1 output, not %d and %d",
                  spec->name, static_cast<int>(blob.size()), blob.data(), inputs, spec->num_inputs,
                  spec->num_outputs);
    return nullptr;
  }
  return new (std::nothrow) Region{op};
}

// Elements computed between two looks at the run's deadline: large enough that the check costs
// nothing, small enough that a long region stops soon after its deadline.
constexpr int64_t kChunk = 1 << 16;

// Checks the tensors and computes, asking `run` (if not null) before each chunk whether to stop.
// Thread-safe (no state is written).
int Compute(const Region& r, const KilnTensorC* args, int32_t num_inputs,
            const KilnRunContextC* run, char* error, size_t size) {
  const KilnTensorC& out = args[num_inputs];
  for (int i = 0; i <= num_inputs; ++i) {
    if (args[i].dtype != kF32 || !SameShape(args[i], out)) {
      std::snprintf(error, size, "operand %d: expected f32 of the output's shape", i);
      return 1;
    }
  }
  const float* a = static_cast<const float*>(args[0].data);
  const float* b = num_inputs > 1 ? static_cast<const float*>(args[1].data) : nullptr;
  float* y = static_cast<float*>(out.data);
  int64_t n = Elements(out);
  for (int64_t start = 0; start < n; start += kChunk) {
    if (run != nullptr && run->should_stop(run->context)) {
      std::snprintf(error, size, "stopped before element %lld of %lld",
                    static_cast<long long>(start), static_cast<long long>(n));
      return KILN_RUN_STOPPED;
    }
    int64_t end = start + kChunk < n ? start + kChunk : n;
    for (int64_t i = start; i < end; ++i) {
      switch (r.op) {
        case Op::kAdd: y[i] = a[i] + b[i]; break;
        case Op::kMul: y[i] = a[i] * b[i]; break;
        case Op::kRelu: y[i] = a[i] > 0.0f ? a[i] : 0.0f; break;
      }
    }
  }
  return 0;
}

// (2) Run: for kilns that know only vendor structs of version 1.
int Run(void* handle, const KilnTensorC* args, int32_t num_inputs, int32_t, char* error, size_t size) {
  return Compute(*static_cast<Region*>(handle), args, num_inputs, nullptr, error, size);
}

// (3) Destroy: once per region.
void Destroy(void* handle) { delete static_cast<Region*>(handle); }

// Reports the region's one step (its op) to `profiler`.
void RecordStep(const Region& r, std::chrono::steady_clock::time_point start,
                const KilnProfilerC* profiler) {
  static constexpr const char* kKinds[] = {"add", "mul", "relu"};
  KilnStepSampleC sample{};
  sample.step = 0;
  sample.kind = kKinds[static_cast<int>(r.op)];
  sample.impl = "scalar_loop";
  sample.shapes = "";
  sample.dur_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count();
  profiler->record(profiler->context, &sample);
}

// (4) Optional (version 2): Run while kiln profiles, reporting its steps (here the one op).
int RunProfiled(void* handle, const KilnTensorC* args, int32_t num_inputs, int32_t,
                const KilnProfilerC* profiler, char* error, size_t size) {
  auto start = std::chrono::steady_clock::now();
  const Region& r = *static_cast<Region*>(handle);
  int rc = Compute(r, args, num_inputs, nullptr, error, size);
  if (rc == 0) RecordStep(r, start, profiler);
  return rc;
}

// (5) Optional (version 3): Run told about the run: stops between chunks once its deadline has
// passed, and reports its step while kiln profiles. kiln calls it instead of (2) and (4).
int RunInContext(void* handle, const KilnTensorC* args, int32_t num_inputs, int32_t,
                 const KilnRunContextC* run, char* error, size_t size) {
  auto start = std::chrono::steady_clock::now();
  const Region& r = *static_cast<Region*>(handle);
  int rc = Compute(r, args, num_inputs, run, error, size);
  if (rc == 0 && run->profiler != nullptr) RecordStep(r, start, run->profiler);
  return rc;
}

// Version 3 of the vendor struct: with run_profiled and run_in_context.
const KilnVendorC kVendor = {KILN_PLUGIN_VENDOR_VERSION, "example", nullptr, Create, Run, Destroy,
                             RunProfiled, RunInContext};

}  // namespace

// (0) Registration: kiln calls this once after loading the library.
extern "C" __attribute__((visibility("default"))) int kiln_plugin_register(
    uint32_t abi_version, KilnRegisterVendorFn register_vendor, void* registry, char* error,
    size_t error_size) {
  if (abi_version != KILN_PLUGIN_ABI_VERSION) {
    std::snprintf(error, error_size, "example vendor speaks plugin ABI %u, kiln offers %u",
                  KILN_PLUGIN_ABI_VERSION, abi_version);
    return 1;
  }
  return register_vendor(registry, &kVendor, error, error_size);
}
