// The plan builder's choice between oneDNN's direct 3x3 convolution and kiln's Winograd one
// (winograd_conv.h): which tiles a region's error budget allows each convolution (fixed by the
// region's ops, not by timing), then a timed trial among those on the real shape.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/dtype.h"
#include "base/tensor.h"
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

// The tile chosen for a convolution shape (0: oneDNN's primitive), measured once per process:
// identical convolutions (resnet repeats each of its shapes) then cost one trial.
ChoiceMemo<int>& Memo() {
  static ChoiceMemo<int>* memo = new ChoiceMemo<int>();
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

// The accuracy policy. F(4x4) rounds 2-5x worse than a direct convolution per layer (against
// float64, winograd_conv_test, C = 3..512: oneDNN's direct convolution up to 2e-6 of the
// output's scale, F(2x2) up to 9e-7, never worse than direct: always allowed; F(4x4) up to
// 4.2e-6), and what that costs at a region's outputs depends on how the layers after it
// amplify it, which no count of layers predicts: resnet101 (zoo3, BN calibrated, float32
// frameworks at 7.5e-5 .. 9.6e-5 of the scale vs float64) went past the zoo's 1e-4 with
// F(4x4) on six early layers, densenet121 kept 5.9e-7 with it on 42. So a probe measures it
// (ProbeWinograd): the region's plan runs once with F(2x2) wherever Winograd applies (the
// reference: direct-convolution accuracy) and once with F(4x4) wherever it may run (the trial
// could pick it anywhere), on a fixed synthetic input; F(4x4)'s difference must stay within
// kF4Share of each output's scale, a tenth of the zoo's budget, so a network whose float32
// error already fills the budget stays within it. When it does not, F(4x4) is taken from the
// earliest layers (whose errors pass the most layers after them) until it does, by bisection
// over where it starts. The timed trial then picks among the allowed tiles: a subset of the
// probed F(4x4) layers (fewer F(4x4) layers, no larger difference).
constexpr double kF4Share = 1e-5;

// The static depth rule, for a region the probe cannot run (non-f32 inputs or outputs): each
// accumulating op spends kDirectError of a kErrorBudget (the zoo's tolerance), what is left
// buys F(4x4) at kF4Error - kDirectError a convolution in op order. A calibrated rule, not a
// bound (later layers can amplify an early error).
constexpr double kDirectError = 2e-6, kF4Error = 5e-6, kErrorBudget = 1e-4;

// Whether `op` may run as Winograd at all: a dense 3x3 stride-1 Conv with constant weights.
bool WinogradShaped(const Op& op, const Dims& wd, const void* weights) {
  auto ones = [](const Dims& d) {
    return std::all_of(d.begin(), d.end(), [](int64_t v) { return v == 1; });
  };
  return op.kind == OpKind::kConv && op.group == 1 && weights != nullptr && wd.size() == 4 &&
         wd[2] == 3 && wd[3] == 3 && ones(op.strides) && ones(op.dilations);
}

// Whether the region has a convolution Winograd may run (its weights' dims are the constant's).
bool HasWinogradCandidate(const RegionData& d) {
  std::vector<const Dims*> dims(d.region.tensors.size(), nullptr);
  for (const BoundTensor& c : d.region.constants) dims[c.tensor] = &c.dims;
  for (const Op& op : d.region.ops) {
    if (op.kind != OpKind::kConv || op.inputs.size() < 2) continue;
    const int32_t w = op.inputs[1];
    if (dims[w] != nullptr && WinogradShaped(op, *dims[w], d.constant_data[w])) return true;
  }
  return false;
}

// A deterministic value in [-1.5, 1.5) for element `i` of input `input` (splitmix64): the
// probe's input, about a normalized image's spread.
float ProbeValue(size_t input, size_t i) {
  uint64_t z = (static_cast<uint64_t>(input) << 48) + i + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<float>((z >> 40) * (1.0 / (1 << 24)) * 3.0 - 1.5);
}

// One probe run: the region's outputs (f32 ones as floats, others left empty) under `limits`
// on the probe input, and the ops that ran as F(4x4) when `f4_ops` is given; nullopt when the
// plan fails to build or run (the real build reports the error).
using Outputs = std::vector<std::vector<float>>;
std::optional<Outputs> ProbeRun(const RegionData& d, WeightCache& weights,
                                const std::vector<Dims>& inputs, const WinogradLimits& limits,
                                std::vector<int>* f4_ops) {
  const RegionProgram& r = d.region;
  std::atomic<int64_t> primitives{0};  // not the region's count: these plans are thrown away
  try {
    auto built = Builder(d, weights, &primitives, limits).Build(inputs);
    if (!built.ok()) return std::nullopt;
    Plan& plan = **built;
    for (const Step& step : plan.steps) {
      if (f4_ops != nullptr && step.winograd != nullptr && step.winograd->tile() == 4)
        f4_ops->push_back(step.op);
    }
    std::vector<std::vector<uint8_t>> bytes;
    std::vector<Tensor> tensors;
    auto add = [&](const Dims& dims, DType dtype) {
      auto shape = Shape::Make(dims.data(), static_cast<int>(dims.size()));
      if (!shape.ok()) return false;
      bytes.emplace_back(shape->NumElements() * DTypeSize(dtype));
      tensors.push_back(Tensor::Wrap(bytes.back().data(), dtype, *shape));
      return true;
    };
    bytes.reserve(inputs.size() + plan.output_dims.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!add(inputs[i], DType::kF32)) return std::nullopt;
      float* x = reinterpret_cast<float*>(bytes.back().data());
      for (size_t k = 0; k < bytes.back().size() / sizeof(float); ++k) x[k] = ProbeValue(i, k);
    }
    for (size_t i = 0; i < plan.output_dims.size(); ++i) {
      if (!add(plan.output_dims[i], r.tensors[r.outputs[i]].dtype)) return std::nullopt;
    }
    std::vector<const Tensor*> args;
    for (const Tensor& t : tensors) args.push_back(&t);
    const int ni = static_cast<int>(inputs.size());
    if (!ExecutePlan(plan, d, args.data(), ni, static_cast<int>(plan.output_dims.size())).ok())
      return std::nullopt;
    Outputs out(plan.output_dims.size());
    for (size_t i = 0; i < out.size(); ++i) {
      if (r.tensors[r.outputs[i]].dtype != DType::kF32) continue;
      const float* y = reinterpret_cast<const float*>(bytes[ni + i].data());
      out[i].assign(y, y + bytes[ni + i].size() / sizeof(float));
    }
    return out;
  } catch (const dnnl::error&) {
    return std::nullopt;
  } catch (const std::bad_alloc&) {
    return std::nullopt;
  }
}

