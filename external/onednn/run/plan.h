// Execution plans of a oneDNN region (internal to external/onednn/run): for one set of input
// shapes, the primitives, the memory slots they read and write, and a pool of per-call
// workspaces.
#ifndef KILN_EXTERNAL_ONEDNN_RUN_PLAN_H_
#define KILN_EXTERNAL_ONEDNN_RUN_PLAN_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "external/onednn/region.h"
#include "external/onednn/run/blocked_pool.h"
#include "external/onednn/run/channel_gather.h"
#include "external/onednn/run/depth_to_space.h"
#include "external/onednn/run/runtime.h"
#include "external/onednn/run/small_conv.h"
#include "external/onednn/run/small_oc_conv.h"
#include "external/onednn/run/winograd_conv.h"
#include "oneapi/dnnl/dnnl.hpp"
#include "base/status.h"
#include "base/tensor.h"
#include "vm/providers.h"

namespace kiln::onednn::internal {

using Dims = std::vector<int64_t>;

/// The process's CPU engine (created on first use; thread-safe).
const dnnl::engine& Engine();

/// Sets OpenMP's team size on the calling thread to `threads` while alive (0: leaves it), then
/// restores it. oneDNN splits a primitive's work for the team size at its creation (JIT
/// convolutions, GEMMs) or its run (eltwise, binary, reorders): both are made under one.
class TeamSize {
 public:
  explicit TeamSize(int threads);
  ~TeamSize();
  TeamSize(const TeamSize&) = delete;
  TeamSize& operator=(const TeamSize&) = delete;

 private:
  int previous_;
  bool set_;
};

/// A memory the plan refers to: a region input or output (bound per call), a constant (fixed),
/// or a range of the per-call workspace. Several slots may view the same storage with
/// different descriptors (a 2-D view for layer norm, rank-aligned views for broadcasting).
struct Slot {
  enum class Kind : uint8_t { kInput, kOutput, kConst, kWork };
  dnnl::memory::desc md;
  Kind kind = Kind::kWork;
  int index = 0;        // kInput, kOutput
  size_t offset = 0;    // kWork: bytes into the workspace
  int buffer = -1;      // kWork: the intermediate it views (-1: the scratchpad)
  size_t within = 0;    // kWork: bytes into that intermediate (a part of a concat's output)
  void* ptr = nullptr;  // kConst
};

struct Step {
  dnnl::primitive prim;
  std::vector<std::pair<int, int>> args;  // oneDNN argument -> slot
  int op = -1;                            // the region op, for error messages (-1: boundary)
  /// When set, runs instead of `prim` (a max pool, `prim` the oneDNN pooling it replaces: its
  /// kind and descriptors still describe the step) on the SRC and DST arguments.
  std::shared_ptr<const BlockedMaxPool> max_pool;
  /// When set, runs instead of `prim` (a 3x3 convolution measured slower than this; `prim`
  /// still describes the step) on the SRC, BIAS, DST and SCRATCHPAD arguments.
  std::shared_ptr<const WinogradConv> winograd;
  /// When set, runs instead of `prim` (a convolution of 1-4 input channels measured slower
  /// than this; `prim` still describes the step) on the SRC, BIAS and DST arguments.
  std::shared_ptr<const SmallConv> small_conv;
  /// The same for a convolution of 1-4 output channels (small_oc_conv.h).
  std::shared_ptr<const SmallOcConv> small_oc_conv;
  /// When set, runs instead of `prim` (a copy of dst into itself, never run: it only stands
  /// for the step) on the MULTIPLE_SRC and DST arguments: a channel copy (kChannels).
  std::shared_ptr<const ChannelGather> channels;
  /// When set, runs instead of `prim` (a copy of dst into itself, never run) on the SRC and
  /// DST arguments: DepthToSpace (kDepthToSpace).
  std::shared_ptr<const DepthToSpace> depth_to_space;
  /// When > 1, this step is one of `team` consecutive steps that compute disjoint parts of one
  /// op's output (a convolution split over output channels) and run at once, one per thread
  /// of OpenMP's team (in turn on a smaller team). The first of them starts the group.
  int team = 1;
  /// 1: the step's work is too small to pay for a fork (plan_threads.cc); its primitive was
  /// created for one thread and runs with OpenMP's team size at 1, on the calling thread.
  /// 0: it runs on the caller's team.
  int threads = 0;
  /// >= 0: `prim` also computes this region op, a 3x3 depthwise Conv fused into the 1x1 Conv
  /// `op` as a post-op (plan_dw_fuse.cc); profiles name both.
  int fused_dw = -1;
};

/// The memory objects a step kiln runs itself (max pool, Winograd) reads and writes, found in
/// its argument map once per workspace rather than on every run. Empty (no handle) when the
/// step has no such argument (BIAS) or oneDNN runs it.
struct KilnStepArgs {
  dnnl::memory src, bias, dst, scratchpad;
  std::vector<dnnl::memory> srcs;  // Step::channels: its inputs (DNNL_ARG_MULTIPLE_SRC + i)
};

/// Intermediates and scratchpad of one call, with a memory object per slot, each step's
/// argument map over them, and a stream: a run allocates nothing. Used by one call at a time.
struct Workspace {
  ~Workspace();
  uint8_t* buffer = nullptr;
  std::vector<dnnl::memory> mems;
  std::vector<std::unordered_map<int, dnnl::memory>> step_args;
  std::vector<KilnStepArgs> kiln_args;  // by step, sharing step_args' objects
  dnnl::stream stream;
  std::vector<dnnl::stream> team_streams;  // one per step of the largest team (Step::team)
};

/// What a step runs, for profiles (RegionStepSample): the primitive's kind ("conv"), oneDNN's
/// implementation ("brgconv:avx2") and its operands ("1x16x56x56:aBcd8b -> ...").
struct StepInfo {
  std::string kind, impl, shapes;
  bool reference = false;  // a reference implementation ("ref:any", "gemm:ref", ...)
};

/// Immutable after BuildPlan except the workspace pool and the step descriptions (each
/// behind its own lock).
struct Plan {
  std::vector<Slot> slots;
  std::vector<Step> steps;
  size_t work_bytes = 0;
  std::vector<Dims> output_dims;
  int residual_copies = 0;  // sum post-op residuals copied into dst (RegionStats)
  int concats_in_place = 0;  // Concats whose inputs were written into their output (RegionStats)
  /// The constant weights its slots point into: shares of cached weights (WeightCache::Share),
  /// which live as long as the plan even when the cache drops them, and tensors made for this
  /// plan alone (a convolution's weights with the taps that read only padding cut out).
  std::vector<std::shared_ptr<uint8_t>> weights;

