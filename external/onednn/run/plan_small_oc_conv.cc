// The plan builder's choice between oneDNN's convolution and kiln's small-output-channel one
// (small_oc_conv.h) for a convolution of 1-4 output channels: a rule admits the shapes where it
// measured faster, then a timed trial on the real shape guards, once per shape and team size
// in a process.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

// The trial's answers by shape (src and dst descriptors, kernel, strides, paddings, team
// size), once per process (ChoiceMemo).
ChoiceMemo<bool>& Memo() {
  static ChoiceMemo<bool>* memo = new ChoiceMemo<bool>();
  return *memo;
}

// Whether kiln's convolution (2-D, or 1-D as one row) can beat oneDNN's on this shape at all
// (the trial then checks): stride 1 and at least 48 products per output. small_oc_conv_bench
// (src and dst aBcd8b; 1 thread / 2 threads): fast_style's 16 -> 3 9x9 6.1x / 6.3x faster
// than oneDNN's jit:avx2, esrgan's 32 and 64 -> 3 3x3 3-3.7x, a vocoder's 16 or 32 -> 1 k7
// (1-D) 3.6-4.3x / 7-8x, dcgan's 64 -> 3 2x2 phases 3x, a 32 -> 4 3x3 head 2.1x / 2.8x, a
// 1x1 64 -> 2 head 1.5x against oneDNN's jit_1x1; strides 2 were not measured.
bool MayWin(const Dims& wd, const Window& win) {
  const int64_t taps = wd.size() == 4 ? wd[2] * wd[3] : wd[2];
  return std::all_of(win.strides.begin(), win.strides.end(), [](int64_t s) { return s == 1; }) &&
         wd[1] * taps >= 48;
}

}  // namespace

// The trial runs oneDNN's primitive and kiln's convolution (zero weights: as fast as real
// ones) on the step's trial buffers, one warm-up and three timed runs each, the minimum
// counting; kiln's replaces the primitive unless it measures slower. Its answer is not kept in
// tuning records: a load with a record still runs this trial, ~4 runs of each admitted
// output-layer convolution.
bool Builder::SmallOc(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                      const Window& win) {
  const KernelMode mode = KernelModeFromEnv("KILN_ONEDNN_SMALL_OC");
  const Dims& wd = dims_[op.inputs[1]];
  if (mode == KernelMode::kOff || (wd.size() != 4 && wd.size() != 3) ||
      wd[0] > SmallOcConv::kMaxOutputs)
    return false;
  if (mode == KernelMode::kTrial && !MayWin(wd, win)) return false;
  std::shared_ptr<const SmallOcConv> chosen =
      TrialDirectConv<SmallOcConv>(op, pd, win, mode, Memo());
  if (chosen == nullptr) return false;
  plan_->steps.back().small_oc_conv = std::move(chosen);
  DropOneDnnWeights();
  return true;
}

}  // namespace kiln::onednn::internal
