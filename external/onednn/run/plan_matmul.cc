// The plan builder's MatMul (MatMul and Gemm): shapes with batch broadcasting, the collapse of
// a batch sharing one weight into a single GEMM, the weight layout (measured per M bucket),
// post-ops, and a trailing gelu_erf as its own step.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <new>
#include <string>
#include <unordered_map>

#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using dt = memory::data_type;

// GEMMs below this many multiply-adds keep oneDNN's layout: timing them costs more than any
// difference could save.
constexpr int64_t kTuneMinMacs = int64_t{1} << 16;

int64_t NextPow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

}  // namespace

// The dims of one MatMul as the op computes them and as its primitive sees them.
struct Builder::MatMulShapes {
  size_t r = 0;           // the rank both operands are aligned to
  Dims out;               // the op's output
  Dims ad, bd, bias;      // A and B (last two dims swapped when transposed), the bias (empty: none)
  bool collapse = false;  // leading dims folded into M (see Collapsible)
  Dims out_p, ad_p, bd_p, bias_p;  // as the primitive sees them (rank 2 when collapsed)
  memory::desc a_md, b_md, bias_md;
};

StatusOr<Builder::MatMulShapes> Builder::MatMulShapesOf(const Op& op) {
  int32_t a = op.inputs[0], b = op.inputs[1];
  MatMulShapes s;
  size_t r = s.r = std::max(dims_[a].size(), dims_[b].size());
  s.ad = AlignRank(dims_[a], r);
  s.bd = AlignRank(dims_[b], r);
  if (op.trans_a) std::swap(s.ad[r - 1], s.ad[r - 2]);
  if (op.trans_b) std::swap(s.bd[r - 1], s.bd[r - 2]);
  if (s.ad[r - 1] != s.bd[r - 2])
    return InvalidArgument("inner dims of " + DimsToString(dims_[a]) + " and " +
                           DimsToString(dims_[b]) + " differ");
  s.out.resize(r);
  for (size_t i = 0; i + 2 < r; ++i) {
    if (s.ad[i] != s.bd[i] && s.ad[i] != 1 && s.bd[i] != 1)
      return InvalidArgument("batch dims of " + DimsToString(dims_[a]) + " and " +
                             DimsToString(dims_[b]) + " do not broadcast");
    s.out[i] = s.ad[i] == 1 ? s.bd[i] : s.ad[i];
  }
  s.out[r - 2] = s.ad[r - 2];
  s.out[r - 1] = s.bd[r - 1];
  if (op.inputs.size() == 3) {
    s.bias = AlignRank(dims_[op.inputs[2]], r);
    for (size_t i = 0; i < r; ++i) {
      if (s.bias[i] != 1 && s.bias[i] != s.out[i])
        return InvalidArgument("bias " + DimsToString(dims_[op.inputs[2]]) +
                               " does not broadcast into " + DimsToString(s.out));
    }
  }
  s.collapse = Collapsible(op, s);
  s.out_p = s.out;
  s.ad_p = s.ad;
  s.bd_p = s.bd;
  s.bias_p = s.bias;
  if (s.collapse) {
    int64_t rows = Product(Sub(s.out, 0, r - 1));
    s.out_p = {rows, s.out[r - 1]};
    s.ad_p = {rows, s.ad[r - 1]};
    s.bd_p = Sub(s.bd, r - 2, r);
    if (!s.bias.empty()) s.bias_p = CollapseOperand(s.bias, s.out);
  }
  s.a_md = op.trans_a ? TransposedMd(s.ad_p) : PlainMd(s.ad_p);
  s.b_md = op.trans_b ? TransposedMd(s.bd_p) : PlainMd(s.bd_p);
  s.bias_md = s.bias_p.empty() ? memory::desc() : PlainMd(s.bias_p);
  return s;
}

