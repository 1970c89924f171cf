// Region trials: capture each region's inputs through a recording ExternalProvider, then time
// the vendor's runtime and the fallback function on them.
#include "vm/region_trial.h"

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <utility>

#include "vm/builder.h"
#include "vm/context.h"

namespace kiln {
namespace {

// A region's first call as the interpreter made it: copies of its inputs, and its outputs'
// dtypes and shapes.
struct Capture {
  bool done = false;
  std::vector<Tensor> inputs;
  std::vector<std::pair<DType, Shape>> outputs;
};

// The vendor's runtime, copying the arguments of its first call into a Capture.
class RecordingRegion : public TensorFunction {
 public:
  RecordingRegion(std::unique_ptr<TensorFunction> inner, Capture* capture, Allocator* allocator)
      : inner_(std::move(inner)), capture_(capture), allocator_(allocator) {}
  Status Run(const Tensor* const* args, int num_inputs, int num_outputs) override {
    if (!capture_->done) RETURN_IF_ERROR(Record(args, num_inputs, num_outputs));
    return inner_->Run(args, num_inputs, num_outputs);
  }
  Status RunProfiled(const Tensor* const* args, int num_inputs, int num_outputs,
                     RegionProfiler* profiler) override {
    if (!capture_->done) RETURN_IF_ERROR(Record(args, num_inputs, num_outputs));
    return inner_->RunProfiled(args, num_inputs, num_outputs, profiler);
  }
  void Prefetch() override { inner_->Prefetch(); }

 private:
  Status Record(const Tensor* const* args, int num_inputs, int num_outputs) {
    for (int i = 0; i < num_inputs; ++i) {
      ASSIGN_OR_RETURN(Tensor copy, Tensor::Allocate(*allocator_, args[i]->dtype(), args[i]->shape()));
      if (copy.NumBytes() > 0) std::memcpy(copy.data(), args[i]->data(), copy.NumBytes());
      capture_->inputs.push_back(std::move(copy));
    }
    for (int i = 0; i < num_outputs; ++i) {
      const Tensor* t = args[num_inputs + i];
      capture_->outputs.emplace_back(t->dtype(), t->shape());
    }
    capture_->done = true;
    return Status::Ok();
  }

  std::unique_ptr<TensorFunction> inner_;
  Capture* capture_;
  Allocator* allocator_;
};

// `inner`, with every region it creates wrapped in a RecordingRegion.
class RecordingProvider : public ExternalProvider {
 public:
  RecordingProvider(std::shared_ptr<ExternalProvider> inner, std::vector<Capture>* captures,
                    Allocator* allocator)
      : inner_(std::move(inner)), captures_(captures), allocator_(allocator) {}
  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) override {
    ASSIGN_OR_RETURN(std::unique_ptr<TensorFunction> fn, inner_->CreateRegion(spec));
    return std::unique_ptr<TensorFunction>(
        new RecordingRegion(std::move(fn), &(*captures_)[spec.index], allocator_));
  }
  bool HasVendor(std::string_view vendor) const override { return inner_->HasVendor(vendor); }

 private:
  std::shared_ptr<ExternalProvider> inner_;
  std::vector<Capture>* captures_;
  Allocator* allocator_;
};

uint16_t ToHalf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, 4);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
  if (exp <= 0) return sign;  // below f16's normal range (|x| < 2^-14): zero
  return static_cast<uint16_t>(sign | (exp << 10) | ((bits >> 13) & 0x3ff));
}

// Fills `t` with values that keep any model's numerics sane: floats uniform in [-1, 1],
// integers 0 or 1 (valid indices, non-zero-heavy masks), booleans alternating.
void Fill(Tensor& t, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  const int64_t n = t.NumElements();
  auto* p = static_cast<uint8_t*>(t.data());
  const size_t width = DTypeSize(t.dtype());
  for (int64_t i = 0; i < n; ++i) {
    uint8_t* e = p + i * width;
    switch (t.dtype()) {
      case DType::kF32: {
        float v = uniform(rng);
        std::memcpy(e, &v, 4);
        break;
      }
      case DType::kF64: {
        double v = uniform(rng);
        std::memcpy(e, &v, 8);
        break;
      }
      case DType::kF16: {
        uint16_t v = ToHalf(uniform(rng));
        std::memcpy(e, &v, 2);
        break;
      }
      case DType::kBF16: {
        float f = uniform(rng);
        uint32_t bits;
        std::memcpy(&bits, &f, 4);
        uint16_t v = static_cast<uint16_t>(bits >> 16);
        std::memcpy(e, &v, 2);
        break;
      }
      default:  // integers (little-endian 0 or 1) and booleans
        std::memset(e, 0, width);
        e[0] = static_cast<uint8_t>(i & 1);
    }
  }
}

