// The oneDNN vendor runtime: region creation (blob + constants checked once), a bounded LRU of
// execution plans per input-shape key, and thread-safe runs.
#include "external/onednn/run/runtime.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>

#include "external/onednn/run/plan.h"
#include "oneapi/dnnl/dnnl_debug.h"
#include "external/onednn/region.h"

namespace kiln::onednn {
namespace {

using internal::Dims;
using internal::Plan;
using internal::RegionData;

// "[?, 8, 12, 12]" (-1: a symbolic dim).
std::string DimsString(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i)
    s += (i ? ", " : "") + (d[i] < 0 ? std::string("?") : std::to_string(d[i]));
  return s + "]";
}

// The input dims of the plan a region builds at creation (`*dims`: static dims, a symbolic
// batch at 1), or why it has none ("input 0 dim 1 is symbolic").
std::string CreationDims(const RegionProgram& r, std::vector<Dims>* dims) {
  dims->clear();
  for (size_t k = 0; k < r.inputs.size(); ++k) {
    Dims d = r.inputs[k].dims;
    for (size_t i = 0; i < d.size(); ++i) {
      if (d[i] >= 0) continue;
      if (i != 0) return "input " + std::to_string(k) + " dim " + std::to_string(i) + " is symbolic";
      d[i] = 1;
    }
    dims->push_back(std::move(d));
  }
  return "";
}

class RegionImpl : public OneDnnRegion {
 public:
  RegionImpl(RegionData data, OneDnnOptions options)
      : data_(std::move(data)), options_(options), weights_(data_.region.ops.size()) {
    for (const TunedLayout& l : data_.region.tuning.layouts)
      weights_.SeedLayoutChoice(l.op, l.bucket, l.choice);
  }

  // Builds the plan for the inputs' static dims (batch 1 where the batch dim is symbolic), so
  // weights are reordered at creation. Skipped when another dim is symbolic.
  Status Prepare(bool may_decline) {
    if (may_decline && options_.decline_reference_impls)
      RETURN_IF_ERROR(internal::DeclineSaturatingInt8(data_));
    std::vector<Dims> dims;
    if (!CreationDims(data_.region, &dims).empty()) return Status::Ok();
    ASSIGN_OR_RETURN(std::shared_ptr<Plan> plan, GetPlan(dims));
    return may_decline && options_.decline_reference_impls ? DeclineReferenceImpls(*plan)
                                                           : Status::Ok();
  }

  Status Run(const Tensor* const* args, int num_inputs, int num_outputs) override {
    return Named(CheckAndRun(args, num_inputs, num_outputs, nullptr));
  }

  // Run, with one sample per oneDNN primitive (ExecutePlan).
  Status RunProfiled(const Tensor* const* args, int num_inputs, int num_outputs,
                     RegionProfiler* profiler) override {
    return Named(CheckAndRun(args, num_inputs, num_outputs, profiler));
  }

  RegionStats stats() const override {
    RegionStats s;
    s.plans_built = plans_built_.load();
    s.primitives_created = primitives_.load();
    s.plans_evicted = plans_evicted_.load();
    s.runs = runs_.load();
    s.primitives_run = primitives_run_.load();
    s.layouts_measured = weights_.measurements();
    s.probes_run = probes_run_.load();
    s.tuned_plans = tuned_plans_.load();
    std::lock_guard<std::mutex> lock(mu_);
    s.cached_plans = static_cast<int64_t>(lru_.size());
    for (const auto& [key, plan] : lru_) {
      s.max_workspace_bytes = std::max<int64_t>(s.max_workspace_bytes, plan->work_bytes);
      s.residual_copies += plan->residual_copies;
      s.concats_in_place += plan->concats_in_place;
      s.plan_steps += static_cast<int64_t>(plan->steps.size());
      for (const internal::Step& step : plan->steps) s.serial_steps += step.threads == 1 ? 1 : 0;
    }
    return s;
  }

 private:
  using Key = std::vector<int64_t>;
  using Lru = std::list<std::pair<Key, std::shared_ptr<Plan>>>;

