// Execution plans of a oneDNN region: the process's engine, plans' workspace pools, the weight
// cache shared by a region's plans, and running a plan. Building one is plan_builder.h's job.
#include "external/onednn/run/plan.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <unordered_map>

#include "base/deadline.h"
#include "external/onednn/run/plan_builder.h"
#include "oneapi/dnnl/dnnl_debug.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using Kind = Slot::Kind;

constexpr size_t kMaxPooledWorkspaces = 16;

// The short kind name profiles group by.
std::string KindName(dnnl_primitive_kind_t kind) {
  switch (kind) {
    case dnnl_convolution: return "conv";
    case dnnl_deconvolution: return "deconv";
    case dnnl_matmul: return "matmul";
    case dnnl_inner_product: return "inner_product";
    case dnnl_eltwise: return "eltwise";
    case dnnl_binary: return "binary";
    case dnnl_reorder: return "reorder";
    case dnnl_pooling:
    case dnnl_pooling_v2: return "pool";
    case dnnl_softmax:
    case dnnl_softmax_v2:
    case dnnl_logsoftmax: return "softmax";
    case dnnl_layer_normalization: return "layer_norm";
    case dnnl_batch_normalization: return "batch_norm";
    case dnnl_concat: return "concat";
    case dnnl_sum: return "sum";
    default: return dnnl_prim_kind2str(kind);
  }
}

// "1x16x56x56:aBcd8b": dims, then oneDNN's abstract layout tag (dims as letters from the
// outermost stride in, upper case where blocked, then the inner blocks), as ONEDNN_VERBOSE
// prints it. "" for an absent operand.
std::string MdString(const dnnl_memory_desc_t* md) {
  if (md == nullptr || md->ndims <= 0) return "";
  std::string s;
  for (int d = 0; d < md->ndims; ++d) s += (d ? "x" : "") + std::to_string(md->dims[d]);
  if (md->format_kind != dnnl_blocked) return s;
  const dnnl_blocking_desc_t& b = md->format_desc.blocking;
  std::vector<int> order(md->ndims);
  for (int d = 0; d < md->ndims; ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(),
                   [&](int x, int y) { return b.strides[x] > b.strides[y]; });
  std::string tag;
  for (int d : order) {
    bool blocked = false;
    for (int k = 0; k < b.inner_nblks; ++k) blocked = blocked || b.inner_idxs[k] == d;
    tag += static_cast<char>((blocked ? 'A' : 'a') + d);
  }
  for (int k = 0; k < b.inner_nblks; ++k)
    tag += std::to_string(b.inner_blks[k]) + static_cast<char>('a' + b.inner_idxs[k]);
  return s + ":" + tag;
}

// The operands of `pd`: sources and weights, then " -> " and the destination.
std::string Operands(const_dnnl_primitive_desc_t pd) {
  std::string in;
  for (int i = 0;; ++i) {
    std::string src = MdString(dnnl_primitive_desc_query_md(pd, dnnl_query_src_md, i));
    if (src.empty()) break;
    in += (in.empty() ? "" : ", ") + src;
  }
  std::string weights = MdString(dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0));
  if (!weights.empty()) in += (in.empty() ? "" : ", ") + weights;
  return in + " -> " + MdString(dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0));
}

StepInfo DescribeStep(const dnnl::primitive& prim) {
  const_dnnl_primitive_desc_t pd = prim.get_primitive_desc();
  StepInfo info;
  info.kind = KindName(static_cast<dnnl_primitive_kind_t>(prim.get_kind()));
  const char* impl = nullptr;
  if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl)
    info.impl = impl;
  info.reference = info.impl.rfind("ref", 0) == 0 || info.impl.find(":ref") != std::string::npos;
  info.shapes = Operands(pd);
  return info;
}

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// DeadlineExceeded for a run that stops before `step` because the run's deadline passed.
Status StoppedBefore(const Plan& plan, size_t step, const RegionData& data) {
  std::string what;
  int op = plan.steps[step].op;
  if (op >= 0 && static_cast<size_t>(op) < data.region.ops.size())
    what = " (ops[" + std::to_string(op) + "], " + OpKindName(data.region.ops[op].kind) + ")";
  return DeadlineExceeded("the run's deadline passed before primitive " + std::to_string(step) +
                          " of " + std::to_string(plan.steps.size()) + what);
}

