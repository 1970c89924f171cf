// The plan builder's choice between oneDNN's direct 3x3 convolution and kiln's Winograd one
// (winograd_conv.h): by a timed trial of each on the real shape at plan build.
#include <omp.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
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

// Scratch buffers for a trial: values in [-0.75, 0.75] (speed does not depend on them; this
// avoids denormals), freed with the trial.
struct TrialBuffers {
  std::vector<std::shared_ptr<void>> owned;
  void* Get(size_t bytes) {
    bytes = AlignUp(std::max<size_t>(bytes, 4));
    void* p = std::aligned_alloc(kAlign, bytes);
    if (p == nullptr) throw std::bad_alloc();
    owned.emplace_back(p, [](void* q) { std::free(q); });
    float* f = static_cast<float*>(p);
    for (size_t i = 0; i < bytes / sizeof(float); ++i)
      f[i] = 0.125f * static_cast<float>(i % 13) - 0.75f;
    return p;
  }
};

}  // namespace

// Winograd candidates are made for the tiles the environment allows, then oneDNN's primitive
// and each candidate run on scratch buffers of the real shape (one warm-up, three timed runs,
// the minimum counts: robust to a loaded machine); a candidate replaces the primitive only
// when more than 5% faster, so noise keeps oneDNN, and F(4x4), whose error is ~10x that of a
// direct convolution (winograd_conv.cc), replaces F(2x2) only when 10% faster.
void Builder::Winograd(const Op& op, const dnnl::convolution_forward::primitive_desc& pd,
                       const Window& win) {
  WinogradChoice choice = ChoiceFromEnv();
  std::vector<WinogradPostOp> post;
  if (choice.tiles.empty() || !WinogradPostOps(op, &post)) return;
  const int32_t w = op.inputs[1];
  const Dims& wd = dims_[w];
  const float* weights = static_cast<const float*>(d_.constant_data[w]);
  if (r_.tensors[w].dtype != DType::kF32 || weights == nullptr) return;
  std::vector<std::shared_ptr<const WinogradConv>> candidates;
  for (int m : choice.tiles) {
    if (choice.measure && WeightsOutweigh(m, wd, pd)) continue;
    auto c = WinogradConv::Make(pd.src_desc(), pd.dst_desc(), weights, wd, win.strides,
                                win.dilations, win.pad_l, post, m, omp_get_max_threads());
    if (c != nullptr) candidates.push_back(c);
  }
  if (candidates.empty()) return;
  Step& step = plan_->steps.back();
  size_t best = 0;
  if (choice.measure) {
    TrialBuffers buf;
    std::unordered_map<int, memory> args;
    for (const auto& [arg, slot] : step.args) {
      const Slot& s = plan_->slots[slot];
      if (arg == DNNL_ARG_SCRATCHPAD) continue;
      void* p = s.kind == Slot::Kind::kConst ? s.ptr : buf.Get(s.md.get_size());
      args.emplace(arg, memory(s.md, Engine(), p));
    }
    args.emplace(DNNL_ARG_SCRATCHPAD, memory(pd.scratchpad_desc(), Engine(),
                                             buf.Get(pd.scratchpad_desc().get_size())));
    dnnl::stream stream(Engine());
    const float* src = static_cast<const float*>(args.at(DNNL_ARG_SRC).get_data_handle());
    float* dst = static_cast<float*>(args.at(DNNL_ARG_DST).get_data_handle());
    const float* bias = args.count(DNNL_ARG_BIAS)
                            ? static_cast<const float*>(args.at(DNNL_ARG_BIAS).get_data_handle())
                            : nullptr;
    double fastest = Fastest([&] { step.prim.execute(stream, args), stream.wait(); }, 3);
    for (size_t i = 0; i < candidates.size(); ++i) {
      void* scratch = buf.Get(candidates[i]->scratch_bytes());
      double t = Fastest([&] { candidates[i]->Run(src, bias, dst, scratch); }, 3);
      // Each step up in error (oneDNN -> F(2x2) -> F(4x4)) must pay: 5% faster than oneDNN,
      // 10% faster than F(2x2) (candidates come in that order).
      if (t < (best == 0 ? 0.95 : 0.9) * fastest) fastest = t, best = i + 1;
    }
    if (best == 0) return;
    --best;
  }
  step.winograd = candidates[best];
  scratch_ = std::max(scratch_, step.winograd->scratch_bytes());
}

}  // namespace kiln::onednn::internal