  // Checks the arguments against the blob (counts, dtypes, ranks, static dims), finds or builds
  // the plan for the input shapes, checks the outputs against what it computes, then runs it
  // (reporting its steps to `profiler` if not null).
  Status CheckAndRun(const Tensor* const* args, int num_inputs, int num_outputs,
                     RegionProfiler* profiler) {
    const RegionProgram& r = data_.region;
    if (num_inputs != static_cast<int>(r.inputs.size()) ||
        num_outputs != static_cast<int>(r.outputs.size()))
      return InvalidArgument("called with " + std::to_string(num_inputs) + " inputs and " +
                             std::to_string(num_outputs) + " outputs, expects " +
                             std::to_string(r.inputs.size()) + " and " +
                             std::to_string(r.outputs.size()));
    std::vector<Dims> dims(num_inputs);
    for (int i = 0; i < num_inputs; ++i) {
      const Tensor& t = *args[i];
      const BoundTensor& b = r.inputs[i];
      RETURN_IF_ERROR(CheckTensor(t, r.tensors[b.tensor].dtype, "input " + std::to_string(i)));
      bool ok = t.rank() == static_cast<int>(b.dims.size());
      for (int k = 0; ok && k < t.rank(); ++k) ok = b.dims[k] < 0 || b.dims[k] == t.dim(k);
      if (!ok)
        return InvalidArgument("input " + std::to_string(i) + " is " + t.TypeString() +
                               ", the region was compiled for " + DimsString(b.dims));
      dims[i].assign(t.shape().data(), t.shape().data() + t.rank());
    }
    ASSIGN_OR_RETURN(std::shared_ptr<Plan> plan, GetPlan(dims));
    for (int i = 0; i < num_outputs; ++i) {
      const Tensor& t = *args[num_inputs + i];
      RETURN_IF_ERROR(CheckTensor(t, r.tensors[r.outputs[i]].dtype, "output " + std::to_string(i)));
      const Dims& want = plan->output_dims[i];
      if (Dims(t.shape().data(), t.shape().data() + t.rank()) != want)
        return InvalidArgument("output " + std::to_string(i) + " is " + t.TypeString() +
                               ", the region computes " + DimsString(want));
    }
    runs_.fetch_add(1, std::memory_order_relaxed);
    bool nothing_to_write = true;
    for (const Dims& d : plan->output_dims)
      nothing_to_write = nothing_to_write && std::find(d.begin(), d.end(), 0) != d.end();
    if (nothing_to_write) return Status::Ok();
    try {
      return internal::ExecutePlan(*plan, data_, args, num_inputs, num_outputs, profiler,
                                   &primitives_run_);
    } catch (const dnnl::error& e) {
      return Internal(std::string("oneDNN execution failed: ") + e.what());
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("out of memory for the region's workspace");
    }
  }

  Status Named(Status s) const {
    if (!s.ok()) return s.WithContext("region '" + data_.name + "'");
    return s;
  }

  // Declined, naming the costliest, when the steps with one of oneDNN's reference
  // implementations (impl_info_str "ref:any", ...) write at least
  // OneDnnOptions::reference_share_to_decline of the elements all steps write (the rule and
  // its reasons: runtime.h). Concat is exempt: its reference implementation is the copy any
  // concat is (the zoo's densenet121 and shufflenet_v2 ran 1.4-1.7x slower when their conv
  // regions fell back over it).
  Status DeclineReferenceImpls(const Plan& plan) const {
    double total = 0, reference = 0, worst = -1;
    const internal::Step* costliest = nullptr;
    std::string costliest_impl;
    for (const internal::Step& step : plan.steps) {
      double elements = ElementsWritten(plan, step);
      total += elements;
      if (step.prim.get_kind() == dnnl::primitive::kind::concat) continue;
      const char* impl = nullptr;
      if (dnnl_primitive_desc_query(step.prim.get_primitive_desc(), dnnl_query_impl_info_str, 0,
                                    &impl) != dnnl_success || impl == nullptr ||
          std::string(impl).find("ref") == std::string::npos) {
        continue;
      }
      reference += elements;
      if (elements > worst) {
        worst = elements;
        costliest = &step;
        costliest_impl = impl;
      }
    }
    if (!costliest || reference < options_.reference_share_to_decline * total) return Status::Ok();
    std::string op = "a layout reorder";
    if (costliest->op >= 0) {
      const Op& o = data_.region.ops[costliest->op];
      op = "ops[" + std::to_string(costliest->op) + "] (" + OpKindName(o.kind) + ")";
    }
    char share[32];
    std::snprintf(share, sizeof(share), "%.3g%%", 100.0 * reference / std::max(total, 1.0));
    return Declined(op + " would run oneDNN's reference implementation '" + costliest_impl +
                    "' (" +
                    dnnl_prim_kind2str(static_cast<dnnl_primitive_kind_t>(
                        costliest->prim.get_kind())) +
                    "); reference code would write " + share + " of the region's elements");
  }

