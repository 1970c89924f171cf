// The plan builder's choice between oneDNN's direct 3x3 convolution and kiln's Winograd one
// (winograd_conv.h): which tiles a region's error budget allows each convolution (fixed by the
// region's ops, not by timing), then a timed trial among those on the real shape.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;

// The tiles KILN_ONEDNN_WINOGRAD allows: unset, "" or "auto": both (the measured fastest of
// them and oneDNN runs); "0": none (oneDNN always); "2" / "4": only F(2x2) / F(4x4), still
// measured; "force2" / "force4": that one without measuring (A/B runs and tests). Every mode
// is subject to the error budget (F4Allowed): where it refuses F(4x4), "4" measures F(2x2)
// instead and "force4" takes F(2x2).
struct WinogradChoice {
  std::vector<int> tiles;
  bool measure = true;
};

WinogradChoice ChoiceFromEnv() {
  const char* env = std::getenv("KILN_ONEDNN_WINOGRAD");
  std::string v = env != nullptr ? env : "";
  if (v == "0") return {{}, true};
  if (v == "2" || v == "4") return {{v[0] - '0'}, true};
  if (v == "force2" || v == "force4") return {{v[5] - '0'}, false};
  return {{2, 4}, true};
}

// The region's post-ops in Winograd's terms, or false for one it does not do (binary
// operands, other eltwise functions, a second sum).
bool WinogradPostOps(const Op& op, std::vector<WinogradPostOp>* out) {
  bool sum = false;
  for (const PostOp& p : op.post_ops) {
    WinogradPostOp w;
    w.alpha = p.alpha, w.beta = p.beta;
    if (p.kind == PostOpKind::kSum && !sum) {
      w.kind = WinogradPostOp::Kind::kSum;
      sum = true;
    } else if (p.kind == PostOpKind::kEltwise && p.eltwise == EltwiseAlg::kRelu) {
      w.kind = WinogradPostOp::Kind::kRelu;
    } else if (p.kind == PostOpKind::kEltwise && p.eltwise == EltwiseAlg::kClip) {
      w.kind = WinogradPostOp::Kind::kClip;
    } else {
      return false;
    }
    out->push_back(w);
  }
  return true;
}

// Whether F(m x m)'s transformed weights are too large for it to win: over 8 MiB (beyond L2,
// streamed from L3 or memory on every call) and over 16 times src and dst together. Then the
// GEMMs are bound by reading weights 1.8x (F(2x2)) or 4x (F(4x4)) the size of oneDNN's
// (resnet's 512-channel 7x7 convs: 17 / 38 MiB against 0.2 MiB of data; measured no faster),
// and trying them costs plan build the transform and page faults of those bytes.
bool WeightsOutweigh(int m, const Dims& wd, const dnnl::convolution_forward::primitive_desc& pd) {
  const size_t u = static_cast<size_t>((m + 2) * (m + 2) * ((wd[0] + 15) / 16 * 16) *
                                       ((wd[1] + 7) / 8 * 8) * sizeof(float));
  const size_t data = pd.src_desc().get_size() + pd.dst_desc().get_size();
  return u > (size_t{8} << 20) && u > 16 * data;
}

// Seconds of the fastest of `runs` calls of `run` after one warm-up.
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

// The tile chosen for a convolution shape (0: oneDNN's primitive), measured once per process:
// identical convolutions (resnet repeats each of its shapes) then cost one trial, and every
// plan of the process computes them alike (two regions or models with the same layer),
// instead of each following its own timing noise.
class ChoiceMemo {
 public:
  bool Find(const std::string& key, int* tile) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = tiles_.find(key);
    if (it == tiles_.end()) return false;
    *tile = it->second;
    return true;
  }
  void Record(const std::string& key, int tile) {
    std::lock_guard<std::mutex> lock(mu_);
    tiles_.emplace(key, tile);  // a concurrent build's first answer stays
  }

 private:
  std::mutex mu_;
  std::unordered_map<std::string, int> tiles_;
};

ChoiceMemo& Memo() {
  static ChoiceMemo* memo = new ChoiceMemo();
  return *memo;
}

// src and dst dims, top-left paddings and the team size: what the speed depends on; and the
// tiles allowed (a conv the budget denies F(4x4) must not reuse the answer of one allowed it).
std::string ShapeKey(const dnnl::convolution_forward::primitive_desc& pd, const Window& win,
                     const std::vector<int>& tiles) {
  Dims pads = win.pad_l;
  pads.push_back(omp_get_max_threads());
  return DimsToString(pd.src_desc().dims()) + DimsToString(pd.dst_desc().dims()) +
         DimsToString(pads) + DimsToString(Dims(tiles.begin(), tiles.end()));
}

