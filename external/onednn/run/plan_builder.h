// The plan builder (internal to external/onednn/run): the class that turns a region's ops into
// primitives for one set of input shapes, and the dims / memory-descriptor helpers its files
// share. plan_builder.cc holds the core (slots, layouts, post-ops, workspace placement); one
// file per primitive family holds the ops (plan_conv_pool.cc, plan_matmul.cc,
// plan_eltwise_binary.cc, plan_norm.cc).
#ifndef KILN_EXTERNAL_ONEDNN_RUN_PLAN_BUILDER_H_
#define KILN_EXTERNAL_ONEDNN_RUN_PLAN_BUILDER_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "external/onednn/region.h"
#include "external/onednn/run/kiln_conv.h"
#include "external/onednn/run/plan.h"
#include "oneapi/dnnl/dnnl.hpp"

namespace kiln::onednn::internal {

/// Workspace buffers, intermediates and reordered weights are aligned to this many bytes.
inline constexpr size_t kAlign = 64;
inline size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

/// A timed trial's answers by shape key, once per process: every plan of the process then
/// computes a shape alike (two regions or models with the same layer, the Winograd probe's
/// plans, other input sizes' regions) instead of each following its own timing noise, and
/// pays the trial once. Thread-safe; a concurrent build's first answer for a key stays.
template <typename T>
class ChoiceMemo {
 public:
  bool Find(const std::string& key, T* answer) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = answers_.find(key);
    if (it == answers_.end()) return false;
    *answer = it->second;
    return true;
  }
  void Record(const std::string& key, T answer) {
    std::lock_guard<std::mutex> lock(mu_);
    answers_.emplace(key, answer);
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, T> answers_;
};

/// How a kiln kernel that a timed trial guards is chosen, from its environment variable
/// (KILN_ONEDNN_SMALL_IC, ..._SMALL_OC): unset, "" or "auto": the shapes its rule admits, then
/// the trial decides; "0": never (oneDNN always); "force": wherever it applies, untimed (A/B
/// runs and tests).
enum class KernelMode { kTrial, kOff, kForce };
KernelMode KernelModeFromEnv(const char* variable);

/// Scratch for a timed trial (layout or implementation choice): at least `bytes` (rounded up to
/// kAlign, 64-byte aligned) holding floats in [-0.75, 0.75] (speed does not depend on values;
/// these avoid denormals), kept alive by `owned`. Throws std::bad_alloc.
void* TrialBuffer(size_t bytes, std::vector<std::shared_ptr<void>>* owned);

/// Seconds of the fastest of `runs` calls of `run` after one warm-up (timed trials).
template <typename F>
double Fastest(F run, int runs) {
  double best = 1e30;
  for (int i = 0; i <= runs; ++i) {
    auto start = std::chrono::steady_clock::now();
    run();
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (i > 0) best = std::min(best, s);
  }
  return best;
}
/// "[2, 3]".
std::string DimsToString(const Dims& d);
/// Row-major layout of `dims` (f32 unless `type` says otherwise); a rank-0 tensor is viewed as
/// [1] (oneDNN has no scalars).
dnnl::memory::desc PlainMd(Dims dims,
                           dnnl::memory::data_type type = dnnl::memory::data_type::f32);
/// The oneDNN data type of a region tensor's dtype (f32, u8, s8, s32; others are f32, which
/// the runtime never lets through: Bind rejects them).
dnnl::memory::data_type DataType(DType t);
/// A row-major tensor stored with its last two dims swapped, described with logical `dims`.
dnnl::memory::desc TransposedMd(const Dims& dims);
/// `d` with leading 1s up to `rank` (numpy broadcasting's alignment).
Dims AlignRank(const Dims& d, size_t rank);
/// d[from, to).
Dims Sub(const Dims& d, size_t from, size_t to);
int64_t Product(const Dims& d);
/// Operand `d` (aligned to the rank of `out`) as a matrix over `out` viewed as
/// [prod(out[0, r-1)), out[r-1]]: [1, n] when it broadcasts over all leading dims, [rows, n] when
/// it has them all; empty when it varies over some leading dims but not others.
Dims CollapseOperand(const Dims& d, const Dims& out);
/// A convolution's window in oneDNN's terms.
struct Window {
  Dims strides, dilations, pad_l, pad_r, out;  // dilations in oneDNN terms (0 = dense)
};
/// Checks a Conv's (or QConv's) X dims `xd`, W dims `wd` and bias dims (null: none) against
/// each other and resolves the window; `*out` receives the output dims. InvalidArgument naming
/// the mismatch.
StatusOr<Window> ConvWindow(const Op& op, const Dims& xd, const Dims& wd, const Dims* bias,
                            Dims* out);
/// A convolution's kernel with the taps that read only padding (for every output position,
/// at these input dims) cut from the ends of each spatial dim (plan_conv_prune.cc).
struct PrunedTaps {
  Dims first;  // per spatial dim, the first tap kept
  Dims wd;     // W's dims after pruning
};
/// The taps of a conv with X dims `xd`, W dims `wd` and window `*win` (ConvWindow's) that read
/// some input, as a contiguous range per dim, with `*win`'s pads (and, for a single tap, its
/// dilation) adjusted so the output dims stay; nullopt (win untouched) when every tap reads
/// input or dropping would need a negative pad. Each output sums the same products minus
/// zeros (0 * w: a non-finite weight of a dropped tap no longer turns outputs into NaN).
std::optional<PrunedTaps> PadOnlyTaps(const Dims& xd, const Dims& wd, Window* win);
/// Whether a Conv of X dims `xd` and W dims `wd` runs faster on `threads` threads as one 1x1
/// convolution per thread over a range of output channels (plan_conv_split.cc): one image
/// of few positions, many weights, at least one 8-channel block per thread.
bool SplitOverChannelsPays(const Op& op, const Dims& xd, const Dims& wd, int threads);
/// The first output channel of each of `parts` ranges of `channels` (a multiple of 8), in
/// whole 8-channel blocks as evenly as they go, then `channels`: parts + 1 values.
std::vector<int64_t> ChannelSplit(int64_t channels, int parts);
/// Row-major weights `w` of dims `wd` restricted to `p`'s taps (dims p.wd).
std::vector<float> SliceTaps(const float* w, const Dims& wd, const PrunedTaps& p);
/// ONNX weights [O, I / group, k...] as oneDNN's grouped [group, O / group, I / group, k...]
/// (unchanged for group 1).
Dims GroupedWeightDims(const Dims& wd, int64_t group);
/// The work of region op `op` with tensor dims `dims` (its inputs' must be set), in
/// multiply-adds, an element read or written counting as several (plan_threads.cc).
int64_t OpWork(const Op& op, const std::vector<Dims>& dims);
/// Work below which a step runs on one thread: a second thread saves nothing there on a quiet
/// host, and a fork costs up to milliseconds on a loaded one (plan_threads.cc: the figures).
inline constexpr int64_t kSerialWork = int64_t{1} << 21;
/// Elements of an input written by a step on the team (so spread over the team's caches) from
/// which a step keeps the team whatever its work: one thread reading it all from the other
/// cores' caches costs more than the fork (plan_threads.cc: the figures).
inline constexpr int64_t kSpreadElements = int64_t{1} << 15;
/// The threads an op of `work` uses when the caller's team has `threads` and its largest input
/// written by a team's step has `spread` elements (0: none): 1 below kSerialWork unless
/// `spread` reaches kSpreadElements, else `threads`.
int StepThreads(int64_t work, int64_t spread, int threads);
dnnl::algorithm EltwiseAlgorithm(EltwiseAlg a);
dnnl::algorithm BinaryAlgorithm(BinaryAlg a);

/// Where a build may run F(4x4) Winograd (plan_winograd.cc). `f4_from`: ops before it get
/// F(2x2) at most; `forced` 2 or 4: that tile wherever it applies, untimed (the accuracy
/// probe's plans; F(4x4) never where its weights outweigh the data, as the timed trial skips
/// it there); `budget`: the static depth rule decides instead of `f4_from` (a region the probe
/// cannot run).
/// `transformed`, when set, holds Winograd convolutions with real weights by op, tile and
/// shapes, shared by the probe's plans and the plan built after them, so each layer's weights
/// are transformed once per tile.
/// `probed` (ProbeWinograd's answer only): `f4_from` was measured by the probe (what a
/// tuning record keeps). `tuned`: the tiles a tuning record (RegionTuning) chose for this
/// shape and team size, taken instead of the timed trial where the mode allows them; `chosen`:
/// receives each measured choice, the trial's or the process memo's (`kiln compile --tune`).
struct WinogradLimits {
  int f4_from = 0;
  int forced = 0;
  bool budget = false;
  std::shared_ptr<std::unordered_map<std::string, std::shared_ptr<const WinogradConv>>>
      transformed;
  bool probed = false;
  const std::vector<TunedTile>* tuned = nullptr;
  std::vector<TunedTile>* chosen = nullptr;
};

/// The limits of F(4x4) for `data`'s plan at input dims `inputs`, found by a probe
/// (plan_winograd.cc): the region runs on a fixed synthetic input with F(2x2) wherever
/// Winograd applies and with F(4x4) wherever it may run; when their outputs differ by more
/// than F(4x4)'s share of the error budget, F(4x4) is taken from the earliest layers until
/// they do not. Deterministic (same input, same plans). Costs nothing when no F(4x4) can run
/// (no 3x3 stride-1 Conv, KILN_ONEDNN_WINOGRAD 0 / 2 / force2); else two untimed builds and
/// runs of the region, plus one per bisection step when F(4x4) everywhere is too much. Never
/// fails: a region it cannot run (non-f32 inputs, no f32 output, a build or run error) gets
/// the static depth rule.
WinogradLimits ProbeWinograd(const RegionData& data, WeightCache& weights,
                             const std::vector<Dims>& inputs);

/// `op`'s post-ops as kiln's convolutions apply them (avx2_post_ops.h), appended to `out`; false
/// for one they do not (binary operands, other eltwise functions, a second sum)
/// (plan_winograd.cc).
bool WinogradPostOps(const Op& op, std::vector<WinogradPostOp>* out);

/// Builds one plan. Each op's primitives are created first with the layouts its inputs already
/// have (blocked ones inside the region); if oneDNN refuses, the op is rebuilt from plain
/// copies. Used once per plan, by one thread; primitive constructors may throw dnnl::error
/// (BuildOpWithFallback catches it per op).
class Builder {
 public:
  Builder(const RegionData& data, WeightCache& weights, std::atomic<int64_t>* primitives,
          WinogradLimits limits = {})
      : d_(data), r_(data.region), weights_(weights), primitives_(primitives), limits_(limits) {}