// A weight shared by every batch (B's leading dims all 1) and a row-major A: the batched
// product is one [batch * M, K] x [K, N] GEMM over the same bytes. oneDNN runs a batch of
// small products (e.g. [seq, 1, K] x [K, N] from seq-first attention projections) an order
// of magnitude slower than the one large one. The bias and binary post-op operands must
// collapse to matrices too.
bool Builder::Collapsible(const Op& op, const MatMulShapes& s) const {
  bool collapse = s.r > 2 && !op.trans_a;
  for (size_t i = 0; collapse && i + 2 < s.r; ++i) collapse = s.bd[i] == 1;
  if (collapse && !s.bias.empty()) collapse = !CollapseOperand(s.bias, s.out).empty();
  for (const PostOp& p : op.post_ops) {
    if (collapse && p.kind == PostOpKind::kBinary)
      collapse = !CollapseOperand(AlignRank(dims_[p.tensor], s.r), s.out).empty();
  }
  return collapse;
}

// The primitive with `attr` (post-ops set). Constant 2-D weights get the layout
// OneDnnOptions::matmul_weight_layout asks for (measured once per M bucket and team size);
// other constant weights the layout an earlier plan reordered them to, else oneDNN's choice.
dnnl::matmul::primitive_desc Builder::MatMulPrimitive(const Op& op, const MatMulShapes& s,
                                                      const dnnl::primitive_attr& attr) {
  bool const_b = d_.constant_data[op.inputs[1]] != nullptr;
  auto make = [&](const memory::desc& wmd) {
    dnnl::matmul::desc desc = op.inputs.size() == 3
                                  ? dnnl::matmul::desc(s.a_md, wmd, s.bias_md, PlainMd(s.out_p))
                                  : dnnl::matmul::desc(s.a_md, wmd, PlainMd(s.out_p));
    return dnnl::matmul::primitive_desc(desc, attr, Engine());
  };
  memory::desc preferred;
  int64_t m = s.out_p[0], k = s.bd_p[0], n = s.bd_p[1];
  using WeightLayout = OneDnnOptions::WeightLayout;
  WeightLayout how = d_.matmul_weight_layout;
  if (const_b && s.out_p.size() == 2 && how != WeightLayout::kOneDnn &&
      (how != WeightLayout::kMeasured || m * k * n >= kTuneMinMacs)) {
    // Row-major [K, N] or transposed ([N, K] stored).
    std::vector<memory::desc> layouts = {PlainMd(s.bd_p), TransposedMd(s.bd_p)};
    int choice = how == WeightLayout::kRowMajor ? 0 : 1;
    if (how == WeightLayout::kMeasured) {
      // Measured once per M bucket; the faster layout can differ with the team size too.
      int64_t bucket = NextPow2(m) * 1024 + std::min(omp_get_max_threads(), 1023);
      choice = weights_.LayoutChoice(op_index_, bucket);
      if (choice < 0) {
        choice = FasterLayout(s.a_md, PlainMd(s.out_p), layouts, op.trans_b ? 1 : 0);
        weights_.SetLayoutChoice(op_index_, bucket, choice);
      }
    }
    return make(layouts[choice]);
  }
  auto any = [&] { return memory::desc(s.bd_p, dt::f32, memory::format_tag::any); };
  if (const_b && weights_.Preferred(op_index_, &preferred)) {
    try {
      return make(preferred);
    } catch (const dnnl::error&) {
      return make(any());
    }
  }
  return make(const_b ? any() : s.b_md);
}