// The data handle of `m`, or null for an absent argument.
template <typename T>
T* Data(const memory& m) {
  return m ? static_cast<T*>(m.get_data_handle()) : nullptr;
}

// One step: its oneDNN primitive, or kiln's max pool (blocked_pool.h) or Winograd convolution
// (winograd_conv.h) standing in for it on the memory objects Acquire resolved.
void RunStep(const Step& step, dnnl::stream& stream, const std::unordered_map<int, memory>& args,
             const KilnStepArgs& kiln) {
  if (step.winograd != nullptr) {
    step.winograd->Run(Data<const float>(kiln.src), Data<const float>(kiln.bias),
                       Data<float>(kiln.dst), Data<void>(kiln.scratchpad));
  } else if (step.small_conv != nullptr) {
    step.small_conv->Run(Data<const float>(kiln.src), Data<const float>(kiln.bias),
                         Data<float>(kiln.dst));
  } else if (step.small_oc_conv != nullptr) {
    step.small_oc_conv->Run(Data<const float>(kiln.src), Data<const float>(kiln.bias),
                            Data<float>(kiln.dst));
  } else if (step.max_pool != nullptr) {
    step.max_pool->Run(Data<const float>(kiln.src), Data<float>(kiln.dst));
  } else if (step.channels != nullptr) {
    const float* srcs[kMaxChannelInputs];
    for (size_t i = 0; i < kiln.srcs.size(); ++i) srcs[i] = Data<const float>(kiln.srcs[i]);
    step.channels->Run(srcs, Data<float>(kiln.dst));
  } else if (step.depth_to_space != nullptr) {
    step.depth_to_space->Run(Data<const float>(kiln.src), Data<float>(kiln.dst));
  } else {
    step.prim.execute(stream, args);
  }
}

// The arguments of a step kiln runs, from its argument map (empty for oneDNN's steps).
KilnStepArgs ResolveKilnArgs(const Step& step, const std::unordered_map<int, memory>& args) {
  KilnStepArgs kiln;
  if (step.winograd == nullptr && step.small_conv == nullptr && step.small_oc_conv == nullptr &&
      step.max_pool == nullptr && step.channels == nullptr && step.depth_to_space == nullptr)
    return kiln;
  auto find = [&](int arg) {
    auto it = args.find(arg);
    return it == args.end() ? memory() : it->second;
  };
  kiln.src = find(DNNL_ARG_SRC), kiln.dst = find(DNNL_ARG_DST);
  if (step.channels != nullptr) {
    for (int i = 0; args.count(DNNL_ARG_MULTIPLE_SRC + i); ++i)
      kiln.srcs.push_back(find(DNNL_ARG_MULTIPLE_SRC + i));
  }
  if (step.winograd != nullptr)
    kiln.bias = find(DNNL_ARG_BIAS), kiln.scratchpad = find(DNNL_ARG_SCRATCHPAD);
  if (step.small_conv != nullptr || step.small_oc_conv != nullptr)
    kiln.bias = find(DNNL_ARG_BIAS);
  return kiln;
}

// The team of steps starting at `first` (Step::team), one per thread: each computes its own
// part of the op's output on its own stream.
void RunTeam(const Plan& plan, Workspace& ws, size_t first) {
  const int team = plan.steps[first].team;
  const int threads = std::max(1, std::min(team, omp_get_max_threads()));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (int p = 0; p < team; ++p) {
    const size_t i = first + p;
    RunStep(plan.steps[i], ws.team_streams[p], ws.step_args[i], ws.kiln_args[i]);
    ws.team_streams[p].wait();
  }
}

