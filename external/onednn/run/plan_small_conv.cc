// The plan builder's choice between oneDNN's convolution and kiln's small-input-channel one
// (small_conv.h) for a convolution of 1-4 input channels: a rule admits the shapes where it
// measured faster, then a timed trial on the real shape guards, once per shape and team size
// in a process.
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;

// The trial's answers by shape (src and dst descriptors, kernel, strides, paddings, team
// size), once per process (ChoiceMemo).
ChoiceMemo<bool>& Memo() {
  static ChoiceMemo<bool>* memo = new ChoiceMemo<bool>();
  return *memo;
}

// A descriptor's dims and size (abcd and aBcd8b differ in size for 1-4 channels).
std::string MdKey(const memory::desc& md) {
  return DimsToString(md.dims()) + std::to_string(md.get_size());
}

// Whether kiln's convolution can beat oneDNN's on this shape at all (the trial then checks):
// stride 1 and at least 25 taps per channel. small_conv_bench at 1 and 2 threads: espcn's
// 1-channel 5x5 and fast_style's 3-channel 9x9 run 2-2.3x faster than oneDNN's jit:avx2;
// every 3x3 layer (stride 1 or 2, 1 or 3 channels) and resnet's 7x7 stride-2 stem, where
// oneDNN's is near the FMA peak, 1.1-3x slower. A timed trial alone was not enough on a
// loaded machine (load 10+): it picked kiln's for resnet's stem even with a 20% margin.
bool MayWin(const Dims& wd, const Window& win) {
  return win.strides.size() == 2 && win.strides[0] == 1 && win.strides[1] == 1 &&
         wd[2] * wd[3] >= 25;
}

}  // namespace

// The trial runs oneDNN's primitive and kiln's convolution (zero weights: as fast as real
// ones) on the step's trial buffers, one warm-up and three timed runs each, the minimum
// counting; kiln's replaces the primitive unless it measures slower (MayWin admits only
// shapes where it is ~2x faster; the trial guards against a CPU unlike this one). Its answer
// is not kept in tuning records (RegionTuning holds Winograd tiles only): a load with a record
// still runs this trial, ~4 runs of each admitted first-layer convolution.
bool Builder::SmallIc(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                      const Window& win) {
  const KernelMode mode = KernelModeFromEnv("KILN_ONEDNN_SMALL_IC");
  const Dims& wd = dims_[op.inputs[1]];
  if (mode == KernelMode::kOff || wd.size() != 4 || wd[1] > SmallConv::kMaxChannels) return false;
  if (mode == KernelMode::kTrial && !MayWin(wd, win)) return false;
  std::shared_ptr<const SmallConv> chosen = TrialDirectConv<SmallConv>(op, pd, win, mode, Memo());
  if (chosen == nullptr) return false;
  plan_->steps.back().small_conv = std::move(chosen);
  DropOneDnnWeights();
  return true;
}

KernelMode KernelModeFromEnv(const char* variable) {
  const char* env = std::getenv(variable);
  const std::string v = env != nullptr ? env : "";
  if (v == "0") return KernelMode::kOff;
  if (v == "force") return KernelMode::kForce;
  return KernelMode::kTrial;
}

template <typename Conv>
std::shared_ptr<const Conv> Builder::TrialDirectConv(
    const Op& op, const dnnl::convolution_forward::primitive_desc& pd, const Window& win,
    KernelMode mode, ChoiceMemo<bool>& memo) {
  const int32_t w = op.inputs[1];
  const float* weights = static_cast<const float*>(d_.constant_data[w]);
  if (r_.tensors[w].dtype != DType::kF32 || weights == nullptr) return nullptr;
  std::vector<WinogradPostOp> post;
  if (!WinogradPostOps(op, &post)) return nullptr;
  KilnConvSpec spec = ConvSpec(op, pd, win, std::move(post));
  auto make = [&](const float* wts) {
    spec.weights = wts;
    return Conv::Make(spec);
  };
  std::shared_ptr<const Conv> timed = make(nullptr);
  if (timed == nullptr) return nullptr;
  if (mode == KernelMode::kTrial) {
    const std::string key = MdKey(pd.src_desc()) + MdKey(pd.dst_desc()) + DimsToString(dims_[w]) +
                            DimsToString(win.strides) + DimsToString(win.pad_l) +
                            DimsToString(win.pad_r) + "/" + std::to_string(spec.threads);
    bool faster = false;
    if (!memo.Find(key, &faster)) {
      ConvTrial trial = TimeOneDnnConv(pd);
      faster =
          Fastest([&] { timed->Run(trial.src, trial.bias, trial.dst); }, 3) < trial.onednn_seconds;
      memo.Record(key, faster);
    }
    if (!faster) return nullptr;
  }
  timed.reset();  // the zero weights' memory goes before the real ones are packed
  return make(weights);
}

template std::shared_ptr<const SmallConv> Builder::TrialDirectConv<SmallConv>(
    const Op&, const dnnl::convolution_forward::primitive_desc&, const Window&, KernelMode,
    ChoiceMemo<bool>&);
template std::shared_ptr<const SmallOcConv> Builder::TrialDirectConv<SmallOcConv>(
    const Op&, const dnnl::convolution_forward::primitive_desc&, const Window&, KernelMode,
    ChoiceMemo<bool>&);

}  // namespace kiln::onednn::internal
