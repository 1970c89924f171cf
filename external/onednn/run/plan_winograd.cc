// The plan builder's choice between oneDNN's direct 3x3 convolution and kiln's Winograd one
// (winograd_conv.h): by a timed trial of each on the real shape at plan build.
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
// measured; "force2" / "force4": that one without measuring (A/B runs and tests).
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

// src and dst dims, top-left paddings and the team size: what the speed depends on.
std::string ShapeKey(const dnnl::convolution_forward::primitive_desc& pd, const Window& win) {
  Dims pads = win.pad_l;
  pads.push_back(omp_get_max_threads());
  return DimsToString(pd.src_desc().dims()) + DimsToString(pd.dst_desc().dims()) +
         DimsToString(pads);
}

}  // namespace

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
  std::vector<WinogradPostOp> post;
  if (choice.tiles.empty() || !WinogradPostOps(op, &post)) return;
  const int32_t w = op.inputs[1];
  const Dims& wd = dims_[w];
  const float* weights = static_cast<const float*>(d_.constant_data[w]);
  if (r_.tensors[w].dtype != DType::kF32 || weights == nullptr) return;
  const std::string key = choice.measure ? ShapeKey(pd, win) : "";
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
// slot keeps its descriptor, with no data.
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