// Whether every f32 output of `got` is within kF4Share of its scale (largest finite |value|)
// of `want`'s, finite where `want` is.
bool WithinShare(const Outputs& got, const Outputs& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    double scale = 0, err = 0;
    for (float v : want[i]) {
      if (std::isfinite(v)) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    }
    for (size_t k = 0; k < want[i].size(); ++k) {
      if (!std::isfinite(want[i][k])) continue;
      if (!std::isfinite(got[i][k])) return false;
      err = std::max(err, std::fabs(static_cast<double>(got[i][k]) - want[i][k]));
    }
    if (err > kF4Share * scale) return false;
  }
  return true;
}

}  // namespace

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
    } else if (p.kind == PostOpKind::kEltwise && p.eltwise == EltwiseAlg::kSigmoid) {
      w.kind = WinogradPostOp::Kind::kSigmoid;
    } else if (p.kind == PostOpKind::kEltwise && p.eltwise == EltwiseAlg::kTanh) {
      w.kind = WinogradPostOp::Kind::kTanh;
    } else if (p.kind == PostOpKind::kEltwise && p.eltwise == EltwiseAlg::kSwish) {
      w.kind = WinogradPostOp::Kind::kSwish;
    } else if (p.kind == PostOpKind::kEltwise && p.eltwise == EltwiseAlg::kHardSwish) {
      w.kind = WinogradPostOp::Kind::kHardSwish;
    } else if (p.kind == PostOpKind::kEltwise && p.eltwise == EltwiseAlg::kLinear) {
      w.kind = WinogradPostOp::Kind::kLinear;
    } else {
      return false;
    }
    out->push_back(w);
  }
  return true;
}