  /// The plan for input dims `inputs`; BuildPlan's errors.
  StatusOr<std::shared_ptr<Plan>> Build(const std::vector<Dims>& inputs);

 private:
  struct Snapshot;
  struct MatMulShapes;
  using Args = std::vector<std::pair<int, int>>;  // oneDNN argument -> slot

  // ---- Core (plan_builder.cc) ----
  Status BuildOpWithFallback(const Op& op);
  Status BuildOp(const Op& op, bool plain);
  void AssignOffsets();

  // Slots and steps.
  int AddSlot(Slot s);
  int NewWork(const dnnl::memory::desc& md);
  int View(int slot, const dnnl::memory::desc& md);
  const dnnl::memory::desc& Md(int slot) const { return plan_->slots[slot].md; }
  int OutputSlot(int32_t t);
  bool IntoCaller(int32_t t, const dnnl::memory::desc& md);
  int Define(int32_t t, const dnnl::memory::desc& md);
  int DefineOn(int32_t t, const dnnl::memory::desc& md, int slot);
  dnnl::primitive_attr Attr() const;
  void AddPrimitive(dnnl::primitive p, size_t scratch, Args args);
  void AddReorder(int from, int to);
  int As(int slot, const dnnl::memory::desc& md);
  int Plain(int32_t t);
  /// Region tensor `t`'s row-major layout in its own dtype.
  dnnl::memory::desc PlainOf(int32_t t) const {
    return PlainMd(dims_[t], DataType(r_.tensors[t].dtype));
  }
  int PlainView(int32_t t, const Dims& dims) { return View(Plain(t), PlainMd(dims)); }
  int Current(int32_t t, bool plain) { return plain ? Plain(t) : slot_of_[t]; }
  /// Current(t, plain) in layout `md` for a step that only reads it: a reorder the first time
  /// a layout of `t` is asked for, then that copy again (the phase convolutions of a
  /// ConvTranspose, an Inception block's branches: one region input read by several convs
  /// had been reordered once per conv). The copy holds t's value for the rest of the plan:
  /// nothing writes into it in place (DefineAccumulator overwrites a tensor's own slot).
  int CurrentAs(int32_t t, bool plain, const dnnl::memory::desc& md);