// OpenMP's team size on the calling thread for a run's steps: the caller's, or 1 while a run
// of consecutive serial steps (Step::threads 1) goes, set only where the steps switch (the
// caller's size read once per run, not twice per step); the caller's again when it ends.
class StepTeam {
 public:
  StepTeam() : caller_(omp_get_max_threads()) {}
  ~StepTeam() { Serial(false); }
  StepTeam(const StepTeam&) = delete;
  StepTeam& operator=(const StepTeam&) = delete;
  void Serial(bool serial) {
    serial = serial && caller_ > 1;
    if (serial == serial_) return;
    omp_set_num_threads(serial ? 1 : caller_);
    serial_ = serial;
  }

 private:
  const int caller_;
  bool serial_ = false;
};

// Runs the steps in order, each waited for (oneDNN's CPU stream runs a primitive to its end
// before execute returns), checking the run's deadline before each: a deadline fires within
// one primitive of its time. With a `profiler`, each step is timed and reported.
Status RunSteps(Plan& plan, Workspace& ws, const RegionData& data, RegionProfiler* profiler,
                std::atomic<int64_t>* primitives_run) {
  const std::vector<StepInfo>* info = profiler != nullptr ? &plan.Describe() : nullptr;
  StepTeam team;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (DeadlinePassed()) return StoppedBefore(plan, i, data);
    int64_t start = info != nullptr ? NowNs() : 0;
    const size_t steps = static_cast<size_t>(std::max(plan.steps[i].team, 1));
    if (steps > 1) {
      team.Serial(false);
      RunTeam(plan, ws, i);
    } else {
      team.Serial(plan.steps[i].threads == 1);  // a step too small to fork: no team
      RunStep(plan.steps[i], ws.stream, ws.step_args[i], ws.kiln_args[i]);
    }
    if (primitives_run != nullptr) primitives_run->fetch_add(steps, std::memory_order_relaxed);
    if (info != nullptr) {
      ws.stream.wait();
      // A team's time is its first step's (its steps overlap; Describe names the team).
      for (size_t k = 0; k < steps; ++k) {
        RegionStepSample sample;
        sample.step = static_cast<int32_t>(i + k);
        sample.kind = (*info)[i + k].kind;
        sample.impl = (*info)[i + k].impl;
        sample.shapes = (*info)[i + k].shapes;
        sample.reference = (*info)[i + k].reference;
        sample.dur_ns = k == 0 ? NowNs() - start : 0;
        profiler->Record(sample);
      }
    }
    i += steps - 1;
  }
  return Status::Ok();
}

}  // namespace

TeamSize::TeamSize(int threads) : previous_(omp_get_max_threads()) {
  set_ = threads > 0 && threads != previous_;
  if (set_) omp_set_num_threads(threads);
}

TeamSize::~TeamSize() {
  if (set_) omp_set_num_threads(previous_);
}

const dnnl::engine& Engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

Workspace::~Workspace() { std::free(buffer); }

std::unique_ptr<Workspace> Plan::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      std::unique_ptr<Workspace> ws = std::move(free_.back());
      free_.pop_back();
      return ws;
    }
  }
  auto ws = std::make_unique<Workspace>();
  ws->buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, AlignUp(work_bytes)));
  if (ws->buffer == nullptr) throw std::bad_alloc();
  // Fault the pages in now: a fresh page costs ~10 us on first touch, inside a run it would
  // land on the request path.
  std::memset(ws->buffer, 0, AlignUp(work_bytes));
  ws->mems.reserve(slots.size());
  for (const Slot& s : slots) {
    void* handle = s.kind == Kind::kWork    ? ws->buffer + s.offset
                   : s.kind == Kind::kConst ? s.ptr
                                            : DNNL_MEMORY_NONE;
    ws->mems.emplace_back(s.md, Engine(), handle);
  }
  // dnnl::memory is a handle: the maps share the objects whose data handles a run sets.
  for (const Step& step : steps) {
    std::unordered_map<int, memory>& args = ws->step_args.emplace_back();
    for (const auto& [arg, slot] : step.args) args.emplace(arg, ws->mems[slot]);
    ws->kiln_args.push_back(ResolveKilnArgs(step, args));
  }
  ws->stream = dnnl::stream(Engine());
  int team = 1;
  for (const Step& step : steps) team = std::max(team, step.team);
  for (int p = 0; p < team && team > 1; ++p) ws->team_streams.emplace_back(Engine());
  return ws;
}