  // The elements (padding included) of the step's destination: the unit of the cost estimate.
  static double ElementsWritten(const Plan& plan, const internal::Step& step) {
    for (const auto& [arg, slot] : step.args) {
      if (arg == DNNL_ARG_DST) {
        return static_cast<double>(plan.slots[slot].md.get_size()) / sizeof(float);
      }
    }
    return 0;
  }

  static Status CheckTensor(const Tensor& t, DType dtype, const std::string& what) {
    if (t.dtype() != dtype)
      return InvalidArgument(what + " is " + t.TypeString() + ", the region expects " +
                             DTypeShortName(dtype));
    if (t.empty()) return InvalidArgument(what + " has no storage");
    if (!t.IsContiguous()) return InvalidArgument(what + " is not contiguous");
    return Status::Ok();
  }

  // The plan for `dims`: a short locked lookup; on a miss the plan is built unlocked (another
  // thread building the same key concurrently is harmless: the first insert wins).
  StatusOr<std::shared_ptr<Plan>> GetPlan(const std::vector<Dims>& dims) {
    Key key;
    for (const Dims& d : dims) {
      key.push_back(static_cast<int64_t>(d.size()));
      key.insert(key.end(), d.begin(), d.end());
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = index_.find(key);
      if (it != index_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
      }
    }
    StatusOr<std::shared_ptr<Plan>> built = Status(Internal("unreachable"));
    internal::PlanMeasures measures;
    try {
      built = internal::BuildPlan(data_, weights_, dims, &primitives_, &measures);
    } catch (const dnnl::error& e) {
      return Internal(std::string("oneDNN: ") + e.what());
    } catch (const std::bad_alloc&) {
      return ResourceExhausted("out of memory reordering weights");
    }
    if (!built.ok()) return built.status();
    plans_built_.fetch_add(1, std::memory_order_relaxed);
    if (measures.probed) probes_run_.fetch_add(1, std::memory_order_relaxed);
    if (measures.tuned) tuned_plans_.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = index_.find(key);
    if (it != index_.end()) return it->second->second;
    lru_.emplace_front(key, *built);
    index_.emplace(std::move(key), lru_.begin());
    while (static_cast<int>(lru_.size()) > std::max(options_.max_cached_shapes, 1)) {
      index_.erase(lru_.back().first);
      lru_.pop_back();
      plans_evicted_.fetch_add(1, std::memory_order_relaxed);
    }
    return *built;
  }

  RegionData data_;
  OneDnnOptions options_;
  internal::WeightCache weights_;
  mutable std::mutex mu_;
  Lru lru_;
  std::map<Key, Lru::iterator> index_;
  std::atomic<int64_t> plans_built_{0}, primitives_{0}, plans_evicted_{0}, runs_{0};
  std::atomic<int64_t> primitives_run_{0};  // RegionStats::primitives_run
  std::atomic<int64_t> probes_run_{0}, tuned_plans_{0};
};

// Checks the spec against the decoded blob; binds constants by reference.
StatusOr<RegionData> Bind(const ExternalRegionSpec& spec) {
  RegionData data;
  data.name = std::string(spec.name);
  ASSIGN_OR_RETURN(data.region, DecodeRegion(spec.blob, spec.blob_size));
  const RegionProgram& r = data.region;
  if (spec.num_inputs != static_cast<int>(r.inputs.size()) ||
      spec.num_outputs != static_cast<int>(r.outputs.size()))
    return InvalidArgument("the executable declares " + std::to_string(spec.num_inputs) +
                           " inputs and " + std::to_string(spec.num_outputs) +
                           " outputs, the blob has " + std::to_string(r.inputs.size()) + " and " +
                           std::to_string(r.outputs.size()));
  for (size_t i = 0; i < r.tensors.size(); ++i) {
    DType t = r.tensors[i].dtype;
    if (t != DType::kF32 && t != DType::kU8 && t != DType::kI8 && t != DType::kI32)
      return Unsupported("tensor " + std::to_string(i) + " is " + DTypeShortName(t) +
                         "; the oneDNN runtime runs f32, and u8 / s8 / s32 in integer ops");
  }
  if (spec.constants.size() != r.constants.size())
    return InvalidArgument("the blob refers to " + std::to_string(r.constants.size()) +
                           " constants, the executable provides " +
                           std::to_string(spec.constants.size()));
  data.constant_data.assign(r.tensors.size(), nullptr);
  for (size_t i = 0; i < r.constants.size(); ++i) {
    const Tensor& t = spec.constants[i];
    const BoundTensor& c = r.constants[i];
    Dims dims(t.shape().data(), t.shape().data() + t.rank());
    DType want = r.tensors[c.tensor].dtype;
    if (t.empty() || t.dtype() != want || dims != c.dims || !t.IsContiguous())
      return InvalidArgument("constant " + std::to_string(i) + " is " +
                             (t.empty() ? std::string("missing") : t.TypeString()) +
                             ", the blob expects a contiguous " + DTypeShortName(want) + " of " +
                             std::to_string(c.dims.size()) + " dims " + DimsString(c.dims));
    data.constant_data[c.tensor] = t.data();
    data.constants.push_back(t);
  }
  return data;
}

}  // namespace