StatusOr<std::vector<Tensor>> SyntheticInputs(const FunctionSignature& sig,
                                              const std::map<std::string, int64_t>& dims,
                                              Allocator& allocator) {
  std::mt19937 rng(20261127);
  std::vector<Tensor> inputs;
  for (const ValueSpec& p : sig.params) {
    if (p.is_tuple) return InvalidArgument("parameter " + p.ToString() + " is a tuple");
    int64_t shape[kMaxRank];
    for (size_t d = 0; d < p.shape.size() && d < kMaxRank; ++d) {
      const DimSpec& ds = p.shape[d];
      auto it = dims.find(ds.symbol);
      shape[d] = ds.fixed() ? ds.value : it != dims.end() ? it->second : 1;
    }
    ASSIGN_OR_RETURN(Shape s, Shape::Make(shape, static_cast<int>(p.shape.size())));
    ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(allocator, p.dtype, s));
    Fill(t, rng);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

// "x 1x3x224x224, 1x64" (each input's dims; scalars "scalar").
std::string Shapes(const std::vector<Tensor>& tensors) {
  std::string s;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i) s += ", ";
    const Shape& shape = tensors[i].shape();
    if (shape.rank() == 0) s += "scalar";
    for (int d = 0; d < shape.rank(); ++d) s += (d ? "x" : "") + std::to_string(shape[d]);
  }
  return s;
}

std::string Ms(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms < 10 ? "%.3f" : "%.1f", ms);
  return buf;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Times region `i` (vendor `vendor`, fallback function `fallback`) on its capture.