void Plan::Release(std::unique_ptr<Workspace> ws) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() < kMaxPooledWorkspaces) free_.push_back(std::move(ws));
}

void* WeightCache::Get(int op, const memory::desc& plain, const void* data,
                       const memory::desc& want, std::atomic<int64_t>* primitives) {
  return Share(op, plain, data, want, primitives).get();
}

std::shared_ptr<uint8_t> WeightCache::Share(int op, const memory::desc& plain, const void* data,
                                            const memory::desc& want,
                                            std::atomic<int64_t>* primitives) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[op];
  for (auto& [md, bytes] : e.layouts) {
    if (md == want) return bytes;
  }
  if (want == plain) {
    e.layouts.push_back(
        {want, std::shared_ptr<uint8_t>(static_cast<uint8_t*>(const_cast<void*>(data)),
                                        [](uint8_t*) {})});
    return e.layouts.back().second;
  }
  size_t size = AlignUp(std::max<size_t>(want.get_size(), 1));
  std::shared_ptr<uint8_t> bytes(static_cast<uint8_t*>(std::aligned_alloc(kAlign, size)),
                                 [](uint8_t* p) { std::free(p); });
  if (!bytes) throw std::bad_alloc();
  memory src(plain, Engine(), const_cast<void*>(data));
  memory dst(want, Engine(), bytes.get());
  dnnl::stream stream(Engine());
  dnnl::reorder(src, dst).execute(stream, src, dst);
  stream.wait();
  primitives->fetch_add(1, std::memory_order_relaxed);
  e.layouts.push_back({want, bytes});
  return bytes;
}

void WeightCache::Drop(int op, const memory::desc& md) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& layouts = entries_[op].layouts;
  layouts.erase(std::remove_if(layouts.begin(), layouts.end(),
                               [&](const auto& layout) { return layout.first == md; }),
                layouts.end());
}

int WeightCache::LayoutChoice(int op, int64_t bucket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [b, choice] : entries_[op].choices) {
    if (b == bucket) return choice;
  }
  return -1;
}

void WeightCache::SetLayoutChoice(int op, int64_t bucket, int choice) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [b, c] : entries_[op].choices) {
    if (b == bucket) return;  // another thread measured it first; keep one answer
  }
  entries_[op].choices.push_back({bucket, choice});
  measurements_.fetch_add(1, std::memory_order_relaxed);
}

void WeightCache::SeedLayoutChoice(int op, int64_t bucket, int choice) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [b, c] : entries_[op].choices) {
    if (b == bucket) return;
  }
  entries_[op].choices.push_back({bucket, choice});
}

std::vector<TunedLayout> WeightCache::LayoutChoices() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TunedLayout> out;
  for (size_t op = 0; op < entries_.size(); ++op) {
    for (const auto& [bucket, choice] : entries_[op].choices)
      out.push_back({static_cast<int32_t>(op), bucket, static_cast<uint8_t>(choice)});
  }
  return out;
}

bool WeightCache::Preferred(int op, memory::desc* md) {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_[op].layouts.empty()) return false;
  *md = entries_[op].layouts.front().first;
  return true;
}

const TunedShape* FindTunedShape(const RegionTuning& tuning, const std::vector<Dims>& inputs,
                                 int threads) {
  for (const TunedShape& s : tuning.shapes) {
    if (s.threads == threads && s.inputs == inputs) return &s;
  }
  return nullptr;
}