// The index of the faster of `layouts` for the weights of an `a_md` x W -> `out_md` GEMM:
// one warm-up and three timed runs of each, alternating, on scratch data (speed does not
// depend on values; the pattern avoids denormals); the minimum counts. `stored` (the layout
// the constant already has, so no copy) wins unless another is more than 5% faster.
int Builder::FasterLayout(const memory::desc& a_md, const memory::desc& out_md,
                          const std::vector<memory::desc>& layouts, int stored) {
  struct Trial {
    dnnl::matmul prim;
    std::unordered_map<int, memory> args;
    double best = 1e30;
  };
  std::vector<std::shared_ptr<void>> buffers;
  auto scratch = [&](const memory::desc& md) {
    return memory(md, Engine(), TrialBuffer(md.get_size(), &buffers));
  };
  std::vector<Trial> trials;
  for (const memory::desc& w : layouts) {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, w, out_md), Attr(), Engine());
    Trial t;
    t.prim = dnnl::matmul(pd);
    primitives_->fetch_add(1, std::memory_order_relaxed);
    t.args = {{DNNL_ARG_SRC, scratch(pd.src_desc())},
              {DNNL_ARG_WEIGHTS, scratch(pd.weights_desc())},
              {DNNL_ARG_DST, scratch(pd.dst_desc())},
              {DNNL_ARG_SCRATCHPAD, scratch(pd.scratchpad_desc())}};
    trials.push_back(std::move(t));
  }
  dnnl::stream stream(Engine());
  for (int round = 0; round < 4; ++round) {
    for (Trial& t : trials) {
      auto start = std::chrono::steady_clock::now();
      t.prim.execute(stream, t.args);
      stream.wait();
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (round > 0) t.best = std::min(t.best, s);
    }
  }
  int best = stored;
  for (size_t i = 0; i < trials.size(); ++i) {
    if (trials[i].best < 0.95 * trials[stored].best && trials[i].best < trials[best].best)
      best = static_cast<int>(i);
  }
  return best;
}

Status Builder::MatMul(const Op& op) {
  int32_t a = op.inputs[0], b = op.inputs[1];
  ASSIGN_OR_RETURN(MatMulShapes s, MatMulShapesOf(op));
  dims_[op.output] = s.out;
  dnnl::primitive_attr attr = Attr();
  if (op.alpha != 1.0f) attr.set_output_scales(0, {op.alpha});
  Args args;
  int32_t residual = -1;
  // oneDNN 2.x's GEMM-based matmul applies a gelu_erf post-op an order of magnitude slower
  // than the standalone eltwise primitive (3.3 ms vs ~0.05 ms for 16 x 1024 on one AVX2
  // core): a trailing gelu_erf runs as an in-place eltwise step after the matmul instead.
  Op fused = op;
  bool gelu_after = !fused.post_ops.empty() && fused.post_ops.back().kind == PostOpKind::kEltwise &&
                    fused.post_ops.back().eltwise == EltwiseAlg::kGeluErf;
  if (gelu_after) fused.post_ops.pop_back();
  RETURN_IF_ERROR(PostOps(fused, s.out, &attr, &args, &residual, s.collapse));
  dnnl::matmul::primitive_desc pd = MatMulPrimitive(op, s, attr);
  // Stored (row-major) dims of A and B as the primitive reads them.
  Dims a_stored = AlignRank(dims_[a], s.r), b_stored = AlignRank(dims_[b], s.r);
  if (s.collapse) {
    a_stored = op.trans_a ? Dims{s.ad_p[1], s.ad_p[0]} : s.ad_p;
    b_stored = Sub(b_stored, s.r - 2, s.r);
  }
  int src = View(PlainView(a, a_stored), s.a_md);
  int wts = d_.constant_data[b] != nullptr ? Weights(b, s.b_md, pd.weights_desc())
                                           : View(PlainView(b, b_stored), s.b_md);
  if (op.inputs.size() == 3) args.push_back({DNNL_ARG_BIAS, View(Plain(op.inputs[2]), s.bias_md)});
  args.push_back({DNNL_ARG_SRC, src});
  args.push_back({DNNL_ARG_WEIGHTS, wts});
  int dst = DefineAccumulator(op, PlainMd(s.out), residual, args);
  args.push_back({DNNL_ARG_DST, s.out_p.size() == s.r ? dst : View(dst, PlainMd(s.out_p))});
  AddPrimitive(dnnl::matmul(pd), pd.scratchpad_desc().get_size(), args);
  if (gelu_after) {
    const PostOp& g = op.post_ops.back();
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference,
                                     EltwiseAlgorithm(g.eltwise), Md(dst), g.alpha, g.beta);
    dnnl::eltwise_forward::primitive_desc epd(desc, Attr(), Engine());
    AddPrimitive(dnnl::eltwise_forward(epd), epd.scratchpad_desc().get_size(),
                 {{DNNL_ARG_SRC, dst}, {DNNL_ARG_DST, dst}});
  }
  return Status::Ok();
}

}  // namespace kiln::onednn::internal