StatusOr<std::unique_ptr<TensorFunction>> OneDnnRuntime::CreateRegion(
    const ExternalRegionSpec& spec) {
  std::string where = "region '" + std::string(spec.name) + "'";
  StatusOr<RegionData> data = Bind(spec);
  if (data.ok()) data->matmul_weight_layout = options_.matmul_weight_layout;
  if (!data.ok()) return data.status().WithContext(where);
  auto region = std::make_unique<RegionImpl>(std::move(*data), options_);
  Status s = region->Prepare(spec.may_decline);
  if (!s.ok()) return s.WithContext(where);
  return std::unique_ptr<TensorFunction>(std::move(region));
}

StatusOr<std::string> OneDnnRuntime::Describe(const uint8_t* blob, size_t size) const {
  return DescribeRegion(blob, size);
}

StatusOr<std::vector<uint8_t>> TuneRegion(const ExternalRegionSpec& spec, OneDnnOptions options,
                                          std::string* note) {
  const std::string where = "region '" + std::string(spec.name) + "'";
  StatusOr<RegionData> bound = Bind(spec);
  if (!bound.ok()) return bound.status().WithContext(where);
  RegionData& data = *bound;
  data.matmul_weight_layout = options.matmul_weight_layout;
  data.region.tuning = {};  // measure afresh
  std::vector<Dims> dims;
  const std::string why = CreationDims(data.region, &dims);
  if (!why.empty()) {
    if (note != nullptr) *note = why + ": pin it with --dim to tune";
    return std::vector<uint8_t>(spec.blob, spec.blob + spec.blob_size);
  }
  internal::WeightCache weights(data.region.ops.size());
  std::atomic<int64_t> primitives{0};
  internal::PlanMeasures measured;
  StatusOr<std::shared_ptr<Plan>> plan = Status(Internal("unreachable"));
  try {
    plan = internal::BuildPlan(data, weights, dims, &primitives, &measured);
  } catch (const dnnl::error& e) {
    return Internal(std::string("oneDNN: ") + e.what()).WithContext(where);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("out of memory reordering weights").WithContext(where);
  }
  if (!plan.ok()) return plan.status().WithContext(where);
  RegionTuning& t = data.region.tuning;
  t.probed = measured.probed;
  t.f4_from = measured.f4_from;
  t.shapes.push_back({omp_get_max_threads(), dims, measured.tiles});
  t.layouts = weights.LayoutChoices();
  if (Status s = ValidateRegion(data.region); !s.ok())
    return Internal("tuning records fail validation: " + s.message()).WithContext(where);
  if (note != nullptr) {
    int count[5] = {0, 0, 0, 0, 0};
    for (const TunedTile& tile : measured.tiles) ++count[tile.tile];
    *note = "tuned at " + std::to_string(omp_get_max_threads()) + " threads: " +
            (t.probed ? "F(4x4) from ops[" + std::to_string(t.f4_from) + "], " : "") +
            std::to_string(measured.tiles.size()) + " Conv tiles (F4 " +
            std::to_string(count[4]) + ", F2 " + std::to_string(count[2]) + ", oneDNN " +
            std::to_string(count[0]) + "), " + std::to_string(t.layouts.size()) +
            " MatMul layouts";
  }
  return EncodeRegion(data.region);
}

Status RegisterOneDnn(ExternalRegistry& registry, OneDnnOptions options) {
  return registry.Register(kVendorName, std::make_shared<OneDnnRuntime>(options));
}

}  // namespace kiln::onednn