StatusOr<std::shared_ptr<Plan>> BuildPlan(const RegionData& data, WeightCache& weights,
                                          const std::vector<Dims>& inputs,
                                          std::atomic<int64_t>* primitives,
                                          PlanMeasures* measures) {
  const RegionTuning& tuning = data.region.tuning;
  WinogradLimits limits;
  if (tuning.probed) {
    limits.f4_from = tuning.f4_from;  // the weights' limit, whatever the shape
  } else {
    limits = ProbeWinograd(data, weights, inputs);
  }
  const TunedShape* tuned = FindTunedShape(tuning, inputs, omp_get_max_threads());
  if (tuned != nullptr) limits.tuned = &tuned->tiles;
  PlanMeasures local;
  PlanMeasures& m = measures != nullptr ? *measures : local;
  m.probed = limits.probed;
  m.f4_from = limits.f4_from;
  m.tuned = tuned != nullptr;
  if (measures != nullptr) limits.chosen = &m.tiles;
  ASSIGN_OR_RETURN(std::shared_ptr<Plan> plan,
                   Builder(data, weights, primitives, limits).Build(inputs));
  // One workspace ready before the first run (plans of static shapes are built at load).
  plan->Release(plan->Acquire());
  return plan;
}

const std::vector<StepInfo>& Plan::Describe() {
  std::call_once(described_, [this] {
    for (const Step& step : steps) {
      info_.push_back(DescribeStep(step.prim));
      if (step.max_pool != nullptr) info_.back().impl = BlockedMaxPool::ImplName();
      if (step.winograd != nullptr) info_.back().impl = step.winograd->ImplName();
      if (step.small_conv != nullptr) info_.back().impl = step.small_conv->ImplName();
      if (step.small_oc_conv != nullptr) info_.back().impl = step.small_oc_conv->ImplName();
      if (step.team > 1) info_.back().impl += " team of " + std::to_string(step.team);
      auto md = [&](int arg) {
        for (const auto& [a, slot] : step.args) {
          if (a == arg) return MdString(&slots[slot].md.data);
        }
        return std::string();
      };
      if (step.fused_dw >= 0) {  // "src, 1x1 weights, dw weights -> dst"
        StepInfo& info = info_.back();
        info.kind = "conv 1x1 + dw 3x3";
        const std::string dw = md(DNNL_ARG_ATTR_POST_OP_DW | DNNL_ARG_WEIGHTS);
        const size_t arrow = info.shapes.find(" -> ");
        if (!dw.empty() && arrow != std::string::npos) info.shapes.insert(arrow, ", " + dw);
      }
      if (step.depth_to_space != nullptr) {
        StepInfo& info = info_.back();
        info.kind = "depth_to_space";
        info.impl = DepthToSpace::ImplName();
        info.shapes = md(DNNL_ARG_SRC) + " -> " + md(DNNL_ARG_DST);
      }
      if (step.channels != nullptr) {
        StepInfo& info = info_.back();
        info.kind = "channels";
        info.impl = ChannelGather::ImplName();
        std::string in;
        for (int i = 0; !md(DNNL_ARG_MULTIPLE_SRC + i).empty(); ++i)
          in += (i ? ", " : "") + md(DNNL_ARG_MULTIPLE_SRC + i);
        info.shapes = in + " -> " + md(DNNL_ARG_DST);
      }
    }
  });
  return info_;
}

Status ExecutePlan(Plan& plan, const RegionData& data, const Tensor* const* args, int num_inputs,
                   int num_outputs, RegionProfiler* profiler,
                   std::atomic<int64_t>* primitives_run) {
  std::unique_ptr<Workspace> ws = plan.Acquire();
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot& s = plan.slots[i];
    if (s.kind == Kind::kInput) ws->mems[i].set_data_handle(args[s.index]->data());
    if (s.kind == Kind::kOutput) ws->mems[i].set_data_handle(args[num_inputs + s.index]->data());
  }
  Status status = RunSteps(plan, *ws, data, profiler, primitives_run);
  ws->stream.wait();
  plan.Release(std::move(ws));
  return status;
}

}  // namespace kiln::onednn::internal