  // Post-ops, accumulation into residuals, weights (Conv, MatMul).
  Status PostOps(const Op& op, const Dims& out, dnnl::primitive_attr* attr, Args* args,
                 int32_t* residual, bool collapsed = false,
                 const dnnl::memory::desc* full_operand_md = nullptr);
  int DefineAccumulator(const Op& op, const dnnl::memory::desc& md, int32_t residual,
                        const Args& args);
  bool CanOverwrite(int32_t t, const dnnl::memory::desc& md, const Args& args) const;
  int Weights(int32_t t, const dnnl::memory::desc& plain_md, const dnnl::memory::desc& want);
  /// Weights made for this plan (`data`, row-major `plain_md`) in layout `want`, owned by the
  /// plan (plan_conv_prune.cc); their slot. May throw dnnl::error.
  int OwnedWeights(const dnnl::memory::desc& plain_md, std::vector<float> data,
                   const dnnl::memory::desc& want);

  // ---- Ops, by family ----
  Status Conv(const Op& op, bool plain);  // plan_conv_pool.cc
  /// Builds the 1x1 Conv `op` and the 3x3 depthwise Conv after it (the next op, the only
  /// reader of op's output) as one primitive, the depthwise a post-op of the 1x1, and skips
  /// the next op; false, having changed nothing, when they do not fit, oneDNN declines or has
  /// only reference code, KILN_ONEDNN_DW_FUSE is "0", or (unless it is "force") a timed trial
  /// finds the fused primitive slower than the two (plan_dw_fuse.cc).
  bool DwFused(const Op& op, bool plain);
  bool FusionFaster(const Op& op, const Op& dw,
                    const dnnl::convolution_forward::primitive_desc& fused, const Window& win,
                    const Window& dw_win, const Dims& mid, const Dims& out);
  bool DepthwiseConv1d(const Op& op, bool plain);
  using MakeConv = std::function<dnnl::convolution_forward::primitive_desc(
      const dnnl::memory::desc& src, const dnnl::memory::desc& weights)>;
  using MakeConvWindow = std::function<dnnl::convolution_forward::primitive_desc(
      const dnnl::memory::desc& src, const Window& win)>;
  /// Conv's primitive with pairs of groups merged (plan_conv_pool.cc, PairingGroupsPays) in
  /// *pd and the slot of its weights, or -1 (pd untouched) when oneDNN would not run it as a
  /// blocked JIT convolution.
  int PairedGroups(const Op& op, const MakeConv& make, const dnnl::memory::desc& src_md,
                   dnnl::convolution_forward::primitive_desc* pd);
  /// When oneDNN runs a padded convolution `*pd` (window `*win`, src dims `xd`) as gemm but
  /// would run it as a direct JIT convolution on an input padded beforehand
  /// (ExplicitPaddingPays): replaces *pd and *win with the unpadded ones and returns the slot
  /// of src, copied into the middle of a zero-bordered buffer; else -1 (nothing changed).
  /// May throw dnnl::error (the reorder).
  int PadExplicitly(int32_t x, const Dims& xd, const MakeConvWindow& make, Window* win,
                    dnnl::convolution_forward::primitive_desc* pd);
  /// The layout a Conv's full-shape binary post-op operand is reordered into: dst's without
  /// post-ops (make(src_md, w_md)), or, when that is gemm's and PadExplicitly would run the
  /// conv as a direct JIT one on a padded copy (a causal TCN's residual), that one's dst layout.
  dnnl::memory::desc FullOperandLayout(const Op& op, const MakeConv& make,
                                       const MakeConvWindow& make_unpadded,
                                       const dnnl::memory::desc& src_md,
                                       const dnnl::memory::desc& w_md, const Window& win);
  /// Replaces the Conv step just added (`pd`, window `win`) with kiln's Winograd
  /// convolution when it applies and measures faster (plan_winograd.cc).
  void Winograd(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                const Window& win);
  size_t FasterConv(const dnnl::convolution_forward::primitive_desc& pd,
                    const std::vector<std::shared_ptr<const WinogradConv>>& candidates);
  /// A timed trial of the Conv step just added (`pd`) against kiln's own convolutions: its
  /// arguments on trial buffers of the real shape (constants where they are), the raw pointers
  /// kiln's kernels take, and oneDNN's time on them (Fastest of 3).
  struct ConvTrial {
    std::vector<std::shared_ptr<void>> owned;  // the trial buffers
    std::unordered_map<int, dnnl::memory> args;
    const float* src = nullptr;
    float* dst = nullptr;
    const float* bias = nullptr;  // null: the conv has none
    double onednn_seconds = 0;
  };
  ConvTrial TimeOneDnnConv(const dnnl::convolution_forward::primitive_desc& pd);
  /// The Conv `op` (primitive `pd`, window `win`) as kiln's own convolutions take it, with
  /// post-ops `post`, weights null (set them before a final Make) and this op's team.
  KilnConvSpec ConvSpec(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                        const Window& win, std::vector<WinogradPostOp> post) const;
  /// Replaces the Conv step just added (`pd`, window `win`) with kiln's small-input-channel
  /// convolution when it applies and measures faster; whether it did (plan_small_conv.cc).
  /// kiln's direct convolution `Conv` (SmallConv or SmallOcConv) for the Conv step just added
  /// (`pd`, window `win`), made with the real weights when `mode` forces it, or when a timed
  /// trial on zero weights (its answer kept in `memo` per shape and team) finds it no slower
  /// than oneDNN's primitive; null otherwise, or when it does not apply (plan_small_conv.cc).
  template <typename Conv>
  std::shared_ptr<const Conv> TrialDirectConv(const Op& op,
                                              const dnnl::convolution_forward::primitive_desc& pd,
                                              const Window& win, KernelMode mode,
                                              ChoiceMemo<bool>& memo);
  bool SmallIc(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
               const Window& win);
  /// The same for kiln's small-output-channel convolution (plan_small_oc_conv.cc).
  bool SmallOc(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
               const Window& win);
  void DropOneDnnWeights();
  /// The tile limits_.tuned records for the op being built, if `allowed` has it; else -1.
  int RecordedTile(const std::vector<int>& allowed) const;
  void Chose(int tile);
  /// Adds the Conv `op` (primitive `pd`, attributes `attr`, arguments `args` with its dst
  /// defined) as one step per thread, each over its own range of output channels (a team,
  /// Step::team), when SplitOverChannelsPays and oneDNN runs every part as a JIT 1x1
  /// convolution without scratchpad; false (no step added) otherwise (plan_conv_split.cc).
  /// May throw dnnl::error.
  bool SplitOverChannels(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                         const dnnl::primitive_attr& attr, const Args& args);
  /// A slot viewing `slot`'s storage from `bytes` on with layout `md` (a constant or an
  /// intermediate), or -1 for a caller's tensor.
  int SliceOf(int slot, const dnnl::memory::desc& md, size_t bytes);
  /// Per op, whether limits_ allow it F(4x4) (plan_winograd.cc).
  std::vector<bool> F4Allowed() const;
  Status Pool(const Op& op, bool plain);
  Status MatMul(const Op& op);  // plan_matmul.cc
  StatusOr<MatMulShapes> MatMulShapesOf(const Op& op);
  bool Collapsible(const Op& op, const MatMulShapes& s) const;
  dnnl::matmul::primitive_desc MatMulPrimitive(const Op& op, const MatMulShapes& s,
                                               const dnnl::primitive_attr& attr);
  int FasterLayout(const dnnl::memory::desc& a_md, const dnnl::memory::desc& out_md,
                   const std::vector<dnnl::memory::desc>& layouts, int stored);
  Status QConv(const Op& op);  // plan_int8.cc
  Status QMatMul(const Op& op);
  StatusOr<dnnl::primitive_attr> Int8Attr(const Op& op, int channel_mask, int64_t channels);
  Status Eltwise(const Op& op, bool plain);  // plan_eltwise_binary.cc
  Status Binary(const Op& op, bool plain);
  Status Concat(const Op& op, bool plain);
  struct ConcatPart;
  bool ConcatIntoCaller(const Op& op, const Args& srcs);
  dnnl::memory::desc ConcatLayout(const Op& op, const dnnl::memory::desc& chosen) const;
  bool ConcatByReorders(const Op& op, const dnnl::memory::desc& dst_md, const Args& srcs);
  bool ConcatInPlace(const Op& op, const dnnl::memory::desc& dst_md, const Args& srcs);
  bool PlaceConcatInputs(const Op& op, const dnnl::memory::desc& dst_md, const Args& srcs,
                         std::vector<ConcatPart>* parts, int* target);
  bool Movable(const Op& op, const Args& srcs, size_t i, const ConcatPart& p) const;
  bool WholeBuffer(int buffer, size_t size) const;
  void MoveBuffer(int from, int to, size_t at);
  Status Flatten(const Op& op);
  Status Channels(const Op& op, bool plain);  // plan_channels.cc
  Status DepthToSpace(const Op& op, bool plain);  // plan_channels.cc
  Status Resize(const Op& op, bool plain);    // plan_resize.cc
  Status Softmax(const Op& op, bool plain);  // plan_norm.cc
  Status LayerNorm(const Op& op);
  Status BatchNorm(const Op& op, bool plain);
  /// The op after `op` when it is a Relu (slope 0) of op's output and nothing else reads that
  /// output (no other op, post-op or region output): `op` may apply it and skip it.
  const Op* SoleRelu(const Op& op) const;
  /// Elements of `op`'s largest input (or post-op operand) that a step on the team wrote
  /// (spread_), 0 when none did: StepThreads' `spread`.
  int64_t SpreadInput(const Op& op) const;
  /// Records whether `op`'s output was written by steps on the team (step_threads_ 0).
  void NoteSpread(const Op& op);