// The accuracy policy. Each convolution or matmul of a region adds a rounding error to what
// follows it, relative to its output's scale; the budget below charges each layer its worst
// per-layer error and sums them. That sum is a depth rule, not a bound: later layers can
// amplify an early error (resnet101: six early F(4x4) layers added ~1.3e-4 of scale where
// the sum predicts 1.8e-5), so the rule is calibrated on the measured models. Per layer,
// against float64 (winograd_conv_test, C = 3..512): oneDNN's direct convolution up to 2e-6
// (kDirectError), F(2x2) up to 9e-7 (never more than direct: always allowed), F(4x4) up to
// 4.2e-6 (kF4Error rounds it up; 1.25e-5 with Lavin's points). The budget is the zoo's
// tolerance, 1e-4 of the output's scale (float32 frameworks keep within it: PyTorch 9.6e-5,
// ONNX Runtime 7.5e-5 on resnet101). The direct error of every accumulating op is spent
// first; what is left pays for F(4x4) at kF4Error - kDirectError a convolution, given in op
// order (early layers: large maps where F(4x4) pays most) until spent. So resnet18 (20
// convs) and vgg11_bn (8) allow every 3x3 conv F(4x4), resnet34 (36) 9, resnet50 (53),
// resnet101 (104) and densenet121 (120) none, their direct convolutions alone taking the
// budget: resnet101 measured 2.3e-4 with F(4x4) on six early layers, 9.2e-5 without. Fixed
// by the region's ops, so every plan and every run has the same worst case whatever the
// timing picks.
constexpr double kDirectError = 2e-6, kF4Error = 5e-6, kErrorBudget = 1e-4;

// Whether `op` may run as Winograd at all: a dense 3x3 stride-1 Conv with constant weights.
bool WinogradShaped(const Op& op, const Dims& wd, const void* weights) {
  auto ones = [](const Dims& d) {
    return std::all_of(d.begin(), d.end(), [](int64_t v) { return v == 1; });
  };
  return op.kind == OpKind::kConv && op.group == 1 && weights != nullptr && wd.size() == 4 &&
         wd[2] == 3 && wd[3] == 3 && ones(op.strides) && ones(op.dilations);
}

}  // namespace

// Per op of the region, whether the error budget (above) allows it F(4x4).
std::vector<bool> Builder::F4Allowed() const {
  int accumulating = 0;
  for (const Op& op : r_.ops)
    accumulating += op.kind == OpKind::kConv || op.kind == OpKind::kMatMul;
  double left = kErrorBudget - accumulating * kDirectError;
  std::vector<bool> allowed(r_.ops.size(), false);
  for (size_t i = 0; i < r_.ops.size(); ++i) {
    const Op& op = r_.ops[i];
    if (op.kind != OpKind::kConv || op.inputs.size() < 2) continue;
    const int32_t w = op.inputs[1];
    if (!WinogradShaped(op, dims_[w], d_.constant_data[w])) continue;
    if (left < kF4Error - kDirectError) break;
    allowed[i] = true;
    left -= kF4Error - kDirectError;
  }
  return allowed;
}

// Which of `candidates` (in order of growing error) beats oneDNN's primitive, the last step
// of the plan: each runs on scratch buffers of the real shape (one warm-up, three timed runs,
// the minimum counts: robust to a loaded machine). A candidate replaces the primitive only
// when more than 5% faster, so noise keeps oneDNN, and F(4x4), whose error is ~7x that of a
// direct convolution (winograd_conv.cc), replaces F(2x2) only when 10% faster. Returns the
// index + 1, or 0 for oneDNN.
size_t Builder::FasterConv(const dnnl::convolution_forward::primitive_desc& pd,
                           const std::vector<std::shared_ptr<const WinogradConv>>& candidates) {
  Step& step = plan_->steps.back();
  std::vector<std::shared_ptr<void>> owned;
  std::unordered_map<int, memory> args;
  for (const auto& [arg, slot] : step.args) {
    const Slot& s = plan_->slots[slot];
    if (arg == DNNL_ARG_SCRATCHPAD) continue;
    void* p = s.kind == Slot::Kind::kConst ? s.ptr : TrialBuffer(s.md.get_size(), &owned);
    args.emplace(arg, memory(s.md, Engine(), p));
  }
  args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), Engine(),
                                           TrialBuffer(pd.scratchpad_desc().get_size(), &owned)));
  dnnl::stream stream(Engine());
  const float* src = static_cast<const float*>(args.at(DNNL_ARG_SRC).get_data_handle());
  float* dst = static_cast<float*>(args.at(DNNL_ARG_DST).get_data_handle());
  const float* bias = args.count(DNNL_ARG_BIAS)
                          ? static_cast<const float*>(args.at(DNNL_ARG_BIAS).get_data_handle())
                          : nullptr;
  double fastest = Fastest([&] { step.prim.execute(stream, args), stream.wait(); }, 3);
  size_t best = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    void* scratch = TrialBuffer(candidates[i]->scratch_bytes(), &owned);
    double t = Fastest([&] { candidates[i]->Run(src, bias, dst, scratch); }, 3);
    if (t < (best == 0 ? 0.95 : 0.9) * fastest) fastest = t, best = i + 1;
  }
  return best;
}