  std::unique_ptr<Workspace> Acquire();  // a pooled workspace or a new one (may throw)
  void Release(std::unique_ptr<Workspace> ws);
  /// One description per step, made on first use (only profiling asks). Thread-safe.
  const std::vector<StepInfo>& Describe();

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<Workspace>> free_;
  std::once_flag described_;
  std::vector<StepInfo> info_;
};

/// What a region is after creation: the decoded blob and its constants (by reference).
struct RegionData {
  std::string name;
  RegionProgram region;
  std::vector<const void*> constant_data;  // per tensor; null unless the tensor is a constant
  std::vector<Tensor> constants;           // keeps the executable's storage referenced
  /// How constant-weight MatMuls choose the layout of their weights (OneDnnOptions).
  OneDnnOptions::WeightLayout matmul_weight_layout = OneDnnOptions::WeightLayout::kMeasured;
};

/// Constant weights reordered into the layouts primitives asked for, shared by every plan of a
/// region (a layout is reordered once, then reused). Thread-safe.
class WeightCache {
 public:
  explicit WeightCache(size_t num_ops) : entries_(num_ops) {}
  /// The bytes of constant `data` (plain layout `plain`) in layout `want`. May throw dnnl::error.
  void* Get(int op, const dnnl::memory::desc& plain, const void* data,
            const dnnl::memory::desc& want, std::atomic<int64_t>* primitives);
  /// Get's bytes with a share of their ownership (the plain layout's: not owned, they are the
  /// executable's), for a plan to keep them after Drop.
  std::shared_ptr<uint8_t> Share(int op, const dnnl::memory::desc& plain, const void* data,
                                 const dnnl::memory::desc& want, std::atomic<int64_t>* primitives);
  /// Forgets `op`'s weights in layout `md` (a plan that no longer runs them: kiln's Winograd
  /// convolution has its own); they are freed when the last plan sharing them lets go.
  void Drop(int op, const dnnl::memory::desc& md);
  /// The first layout reordered for `op`, if any (plans try it first so layouts are shared).
  bool Preferred(int op, dnnl::memory::desc* md);
  /// The weight layout measured fastest for `op` at `bucket` (the builder's key of M and the
  /// team size; the value indexes the candidates it tried), or -1 before it has been measured.
  int LayoutChoice(int op, int64_t bucket);
  void SetLayoutChoice(int op, int64_t bucket, int choice);
  /// Records a choice measured before (a tuning record), not counted as a measurement.
  void SeedLayoutChoice(int op, int64_t bucket, int choice);
  /// Every choice known, seeded or measured, by op then in the order recorded.
  std::vector<TunedLayout> LayoutChoices();
  /// Measurements made (each SetLayoutChoice that recorded a new bucket).
  int64_t measurements() const { return measurements_.load(std::memory_order_relaxed); }