  const RegionData& d_;
  const RegionProgram& r_;
  WeightCache& weights_;
  std::atomic<int64_t>* primitives_;
  WinogradLimits limits_;
  std::shared_ptr<Plan> plan_;
  std::vector<Dims> dims_;
  std::vector<int> slot_of_, plain_of_, output_index_;
  struct Layout {
    int32_t tensor;
    int slot;
  };
  std::vector<Layout> layouts_;  // CurrentAs' copies
  std::vector<size_t> buffer_sizes_;  // per intermediate, aligned
  // Intermediates whose bytes no other one may share (AssignOffsets): an explicitly padded
  // input's zero border, written once when the workspace is made (zeroed) and never again.
  std::vector<int> pinned_;
  size_t scratch_ = 0;
  // Per intermediate that is a concat output written in place: the [offset, size) byte ranges
  // of the concat inputs placed in it (ConcatInPlace).
  std::unordered_map<int, std::vector<std::pair<size_t, size_t>>> parts_;
  int op_index_ = -1;
  // Per tensor: how many op inputs, post-op operands and region outputs read it.
  std::vector<int> readers_;
  // Set by an op that also computed the next op (BatchNorm with its Relu): Build skips it.
  bool skip_next_ = false;
  // Step::threads of the steps being added: 1 while building an op too small for a team.
  int step_threads_ = 0;
  // Per tensor: written by steps on a team of two or more threads, so its lines sit in
  // several cores' caches (SpreadInput).
  std::vector<bool> spread_;
  // F4Allowed(), computed at the first Winograd candidate (constants' dims known by then).
  std::vector<bool> f4_allowed_;
};

}  // namespace kiln::onednn::internal

#endif  // KILN_EXTERNAL_ONEDNN_RUN_PLAN_BUILDER_H_
