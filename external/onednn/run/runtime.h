// The oneDNN vendor runtime ("onednn", run side of BYOC): runs the regions
// external/onednn/compile's codegen serialized, with weights in oneDNN's blocked layouts and
// primitives cached per shape.
#ifndef KILN_EXTERNAL_ONEDNN_RUN_RUNTIME_H_
#define KILN_EXTERNAL_ONEDNN_RUN_RUNTIME_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "external/onednn/region.h"
#include "external/registry/registry.h"
#include "vm/providers.h"

namespace kiln::onednn {

struct OneDnnOptions {
  /// Execution plans (primitives for one set of input shapes) kept per region; the least
  /// recently used plan is dropped beyond this. Runs in flight keep theirs alive.
  int max_cached_shapes = 32;
  /// A MatMul / Gemm with constant weights can read them row-major ([K, N]) or transposed
  /// ([N, K] stored); which one oneDNN 2.x's GEMM runs faster depends on M, K, N, the thread
  /// count and the CPU (up to 2x either way on AVX2). kMeasured: the first plan with M in a new
  /// power-of-two bucket (per team size) times both on scratch data (one warm-up and three runs
  /// each, alternating, minimum) and keeps the faster for that bucket; the layout the constant is
  /// stored in wins ties within 5% (no copy). GEMMs under 2^16 multiply-adds, batched weights and
  /// the other settings skip the measurement: kOneDnn lets oneDNN pick (row-major for plain f32
  /// GEMM), kRowMajor / kTransposed force one (tests cross-check both).
  enum class WeightLayout : uint8_t { kMeasured, kOneDnn, kRowMajor, kTransposed };
  WeightLayout matmul_weight_layout = WeightLayout::kMeasured;
  /// Decline (VendorRuntime::CreateRegion) a region whose plan at creation spends a material
  /// share of its work in primitives with a reference implementation (the decline rule:
  /// OneDnnRuntime), or has an integer op oneDNN would not compute exactly on this CPU
  /// (internal::DeclineSaturatingInt8); the VM runs its JIT fallback instead. False: run it
  /// anyway (tests of oneDNN's numerics).
  bool decline_reference_impls = true;
  /// The decline rule's threshold: the share of the elements the plan's steps write that
  /// reference steps write. 0 declines over any reference primitive (the rule before it
  /// weighed cost).
  double reference_share_to_decline = 0.01;
};

/// Counters of one region, for tests and profiling.
struct RegionStats {
  int64_t plans_built = 0;         // shape keys for which primitives were created
  int64_t primitives_created = 0;  // oneDNN primitives (incl. reorders) created, ever
  int64_t plans_evicted = 0;
  int64_t runs = 0;
  int64_t primitives_run = 0;      // primitives executed by runs, ever (a run stopped at its
                                   // deadline counts those it ran)
  int64_t cached_plans = 0;
  int64_t max_workspace_bytes = 0;  // the largest per-call workspace among the cached plans
  int64_t layouts_measured = 0;     // MatMul weight-layout measurements (OneDnnOptions)
  // Residuals of sum post-ops copied into the primitive's dst before it runs, over the cached
  // plans. A residual held in the workspace in dst's layout and read by nothing later is
  // accumulated into in place, without a copy.
  int64_t residual_copies = 0;
  // Concats over the cached plans whose inputs were written at their place in the output by
  // their producers, leaving no copy step (see Builder::ConcatInPlace).
  int64_t concats_in_place = 0;
  // Steps of the cached plans, and those of them that run on the calling thread alone because
  // their work would not pay for starting OpenMP's team (Step::threads, plan_threads.cc).
  int64_t plan_steps = 0;
  int64_t serial_steps = 0;
  // Plans whose build ran the Winograd accuracy probe (plan_winograd.cc), and plans whose
  // Conv tiles came from a tuning record of their shape and team size instead of timed trials
  // (TuneRegion).
  int64_t probes_run = 0;
  int64_t tuned_plans = 0;
};

/// The TensorFunction CreateRegion returns; dynamic_cast to read its counters.
class OneDnnRegion : public TensorFunction {
 public:
  virtual RegionStats stats() const = 0;
};

/// CreateRegion decodes the blob, checks it against the spec (input/output counts; every
/// constant present, of the blob's dtype and dims) and reorders constant weights once into the
/// layout oneDNN prefers (for regions whose inputs are static except the batch dim, the plan
/// for batch = its static value or 1 is built at creation). Errors name the region:
/// InvalidFormat / Unsupported from the blob, InvalidArgument for a spec that contradicts it,
/// Internal for a oneDNN failure. Constants are used by reference: the executable must outlive
/// the region. Thread-safe.
///
/// The decline rule (if spec.may_decline and OneDnnOptions::decline_reference_impls): oneDNN's
/// reference implementations (impl_info_str contains "ref": plain C loops, not vectorized) run
/// 10-100x slower per element than its JIT kernels or kiln's (one 1x32x160x240 scalar add on a
/// blocked layout took 234 ms). The region is declined (Declined, see VendorRuntime, naming the
/// costliest such op and the share) when the reference steps of that creation-time plan write
/// at least OneDnnOptions::reference_share_to_decline (1%) of the elements all its steps write
/// (destinations, padding included; concat, whose reference implementation is a plain copy,
/// counts only in the total). At 1%, reference code at 10-100x costs the region 10-100% more,
/// more than a JIT fallback loses to oneDNN; below it the region keeps oneDNN (efficientnet_b0:
/// a sigmoid on its 1x20x1x1 squeeze-excite tensors, 0.001% of the elements, had declined its
/// only region and slowed the net 1.8x). Element counts undercount the work of convolutions
/// and products, so the estimate errs towards declining. Regions with symbolic dims other than
/// the batch are not checked (no plan exists before the first run).
///
/// The region's Run: inputs and outputs f32, contiguous, of the ranks (and static dims) the
/// blob records; output shapes must equal what the region computes (InvalidArgument naming the
/// output otherwise). Thread-safe, lock-free while oneDNN executes: each call takes a private
/// workspace (intermediates + scratchpad) from the plan's pool. oneDNN errors become Status
/// naming the region and the op, never exceptions. Before each primitive the run checks the
/// deadline of the VM run on its thread (base/deadline.h): once it has passed, Run stops with
/// DeadlineExceeded naming the region and the primitive ("region 'onednn_0': the run's
/// deadline passed before primitive 3 of 57 (ops[2], Conv)"), its outputs partial.
class OneDnnRuntime : public VendorRuntime {
 public:
  explicit OneDnnRuntime(OneDnnOptions options = {}) : options_(options) {}
  StatusOr<std::unique_ptr<TensorFunction>> CreateRegion(const ExternalRegionSpec& spec) override;
  /// DescribeRegion (external/onednn/region.h): the region's ops, one per line.
  StatusOr<std::string> Describe(const uint8_t* blob, size_t size) const override;

 private:
  OneDnnOptions options_;
};

/// `kiln compile --tune`: makes now, once, the measurements creating the region would make at
/// every load (the Winograd accuracy probe, the timed Conv tile trials, MatMul weight layouts)
/// and returns the blob with them recorded (RegionTuning; records already in the blob are
/// replaced). They are made on the calling thread's OpenMP team, whose size the record keeps:
/// a load uses the tiles only at that team size and the same input dims, the probe's limit at
/// every shape. The plan measured is the one creation builds (static input dims, a symbolic
/// batch at 1); a region with another symbolic dim has no such plan: its blob comes back
/// unchanged and `*note` (if not null) says why ("input 0 dim 1 is symbolic: pin it with
/// --dim"). Errors: CreateRegion's, naming the region.
StatusOr<std::vector<uint8_t>> TuneRegion(const ExternalRegionSpec& spec,
                                          OneDnnOptions options = {}, std::string* note = nullptr);

/// Registers an OneDnnRuntime under kVendorName. InvalidArgument if "onednn" is registered.
Status RegisterOneDnn(ExternalRegistry& registry, OneDnnOptions options = {});

}  // namespace kiln::onednn

#endif  // KILN_EXTERNAL_ONEDNN_RUN_RUNTIME_H_
