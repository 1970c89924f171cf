// The plan builder's choice between oneDNN's convolution and kiln's small-output-channel one
// (small_oc_conv.h) for a convolution of 1-4 output channels: a rule admits the shapes where it
// measured faster, then a timed trial on the real shape guards, once per shape and team size
// in a process.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;

// What KILN_ONEDNN_SMALL_OC allows: unset, "" or "auto": MayWin's shapes, then the trial
// decides; "0": never (oneDNN always); "force": wherever it applies, untimed (A/B runs and
// tests).
enum class Mode { kTrial, kOff, kForce };

Mode ModeFromEnv() {
  const char* env = std::getenv("KILN_ONEDNN_SMALL_OC");
  const std::string v = env != nullptr ? env : "";
  if (v == "0") return Mode::kOff;
  if (v == "force") return Mode::kForce;
  return Mode::kTrial;
}

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
  const Mode mode = ModeFromEnv();
  const int32_t w = op.inputs[1];
  const Dims& wd = dims_[w];
  if (mode == Mode::kOff || (wd.size() != 4 && wd.size() != 3) || wd[0] > SmallOcConv::kMaxOutputs)
    return false;
  if (mode == Mode::kTrial && !MayWin(wd, win)) return false;
  const float* weights = static_cast<const float*>(d_.constant_data[w]);
  if (r_.tensors[w].dtype != DType::kF32 || weights == nullptr) return false;
  std::vector<WinogradPostOp> post;
  if (!WinogradPostOps(op, &post)) return false;
  KilnConvSpec spec = ConvSpec(op, pd, win, std::move(post));
  auto make = [&](const float* wts) {
    spec.weights = wts;
    return SmallOcConv::Make(spec);
  };
  std::shared_ptr<const SmallOcConv> timed = make(nullptr);
  if (timed == nullptr) return false;
  if (mode == Mode::kTrial) {
    const std::string key = DimsToString(pd.src_desc().dims()) +
                            DimsToString(pd.dst_desc().dims()) + DimsToString(wd) +
                            DimsToString(win.strides) + DimsToString(win.pad_l) +
                            DimsToString(win.pad_r) + "/" + std::to_string(spec.threads);
    bool faster = false;
    if (!Memo().Find(key, &faster)) {
      ConvTrial trial = TimeOneDnnConv(pd);
      faster =
          Fastest([&] { timed->Run(trial.src, trial.bias, trial.dst); }, 3) < trial.onednn_seconds;
      Memo().Record(key, faster);
    }
    if (!faster) return false;
  }
  timed.reset();
  std::shared_ptr<const SmallOcConv> chosen = make(weights);
  if (chosen == nullptr) return false;
  plan_->steps.back().small_oc_conv = chosen;
  DropOneDnnWeights();
  return true;
}

}  // namespace kiln::onednn::internal