WinogradLimits ProbeWinograd(const RegionData& data, WeightCache& weights,
                             const std::vector<Dims>& inputs) {
  const RegionProgram& r = data.region;
  const std::vector<int> tiles = ChoiceFromEnv().tiles;
  if (std::find(tiles.begin(), tiles.end(), 4) == tiles.end() || !HasWinogradCandidate(data))
    return {};  // no F(4x4) in any case
  WinogradLimits budget;
  budget.budget = true;
  for (const BoundTensor& in : r.inputs) {
    if (r.tensors[in.tensor].dtype != DType::kF32) return budget;
  }
  if (std::none_of(r.outputs.begin(), r.outputs.end(),
                   [&](int32_t t) { return r.tensors[t].dtype == DType::kF32; }))
    return budget;
  auto transformed = std::make_shared<
      std::unordered_map<std::string, std::shared_ptr<const WinogradConv>>>();
  WinogradLimits f2{0, 2, false, transformed}, f4{0, 4, false, transformed};
  std::vector<int> f4_ops;
  const std::optional<Outputs> want = ProbeRun(data, weights, inputs, f2, nullptr);
  if (!want) return budget;
  std::optional<Outputs> got = ProbeRun(data, weights, inputs, f4, &f4_ops);
  if (!got) return budget;
  if (WithinShare(*got, *want)) return {0, 0, false, transformed, true};
  // F(4x4) from f4_ops[k] on: within at k = n (none); the fewest dropped that are within.
  const int n = static_cast<int>(f4_ops.size());
  int lo = 1, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    f4.f4_from = f4_ops[mid];
    got = ProbeRun(data, weights, inputs, f4, nullptr);
    if (!got) return budget;
    if (WithinShare(*got, *want)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return {hi == n ? static_cast<int>(r.ops.size()) : f4_ops[hi], 0, false, transformed, true};
}

// Per op of the region, whether limits_ (the probe's, or the static budget) allow it F(4x4).
std::vector<bool> Builder::F4Allowed() const {
  std::vector<bool> allowed(r_.ops.size(), false);
  if (!limits_.budget) {
    for (size_t i = std::max(limits_.f4_from, 0); i < r_.ops.size(); ++i) allowed[i] = true;
    return allowed;
  }
  int accumulating = 0;
  for (const Op& op : r_.ops)
    accumulating += op.kind == OpKind::kConv || op.kind == OpKind::kMatMul;
  double left = kErrorBudget - accumulating * kDirectError;
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
  ConvTrial trial = TimeOneDnnConv(pd);
  double fastest = trial.onednn_seconds;
  size_t best = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    void* scratch = TrialBuffer(candidates[i]->scratch_bytes(), &trial.owned);
    double t = Fastest([&] { candidates[i]->Run(trial.src, trial.bias, trial.dst, scratch); }, 3);
    if (t < (best == 0 ? 0.95 : 0.9) * fastest) fastest = t, best = i + 1;
  }
  return best;
}

Builder::ConvTrial Builder::TimeOneDnnConv(const dnnl::convolution_forward::primitive_desc& pd) {
  ConvTrial trial;
  Step& step = plan_->steps.back();
  for (const auto& [arg, slot] : step.args) {
    const Slot& s = plan_->slots[slot];
    if (arg == DNNL_ARG_SCRATCHPAD) continue;
    void* p = s.kind == Slot::Kind::kConst ? s.ptr : TrialBuffer(s.md.get_size(), &trial.owned);
    trial.args.emplace(arg, memory(s.md, Engine(), p));
  }
  const memory::desc scratchpad = pd.scratchpad_desc();
  void* pad = TrialBuffer(scratchpad.get_size(), &trial.owned);
  trial.args.emplace(DNNL_ARG_SCRATCHPAD, memory(scratchpad, Engine(), pad));
  auto data = [&](int arg) { return static_cast<float*>(trial.args.at(arg).get_data_handle()); };
  trial.src = data(DNNL_ARG_SRC);
  trial.dst = data(DNNL_ARG_DST);
  trial.bias = trial.args.count(DNNL_ARG_BIAS) ? data(DNNL_ARG_BIAS) : nullptr;
  dnnl::stream stream(Engine());
  trial.onednn_seconds = Fastest([&] { step.prim.execute(stream, trial.args), stream.wait(); }, 3);
  return trial;
}