void Builder::Winograd(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                       const Window& win) {
  WinogradChoice choice = ChoiceFromEnv();
  if (f4_allowed_.empty()) f4_allowed_ = F4Allowed();
  if (!f4_allowed_[op_index_]) {
    for (int& m : choice.tiles) m = 2;  // "4" and "force4" fall back to F(2x2)
    choice.tiles.erase(std::unique(choice.tiles.begin(), choice.tiles.end()),
                       choice.tiles.end());
  }
  std::vector<WinogradPostOp> post;
  if (choice.tiles.empty() || !WinogradPostOps(op, &post)) return;
  const int32_t w = op.inputs[1];
  const Dims& wd = dims_[w];
  const float* weights = static_cast<const float*>(d_.constant_data[w]);
  if (r_.tensors[w].dtype != DType::kF32 || weights == nullptr) return;
  const std::string key = choice.measure ? ShapeKey(pd, win, choice.tiles) : "";
  int known = -1;
  if (choice.measure && Memo().Find(key, &known)) {
    if (known == 0) return;
    choice.tiles = {known};
  }
  // Timed candidates run on zero weights (as fast as real ones): only the chosen tile's
  // weights are transformed, once.
  const bool trial = choice.measure && known < 0;
  auto make = [&](int m, const float* wts) {
    return WinogradConv::Make(pd.src_desc(), pd.dst_desc(), wts, wd, win.strides, win.dilations,
                              win.pad_l, post, m, omp_get_max_threads());
  };
  std::shared_ptr<const WinogradConv> chosen;
  if (!trial) {
    chosen = make(choice.tiles.front(), weights);  // forced, or measured before: one tile
  } else {
    std::vector<std::shared_ptr<const WinogradConv>> candidates;
    for (int m : choice.tiles) {
      if (WeightsOutweigh(m, wd, pd)) continue;
      if (auto c = make(m, nullptr)) candidates.push_back(c);
    }
    if (candidates.empty()) return;
    const size_t best = FasterConv(pd, candidates);
    const int m = best == 0 ? 0 : static_cast<int>(candidates[best - 1]->tile());
    Memo().Record(key, m);
    if (m == 0) return;
    candidates.clear();  // the zero weights' memory goes before the real ones are made
    chosen = make(m, weights);
  }
  if (chosen == nullptr) return;
  plan_->steps.back().winograd = chosen;
  scratch_ = std::max(scratch_, chosen->scratch_bytes());
  DropOneDnnWeights();
}

// oneDNN's reordered weights of the step just given to Winograd are never read again (its
// own are transformed): the cache forgets them and this plan lets go of its share, so they
// are freed unless another plan of the op (another shape) runs oneDNN's convolution. The
// slot keeps its descriptor, with no data. The search runs from the back: Weights() pushed
// this step's weights last, so it ends at the first comparison (O(1) per conv, not O(n)).
void Builder::DropOneDnnWeights() {
  for (const auto& [arg, slot] : plan_->steps.back().args) {
    Slot& s = plan_->slots[slot];
    if (arg != DNNL_ARG_WEIGHTS || s.kind != Slot::Kind::kConst) continue;
    weights_.Drop(op_index_, s.md);
    auto& held = plan_->weights;
    auto it = std::find_if(held.rbegin(), held.rend(),
                           [&](const std::shared_ptr<uint8_t>& w) { return w.get() == s.ptr; });
    if (it != held.rend()) held.erase(std::next(it).base());
    s.ptr = nullptr;
  }
}

}  // namespace kiln::onednn::internal