 private:
  struct Entry {
    std::vector<std::pair<dnnl::memory::desc, std::shared_ptr<uint8_t>>> layouts;
    std::vector<std::pair<int64_t, int>> choices;  // bucket -> candidate index
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
  std::atomic<int64_t> measurements_{0};
};

/// Declined (VendorRuntime::CreateRegion) when a QConv / QMatMul would not compute exactly
/// here: without VNNI, oneDNN multiplies u8 x s8 with vpmaddubsw, whose int16 sums of two
/// products saturate unless every weight is within [-64, 64] (7-bit weights, as ONNX Runtime's
/// reduce_range writes them). Ok on VNNI CPUs and for regions without integer ops. (A region
/// without a fallback function cannot be declined and runs anyway, saturating.)
Status DeclineSaturatingInt8(const RegionData& data);

/// What one BuildPlan measured or took from the region's tuning records (RegionTuning).
struct PlanMeasures {
  bool probed = false;   // the Winograd accuracy probe ran; f4_from is its answer
  int32_t f4_from = 0;
  bool tuned = false;    // a record of these input dims and team size chose the Conv tiles
  std::vector<TunedTile> tiles;  // every Conv tile chosen by measurement or by record
};

/// The record of `tuning` for input dims `inputs` at OpenMP team size `threads`, or null.
const TunedShape* FindTunedShape(const RegionTuning& tuning, const std::vector<Dims>& inputs,
                                 int threads);

/// Builds the plan of `data` for input dims `inputs` (already checked against the blob's
/// ranks). The region's tuning records stand in for the measurements they hold: the
/// Winograd probe's limit for every shape, the Conv tiles for their shape and team size.
/// Fills `measures` if not null. Errors: InvalidArgument for shapes the ops reject ("ops[2]
/// (Conv): input channels 3 != 4 * group 1"), Unsupported for what oneDNN cannot do, Internal
/// for oneDNN failures.
StatusOr<std::shared_ptr<Plan>> BuildPlan(const RegionData& data, WeightCache& weights,
                                          const std::vector<Dims>& inputs,
                                          std::atomic<int64_t>* primitives,
                                          PlanMeasures* measures = nullptr);

/// Runs `plan` (of `data`) on args (inputs then outputs, already checked). May throw
/// dnnl::error. With a `profiler`, each step is timed and reported (Plan::Describe). Before
/// each step it checks the run's deadline (base/deadline.h): once it has passed, it stops and
/// returns DeadlineExceeded naming the primitive it stopped before ("before primitive 3 of 57
/// (ops[2], Conv)"); the outputs are then partial and the caller must discard them (the VM
/// does). Counts each primitive it executes in `primitives_run` if not null.
Status ExecutePlan(Plan& plan, const RegionData& data, const Tensor* const* args, int num_inputs,
                   int num_outputs, RegionProfiler* profiler = nullptr,
                   std::atomic<int64_t>* primitives_run = nullptr);

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_PLAN_H_