KilnConvSpec Builder::ConvSpec(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                               const Window& win, std::vector<WinogradPostOp> post) const {
  KilnConvSpec spec;
  spec.src = pd.src_desc();
  spec.dst = pd.dst_desc();
  spec.weight_dims = dims_[op.inputs[1]];
  spec.strides = win.strides;
  spec.dilations = win.dilations;
  spec.pad_l = win.pad_l;
  spec.post_ops = std::move(post);
  spec.threads = omp_get_max_threads();  // the op's team (TeamSize)
  return spec;
}

void Builder::Winograd(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                       const Window& win) {
  WinogradChoice choice = ChoiceFromEnv();
  if (limits_.forced != 0) {
    const bool outweighs = limits_.forced == 4 && WeightsOutweigh(4, dims_[op.inputs[1]], pd);
    choice = {{outweighs ? 2 : limits_.forced}, false};  // as the trial would never take it
  }
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
  int known = choice.measure ? RecordedTile(choice.tiles) : -1;
  if (known < 0 && choice.measure) Memo().Find(key, &known);
  if (known >= 0) Chose(known);
  if (known == 0) return;
  if (known > 0) choice.tiles = {known};
  // Timed candidates run on zero weights (as fast as real ones): only the chosen tile's
  // weights are transformed, once.
  const bool trial = choice.measure && known < 0;
  KilnConvSpec spec = ConvSpec(op, pd, win, std::move(post));
  auto make = [&](int m, const float* wts) {
    spec.weights = wts;
    return WinogradConv::Make(spec, m);
  };
  // With real weights: made once per tile for the probe's plans and the final one.
  auto transformed = [&](int m) {
    if (limits_.transformed == nullptr) return make(m, weights);
    const std::string layer = std::to_string(op_index_) + "/" + std::to_string(m) +
                              ShapeKey(pd, win, {});
    auto [it, added] = limits_.transformed->try_emplace(layer);
    if (added) it->second = make(m, weights);
    return it->second;
  };
  std::shared_ptr<const WinogradConv> chosen;
  if (!trial) {
    chosen = transformed(choice.tiles.front());  // forced, or measured before: one tile
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
    Chose(m);
    if (m == 0) return;
    candidates.clear();  // the zero weights' memory goes before the real ones are made
    chosen = transformed(m);
  }
  if (chosen == nullptr) return;
  plan_->steps.back().winograd = chosen;
  scratch_ = std::max(scratch_, chosen->scratch_bytes());
  DropOneDnnWeights();
}

// The tile a tuning record chose for the op being built (0: oneDNN's convolution), or -1 when
// there is no record for it or the mode no longer allows that tile (KILN_ONEDNN_WINOGRAD, the
// F(4x4) limit): the trial decides then, as without a record.
int Builder::RecordedTile(const std::vector<int>& allowed) const {
  if (limits_.tuned == nullptr) return -1;
  for (const TunedTile& t : *limits_.tuned) {
    if (t.op != op_index_) continue;
    if (t.tile == 0 || std::find(allowed.begin(), allowed.end(), t.tile) != allowed.end())
      return t.tile;
    return -1;
  }
  return -1;
}

// Notes `tile` as the op's measured choice in limits_.chosen, if kept: once per op (an op
// rebuilt from plain copies keeps the last).
void Builder::Chose(int tile) {
  if (limits_.chosen == nullptr) return;
  std::vector<TunedTile>& chosen = *limits_.chosen;
  chosen.erase(std::remove_if(chosen.begin(), chosen.end(),
                              [&](const TunedTile& t) { return t.op == op_index_; }),
               chosen.end());
  chosen.push_back({op_index_, static_cast<uint8_t>(tile)});
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
    // A probe's plan keeps them cached: the next plan of the probe, or the final one,
    // reorders no weights again (the final one drops those it does not run).
    if (limits_.forced == 0) weights_.Drop(op_index_, s.md);
    auto& held = plan_->weights;
    auto it = std::find_if(held.rbegin(), held.rend(),
                           [&](const std::shared_ptr<uint8_t>& w) { return w.get() == s.ptr; });
    if (it != held.rend()) held.erase(std::next(it).base());
    s.ptr = nullptr;
  }
}

}  // namespace kiln::onednn::internal