Status Time(int i, TensorFunction& vendor, int fallback, const Capture& capture, Context& ctx,
            Allocator& allocator, const RegionTrialOptions& options, RegionTrial* trial) {
  std::vector<Tensor> outputs, results;
  for (const auto& [dtype, shape] : capture.outputs) {
    ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(allocator, dtype, shape));
    outputs.push_back(std::move(t));
  }
  std::vector<const Tensor*> args;
  for (const Tensor& t : capture.inputs) args.push_back(&t);
  for (const Tensor& t : outputs) args.push_back(&t);
  const int ni = static_cast<int>(capture.inputs.size()), no = static_cast<int>(outputs.size());
  const bool cpu = options.clock == RegionTrialOptions::Clock::kProcessCpu;
  auto now_ms = [cpu] {
    timespec ts;
    clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
  };
  auto run_region = [&]() -> StatusOr<double> {
    double start = now_ms();
    RETURN_IF_ERROR(vendor.Run(args.data(), ni, no));
    return now_ms() - start;
  };
  auto run_fallback = [&]() -> StatusOr<double> {
    double start = now_ms();
    RETURN_IF_ERROR(ctx.Invoke(fallback, capture.inputs, &results));
    return now_ms() - start;
  };
  for (int k = 0; k < options.warmup_calls; ++k) {
    RETURN_IF_ERROR(run_region().status());
    RETURN_IF_ERROR(run_fallback().status());
  }
  if (options.settle) options.settle();
  RETURN_IF_ERROR(run_region().status());
  RETURN_IF_ERROR(run_fallback().status());
  // One round: timed_calls of each, alternated; whether the fallback won it.
  std::vector<double> region_ms, fallback_ms;
  auto round = [&]() -> StatusOr<bool> {
    std::vector<double> r, f;
    for (int k = 0; k < std::max(1, options.timed_calls); ++k) {
      for (int side = 0; side < 2; ++side) {
        bool region_now = (side == 0) == (k % 2 == 0);
        ASSIGN_OR_RETURN(double ms, region_now ? run_region() : run_fallback());
        (region_now ? r : f).push_back(ms);
      }
    }
    region_ms.insert(region_ms.end(), r.begin(), r.end());
    fallback_ms.insert(fallback_ms.end(), f.begin(), f.end());
    return Median(f) <= options.margin * Median(r);
  };
  // A win must hold in a second round too: a burst of load on a shared host can slow one side
  // for a whole round, and a mark costs more (the vendor is never tried at load) than a miss.
  ASSIGN_OR_RETURN(bool won, round());
  if (won) {
    ASSIGN_OR_RETURN(won, round());
  }
  trial->measured = true;
  trial->region_ms = Median(region_ms);
  trial->fallback_ms = Median(fallback_ms);
  trial->fallback_faster = won;
  trial->note = "fallback " + Ms(trial->fallback_ms) + " ms vs region " + Ms(trial->region_ms) +
                (cpu ? " ms (CPU) at " : " ms at ") + Shapes(capture.inputs) +
                (options.threads.empty() ? "" : ", " + options.threads);
  (void)i;
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<RegionTrial>> TrialRegions(const uint8_t* data, size_t size,
                                                const RegionTrialOptions& options) {
  Allocator& allocator = options.allocator ? *options.allocator : DefaultAllocator();
  LoadOptions load = options.load;
  if (load.externals == nullptr) return InvalidArgument("region trials: no external provider");
  load.ignore_tuned_fallback = true;
  load.require_vendor = false;
  // Declines and absences are reported in the trials' notes, not as notices.
  load.notice = [](const std::string&) {};
  // Sized before the load: regions are created during it and keep pointers into the vector.
  auto captures = std::make_shared<std::vector<Capture>>();
  {
    ASSIGN_OR_RETURN(std::shared_ptr<const Executable> probe,
                     Executable::LoadBytes(data, size, LoadOptions{nullptr, nullptr, false}));
    const auto* regions = probe->root().external_regions();
    captures->resize(regions ? regions->size() : 0);
  }
  load.externals = std::make_shared<RecordingProvider>(load.externals, captures.get(), &allocator);
  ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe, Executable::LoadBytes(data, size, load));
  ContextOptions context_options;
  context_options.allocator = &allocator;
  ASSIGN_OR_RETURN(std::unique_ptr<Context> ctx, Context::Create(exe, context_options));
  int entry = exe->FindFunction(exe->entry_function());
  if (entry < 0) {
    return InvalidArgument("region trials: no entry function '" +
                           std::string(exe->entry_function()) + "'");
  }
  ASSIGN_OR_RETURN(std::vector<Tensor> inputs,
                   SyntheticInputs(exe->signature(entry), options.dims, allocator));
  std::vector<Tensor> outputs;
  Status run = ctx->Invoke(entry, inputs, &outputs);
  if (!run.ok()) return run.WithContext("region trials: running '" + exe->signature(entry).name + "'");

  std::vector<RegionTrial> trials;
  const auto* regions = exe->root().external_regions();
  for (size_t i = 0; regions && i < regions->size(); ++i) {
    const fb::ExternalRegion* r = regions->Get(i);
    RegionTrial trial;
    trial.region = static_cast<int>(i);
    trial.name = r->name()->str();
    TensorFunction* vendor = exe->external_region(static_cast<int>(i));
    const Capture& capture = (*captures)[i];
    if (r->fallback() < 0) {
      trial.note = "not measured: the region has no fallback function";
    } else if (vendor == nullptr) {
      trial.note = "not measured: " + exe->external_fallback_reason(static_cast<int>(i));
    } else if (!capture.done) {
      trial.note = "not measured: the entry function did not run the region at the tuned shape";
    } else {
      Status s = Time(static_cast<int>(i), *vendor, r->fallback(), capture, *ctx, allocator,
                      options, &trial);
      if (!s.ok()) {
        return s.WithContext("region trials: external_regions[" + std::to_string(i) + "] '" +
                             trial.name + "'");
      }
    }
    trials.push_back(std::move(trial));
  }
  return trials;
}

StatusOr<std::vector<uint8_t>> RecordRegionTrials(const uint8_t* data, size_t size,
                                                  const std::vector<RegionTrial>& trials) {
  ASSIGN_OR_RETURN(std::shared_ptr<const Executable> exe,
                   Executable::LoadBytes(data, size, LoadOptions{nullptr, nullptr, false}));
  ASSIGN_OR_RETURN(std::unique_ptr<ExecutableBuilder> builder,
                   ExecutableBuilder::FromExecutable(*exe));
  for (const RegionTrial& t : trials) {
    if (t.region < 0 || t.region >= builder->num_external_regions()) {
      return InvalidArgument("region trial for region " + std::to_string(t.region) +
                             ": out of range [0, " +
                             std::to_string(builder->num_external_regions()) + ")");
    }
    builder->SetRegionTune(t.region, t.fallback_faster, t.note);
  }
  return builder->Finish();
}

}  // namespace kiln
