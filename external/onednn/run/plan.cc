// Execution plans of a oneDNN region: shape propagation, primitive creation with blocked layouts
// inside the region (reorders only at its boundaries), and execution.
#include "external/onednn/run/plan.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include <omp.h>
#include <unordered_map>

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using Kind = Slot::Kind;

constexpr size_t kAlign = 64;
constexpr size_t kMaxPooledWorkspaces = 16;

size_t AlignUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// GEMMs below this many multiply-adds keep oneDNN's layout: timing them costs more than any
// difference could save.
constexpr int64_t kTuneMinMacs = int64_t{1} << 16;

int64_t NextPow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

std::string DimsToString(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Row-major strides for `dims`; a rank-0 tensor is viewed as [1] (oneDNN has no scalars).
memory::desc PlainMd(Dims dims) {
  if (dims.empty()) dims = {1};
  Dims strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(dims[i], 1);
  }
  return memory::desc(dims, dt::f32, strides);
}

// A row-major tensor stored with its last two dims swapped, described with logical `dims`.
memory::desc TransposedMd(const Dims& dims) {
  Dims stored = dims;
  size_t r = dims.size();
  std::swap(stored[r - 1], stored[r - 2]);
  memory::desc plain = PlainMd(stored);
  Dims strides(plain.data.format_desc.blocking.strides,
               plain.data.format_desc.blocking.strides + r);
  std::swap(strides[r - 1], strides[r - 2]);
  return memory::desc(dims, dt::f32, strides);
}

Dims AlignRank(const Dims& d, size_t rank) {
  Dims out(rank - std::min(rank, d.size()), 1);
  out.insert(out.end(), d.begin(), d.end());
  return out;
}

Dims Sub(const Dims& d, size_t from, size_t to) { return Dims(d.begin() + from, d.begin() + to); }

int64_t Product(const Dims& d) {
  int64_t p = 1;
  for (int64_t x : d) p *= x;
  return p;
}

// Operand `d` (aligned to the rank of `out`) as a matrix over `out` viewed as
// [prod(out[0, r-1)), out[r-1]]: [1, n] when it broadcasts over all leading dims, [rows, n] when it
// has them all; empty when it varies over some leading dims but not others.
Dims CollapseOperand(const Dims& d, const Dims& out) {
  size_t r = out.size();
  bool ones = true, same = true;
  for (size_t i = 0; i + 1 < r; ++i) {
    ones = ones && d[i] == 1;
    same = same && d[i] == out[i];
  }
  if (ones) return {1, d[r - 1]};
  if (same) return {Product(Sub(out, 0, r - 1)), d[r - 1]};
  return {};
}

struct Window {
  Dims strides, dilations, pad_l, pad_r, out;  // dilations in oneDNN terms (0 = dense)
};

// ONNX window semantics (compiler/ops/nn.cc WindowOutput) -> oneDNN paddings and output dims.
StatusOr<Window> ResolveWindow(const Op& op, const Dims& in, const Dims& kernel, bool pool) {
  Window w;
  size_t n = in.size();
  for (size_t i = 0; i < n; ++i) {
    int64_t s = op.strides[i], d = op.dilations[i], ext = (kernel[i] - 1) * d + 1;
    int64_t pl = op.pads[i], pr = op.pads[i + n], out;
    if (op.auto_pad == AutoPad::kSameUpper || op.auto_pad == AutoPad::kSameLower) {
      out = (in[i] + s - 1) / s;
      int64_t total = std::max<int64_t>(0, (out - 1) * s + ext - in[i]);
      pl = op.auto_pad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
      pr = total - pl;
    } else {
      if (op.auto_pad == AutoPad::kValid) pl = pr = 0;
      int64_t span = in[i] + pl + pr - ext;
      if (span < 0)
        return InvalidArgument("spatial dim " + std::to_string(i) + ": padded input " +
                               std::to_string(in[i] + pl + pr) +
                               " is smaller than the kernel extent " + std::to_string(ext));
      out = (pool && op.ceil_mode ? (span + s - 1) / s : span / s) + 1;
      if (pool && op.ceil_mode) {
        int64_t eff = (out - 1) * s + ext - in[i] - pl;
        if (eff > pr && op.pool == PoolAlg::kAvgIncludePad)
          return Unsupported("ceil_mode with count_include_pad");
        pr = std::max(pr, eff);
      }
    }
    w.strides.push_back(s);
    w.dilations.push_back(d - 1);
    w.pad_l.push_back(pl);
    w.pad_r.push_back(pr);
    w.out.push_back(out);
  }
  return w;
}

dnnl::algorithm EltwiseAlgorithm(EltwiseAlg a) {
  using A = dnnl::algorithm;
  switch (a) {
    case EltwiseAlg::kRelu:
      return A::eltwise_relu;
    case EltwiseAlg::kSigmoid:
      return A::eltwise_logistic;
    case EltwiseAlg::kTanh:
      return A::eltwise_tanh;
    case EltwiseAlg::kGeluErf:
      return A::eltwise_gelu_erf;
    case EltwiseAlg::kGeluTanh:
      return A::eltwise_gelu_tanh;
    case EltwiseAlg::kClip:
      return A::eltwise_clip_v2;
    case EltwiseAlg::kHardSwish:
      return A::eltwise_hardswish;
    case EltwiseAlg::kElu:
      return A::eltwise_elu;
    case EltwiseAlg::kExp:
      return A::eltwise_exp;
    case EltwiseAlg::kLog:
      return A::eltwise_log;
    case EltwiseAlg::kAbs:
      return A::eltwise_abs;
    case EltwiseAlg::kSqrt:
      return A::eltwise_sqrt;
    case EltwiseAlg::kSoftplus:
      return A::eltwise_soft_relu;
    case EltwiseAlg::kLinear:
      return A::eltwise_linear;
    case EltwiseAlg::kSwish:
      return A::eltwise_swish;
    case EltwiseAlg::kRound:
      return A::eltwise_round;
    case EltwiseAlg::kSquare:
      return A::eltwise_square;
  }
  return A::eltwise_relu;
}

dnnl::algorithm BinaryAlgorithm(BinaryAlg a) {
  using A = dnnl::algorithm;
  switch (a) {
    case BinaryAlg::kAdd:
      return A::binary_add;
    case BinaryAlg::kSub:
      return A::binary_sub;
    case BinaryAlg::kMul:
      return A::binary_mul;
    case BinaryAlg::kDiv:
      return A::binary_div;
    case BinaryAlg::kMax:
      return A::binary_max;
    case BinaryAlg::kMin:
      return A::binary_min;
  }
  return A::binary_add;
}

// numpy broadcasting of two dim lists; nullopt-like error when incompatible.
StatusOr<Dims> Broadcast(const Dims& a, const Dims& b) {
  size_t r = std::max(a.size(), b.size());
  Dims x = AlignRank(a, r), y = AlignRank(b, r), out(r);
  for (size_t i = 0; i < r; ++i) {
    if (x[i] != y[i] && x[i] != 1 && y[i] != 1)
      return InvalidArgument("cannot broadcast " + DimsToString(a) + " with " + DimsToString(b));
    out[i] = x[i] == 1 ? y[i] : x[i];
  }
  return out;
}

// Builds one plan. Each op's primitives are created first with the layouts its inputs already
// have (blocked ones inside the region); if oneDNN refuses, the op is rebuilt from plain copies.
class Builder {
 public:
  Builder(const RegionData& data, WeightCache& weights, std::atomic<int64_t>* primitives)
      : d_(data), r_(data.region), weights_(weights), primitives_(primitives) {}

  StatusOr<std::shared_ptr<Plan>> Build(const std::vector<Dims>& inputs) {
    plan_ = std::make_shared<Plan>();
    dims_.assign(r_.tensors.size(), Dims());
    slot_of_.assign(r_.tensors.size(), -1);
    plain_of_.assign(r_.tensors.size(), -1);
    output_index_.assign(r_.tensors.size(), -1);
    for (size_t i = 0; i < r_.outputs.size(); ++i)
      output_index_[r_.outputs[i]] = static_cast<int>(i);
    AddSlot({memory::desc(), Kind::kWork});  // slot 0: the scratchpad, sized at the end
    for (size_t i = 0; i < r_.inputs.size(); ++i) {
      int32_t t = r_.inputs[i].tensor;
      dims_[t] = inputs[i];
      slot_of_[t] = AddSlot({PlainMd(inputs[i]), Kind::kInput, static_cast<int>(i)});
    }
    for (const BoundTensor& c : r_.constants) {
      dims_[c.tensor] = c.dims;
      Slot s{PlainMd(c.dims), Kind::kConst};
      s.ptr = const_cast<void*>(d_.constant_data[c.tensor]);
      slot_of_[c.tensor] = AddSlot(s);
    }
    for (size_t i = 0; i < r_.ops.size(); ++i) {
      op_index_ = static_cast<int>(i);
      const Op& op = r_.ops[i];
      std::string where = "ops[" + std::to_string(i) + "] (" + OpKindName(op.kind) + ")";
      Status s = BuildOpWithFallback(op);
      if (!s.ok()) return s.WithContext(where);
    }
    op_index_ = -1;
    for (size_t i = 0; i < r_.outputs.size(); ++i) {
      int32_t t = r_.outputs[i];
      plan_->output_dims.push_back(dims_[t]);
      int out = OutputSlot(t);
      const Slot& cur = plan_->slots[slot_of_[t]];
      if (cur.kind != Kind::kOutput) AddReorder(slot_of_[t], out);
    }
    AssignOffsets();
    plan_->slots[0].md = memory::desc({static_cast<int64_t>(std::max<size_t>(scratch_, 1))}, dt::u8,
                                      memory::format_tag::x);
    plan_->slots[0].offset = AlignUp(plan_->work_bytes);
    plan_->work_bytes = plan_->slots[0].offset + AlignUp(std::max<size_t>(scratch_, 1));
    return std::move(plan_);
  }

 private:
  struct Snapshot {
    size_t slots, steps, buffers, scratch;
    int residual_copies;
    std::vector<int> slot_of, plain_of;
  };

  Status BuildOpWithFallback(const Op& op) {
    Snapshot snap{plan_->slots.size(),
                  plan_->steps.size(),
                  buffer_sizes_.size(),
                  scratch_,
                  plan_->residual_copies,
                  slot_of_,
                  plain_of_};
    std::string first_error;
    for (bool plain : {false, true}) {
      try {
        return BuildOp(op, plain);
      } catch (const dnnl::error& e) {
        if (first_error.empty()) first_error = e.what();
        plan_->slots.resize(snap.slots);
        plan_->steps.resize(snap.steps);
        buffer_sizes_.resize(snap.buffers);
        scratch_ = snap.scratch;
        plan_->residual_copies = snap.residual_copies;
        slot_of_ = snap.slot_of;
        plain_of_ = snap.plain_of;
      }
    }
    return Internal("oneDNN: " + first_error);
  }

  Status BuildOp(const Op& op, bool plain) {
    switch (op.kind) {
      case OpKind::kConv:
        return Conv(op, plain);
      case OpKind::kMatMul:
        return MatMul(op);
      case OpKind::kPool:
        return Pool(op, plain);
      case OpKind::kEltwise:
        return Eltwise(op, plain);
      case OpKind::kSoftmax:
        return Softmax(op, plain);
      case OpKind::kLayerNorm:
        return LayerNorm(op);
      case OpKind::kBinary:
        return Binary(op, plain);
      case OpKind::kConcat:
        return Concat(op, plain);
      case OpKind::kBatchNorm:
        return BatchNorm(op, plain);
      case OpKind::kFlatten:
        return Flatten(op);
    }
    return Internal("unknown op kind");
  }

  // ---- Slots and steps ----

  int AddSlot(Slot s) {
    plan_->slots.push_back(std::move(s));
    return static_cast<int>(plan_->slots.size()) - 1;
  }
  int NewWork(const memory::desc& md) {
    Slot s{md, Kind::kWork};
    s.buffer = static_cast<int>(buffer_sizes_.size());
    buffer_sizes_.push_back(AlignUp(std::max<size_t>(md.get_size(), 1)));
    return AddSlot(s);
  }

  // Places the intermediates in the workspace: a buffer is live from the first step that
  // touches it to the last, and buffers whose lives do not overlap share bytes (first fit).
  void AssignOffsets() {
    size_t nb = buffer_sizes_.size();
    std::vector<int> first(nb, -1), last(nb, -1);
    for (size_t i = 0; i < plan_->steps.size(); ++i) {
      for (const auto& [arg, slot] : plan_->steps[i].args) {
        int b = plan_->slots[slot].buffer;
        if (plan_->slots[slot].kind != Kind::kWork || b < 0) continue;
        if (first[b] < 0) first[b] = static_cast<int>(i);
        last[b] = static_cast<int>(i);
      }
    }
    std::vector<int> order;
    for (size_t b = 0; b < nb; ++b) {
      if (first[b] >= 0) order.push_back(static_cast<int>(b));
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return first[a] < first[b]; });
    struct Live {
      size_t offset, size;
      int last;
    };
    std::vector<Live> live;
    std::vector<size_t> offset(nb, 0);
    size_t end = 0;
    for (int b : order) {
      live.erase(std::remove_if(live.begin(), live.end(),
                                [&](const Live& l) { return l.last < first[b]; }),
                 live.end());
      std::sort(live.begin(), live.end(),
                [](const Live& x, const Live& y) { return x.offset < y.offset; });
      size_t at = 0;
      for (const Live& l : live) {
        if (at + buffer_sizes_[b] <= l.offset) break;
        at = std::max(at, l.offset + l.size);
      }
      offset[b] = at;
      live.push_back({at, buffer_sizes_[b], last[b]});
      end = std::max(end, at + buffer_sizes_[b]);
    }
    for (Slot& s : plan_->slots) {
      if (s.kind == Kind::kWork && s.buffer >= 0) s.offset = offset[s.buffer];
    }
    plan_->work_bytes = end;
  }
  int View(int slot, const memory::desc& md) {
    Slot s = plan_->slots[slot];
    s.md = md;
    return AddSlot(s);
  }
  const memory::desc& Md(int slot) const { return plan_->slots[slot].md; }
  int OutputSlot(int32_t t) {
    return AddSlot({PlainMd(dims_[t]), Kind::kOutput, output_index_[t]});
  }
  // Whether op output `t` with layout `md` is written straight into the caller's tensor: it is a
  // region output and the layout is plain.
  bool IntoCaller(int32_t t, const memory::desc& md) {
    return output_index_[t] >= 0 && md == PlainMd(dims_[t]);
  }
  // Where op output `t` with layout `md` goes: the caller's tensor (IntoCaller), else the
  // workspace.
  int Define(int32_t t, const memory::desc& md) {
    return DefineOn(t, md, IntoCaller(t, md) ? View(OutputSlot(t), md) : NewWork(md));
  }
  int DefineOn(int32_t t, const memory::desc& md, int slot) {
    slot_of_[t] = slot;
    plain_of_[t] = md == PlainMd(dims_[t]) ? slot : -1;
    return slot;
  }
  dnnl::primitive_attr Attr() const {
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
  }
  void AddPrimitive(dnnl::primitive p, size_t scratch, std::vector<std::pair<int, int>> args) {
    scratch_ = std::max(scratch_, scratch);
    args.push_back({DNNL_ARG_SCRATCHPAD, 0});
    plan_->steps.push_back({std::move(p), std::move(args), op_index_});
    primitives_->fetch_add(1, std::memory_order_relaxed);
  }
  void AddReorder(int from, int to) {
    dnnl::reorder::primitive_desc pd(Engine(), Md(from), Engine(), Md(to), Attr());
    AddPrimitive(dnnl::reorder(pd), pd.scratchpad_desc().get_size(),
                 {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
  }
  // `slot` in layout `md`, reordering into the workspace when it differs.
  int As(int slot, const memory::desc& md) {
    if (Md(slot) == md) return slot;
    int to = NewWork(md);
    AddReorder(slot, to);
    return to;
  }
  // Tensor `t` in row-major layout (a reorder the first time it is needed, then reused).
  int Plain(int32_t t) {
    if (plain_of_[t] < 0) plain_of_[t] = As(slot_of_[t], PlainMd(dims_[t]));
    return plain_of_[t];
  }
  // Tensor `t` row-major, viewed with `dims` (same element count: reshape / rank alignment).
  int PlainView(int32_t t, const Dims& dims) { return View(Plain(t), PlainMd(dims)); }
  int Current(int32_t t, bool plain) { return plain ? Plain(t) : slot_of_[t]; }

  // ---- Post-ops (Conv, MatMul) ----

  // Appends the op's post-ops to `attr`; returns the extra arguments (binary operands) and the
  // residual the primitive accumulates into (the first sum, -1 if none; see DefineAccumulator).
  // `collapsed`: the primitive computes `out` as a matrix (see CollapseOperand), so binary
  // operands are viewed as matrices too (the caller checked they collapse).
  Status PostOps(const Op& op, const Dims& out, dnnl::primitive_attr* attr,
                 std::vector<std::pair<int, int>>* args, int32_t* residual,
                 bool collapsed = false) {
    *residual = -1;
    dnnl::post_ops po;
    for (size_t i = 0; i < op.post_ops.size(); ++i) {
      const PostOp& p = op.post_ops[i];
      auto binary = [&](BinaryAlg alg) -> Status {
        Dims b = AlignRank(dims_[p.tensor], out.size());
        for (size_t k = 0; k < out.size(); ++k) {
          if (b[k] != 1 && b[k] != out[k])
            return InvalidArgument("post-op operand " + DimsToString(dims_[p.tensor]) +
                                   " does not broadcast into " + DimsToString(out));
        }
        int slot = PlainView(p.tensor, collapsed ? CollapseOperand(b, out) : b);
        po.append_binary(BinaryAlgorithm(alg), Md(slot));
        args->push_back(
            {DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1, slot});
        return Status::Ok();
      };
      switch (p.kind) {
        case PostOpKind::kEltwise:
          po.append_eltwise(1.0f, EltwiseAlgorithm(p.eltwise), p.alpha, p.beta);
          break;
        case PostOpKind::kSum:
          if (dims_[p.tensor] != out)
            return InvalidArgument("residual " + DimsToString(dims_[p.tensor]) +
                                   " does not match the output " + DimsToString(out));
          // dst holds one residual; a second sum (the codegen never writes one, a hand-made
          // blob may) is added as a binary operand instead of overwriting the first.
          if (*residual >= 0) {
            RETURN_IF_ERROR(binary(BinaryAlg::kAdd));
            break;
          }
          po.append_sum(1.0f);
          *residual = p.tensor;
          break;
        case PostOpKind::kBinary:
          RETURN_IF_ERROR(binary(p.binary));
          break;
      }
    }
    attr->set_post_ops(po);
    return Status::Ok();
  }
  // The index of the faster of `layouts` for the weights of an `a_md` x W -> `out_md` GEMM:
  // one warm-up and three timed runs of each, alternating, on scratch data (speed does not
  // depend on values; the pattern avoids denormals); the minimum counts. `stored` (the layout
  // the constant already has, so no copy) wins unless another is more than 5% faster.
  int FasterLayout(const memory::desc& a_md, const memory::desc& out_md,
                   const std::vector<memory::desc>& layouts, int stored) {
    struct Trial {
      dnnl::matmul prim;
      std::unordered_map<int, memory> args;
      double best = 1e30;
    };
    std::vector<std::shared_ptr<void>> buffers;
    auto scratch = [&](const memory::desc& md) {
      size_t bytes = AlignUp(std::max<size_t>(md.get_size(), 4));
      void* p = std::aligned_alloc(kAlign, bytes);
      if (p == nullptr) throw std::bad_alloc();
      buffers.emplace_back(p, [](void* q) { std::free(q); });
      float* f = static_cast<float*>(p);
      for (size_t i = 0; i < bytes / sizeof(float); ++i) f[i] = 0.125f * static_cast<float>(i % 13) - 0.75f;
      return memory(md, Engine(), p);
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

  // Defines op output `op.output` (layout `md`) for a primitive whose sum post-op accumulates
  // `residual` (-1: none) into dst. A residual that may be overwritten (CanOverwrite) is dst
  // itself, unless dst is the caller's tensor (IntoCaller); otherwise it is copied into dst
  // first (oneDNN copies a blocked tensor to the same layout with its generic reorder: 0.25 ms
  // for 1x256x56x56 on two AVX2 cores, 16 of them per ResNet-50 run). `args`: the primitive's
  // other arguments.
  int DefineAccumulator(const Op& op, const memory::desc& md, int32_t residual,
                        const std::vector<std::pair<int, int>>& args) {
    if (residual >= 0 && !IntoCaller(op.output, md) && CanOverwrite(residual, md, args))
      return DefineOn(op.output, md, slot_of_[residual]);
    int dst = Define(op.output, md);
    if (residual >= 0) {
      AddReorder(slot_of_[residual], dst);
      ++plan_->residual_copies;
    }
    return dst;
  }

  // Whether the current op's primitive may write over residual `t`: it is an intermediate of
  // layout `md` whose buffer none of the primitive's other `args`, no later op and no region
  // output reads (the op's earlier steps, e.g. a reorder of src, run before it). Views (Flatten,
  // reshaped plain copies) share buffers, so reads are compared by buffer; a tensor defined
  // later can view `t`'s buffer only through a later op's operand, which is checked.
  bool CanOverwrite(int32_t t, const memory::desc& md,
                    const std::vector<std::pair<int, int>>& args) const {
    const Slot& s = plan_->slots[slot_of_[t]];
    if (s.kind != Kind::kWork || s.buffer < 0 || s.md != md) return false;
    auto shares = [&](int slot) {
      return slot >= 0 && plan_->slots[slot].kind == Kind::kWork &&
             plan_->slots[slot].buffer == s.buffer;
    };
    auto reads = [&](int32_t u) { return u >= 0 && (shares(slot_of_[u]) || shares(plain_of_[u])); };
    for (const auto& [arg, slot] : args) {
      if (shares(slot)) return false;
    }
    for (size_t i = op_index_ + 1; i < r_.ops.size(); ++i) {
      for (int32_t u : r_.ops[i].inputs) {
        if (reads(u)) return false;
      }
      for (const PostOp& p : r_.ops[i].post_ops) {
        if (reads(p.tensor)) return false;
      }
    }
    for (int32_t u : r_.outputs) {
      if (reads(u)) return false;
    }
    return true;
  }

  // A constant weight tensor in the layout `pd` wants, or the tensor converted per plan.
  int Weights(int32_t t, const memory::desc& plain_md, const memory::desc& want) {
    if (d_.constant_data[t] != nullptr) {
      Slot s{want, Kind::kConst};
      s.ptr = weights_.Get(op_index_, plain_md, d_.constant_data[t], want, primitives_);
      return AddSlot(s);
    }
    return As(View(Plain(t), plain_md), want);
  }

  // ---- Ops ----

  Status Conv(const Op& op, bool plain) {
    int32_t x = op.inputs[0], w = op.inputs[1];
    const Dims &xd = dims_[x], &wd = dims_[w];
    int64_t g = op.group;
    if (xd[1] != wd[1] * g || wd[0] % g != 0)
      return InvalidArgument("input channels " + std::to_string(xd[1]) + " vs W " +
                             DimsToString(wd) + " with group " + std::to_string(g));
    Dims kernel = Sub(wd, 2, wd.size());
    if (std::find(kernel.begin(), kernel.end(), 0) != kernel.end() || wd[0] == 0)
      return InvalidArgument("W " + DimsToString(wd) + " is empty");
    if (!op.kernel.empty() && op.kernel != kernel)
      return InvalidArgument("kernel_shape does not match W " + DimsToString(wd));
    ASSIGN_OR_RETURN(Window win, ResolveWindow(op, Sub(xd, 2, xd.size()), kernel, false));
    Dims out = {xd[0], wd[0]};
    out.insert(out.end(), win.out.begin(), win.out.end());
    if (op.inputs.size() == 3 && dims_[op.inputs[2]] != Dims{wd[0]})
      return InvalidArgument("bias " + DimsToString(dims_[op.inputs[2]]) + " for " +
                             std::to_string(wd[0]) + " output channels");
    dims_[op.output] = out;
    Dims gw = wd;
    if (g > 1) {
      gw = {g, wd[0] / g};
      gw.insert(gw.end(), wd.begin() + 1, wd.end());
    }
    memory::desc w_plain = PlainMd(gw);
    memory::desc any_src(xd, dt::f32, memory::format_tag::any);
    memory::desc any_dst(out, dt::f32, memory::format_tag::any);
    memory::desc bias_md = op.inputs.size() == 3 ? PlainMd({wd[0]}) : memory::desc();
    dnnl::primitive_attr attr = Attr();
    std::vector<std::pair<int, int>> args;
    int32_t residual = -1;
    RETURN_IF_ERROR(PostOps(op, out, &attr, &args, &residual));
    auto make = [&](const memory::desc& src, const memory::desc& wmd) {
      dnnl::convolution_forward::desc desc(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wmd,
          bias_md, any_dst, win.strides, win.dilations, win.pad_l, win.pad_r);
      return dnnl::convolution_forward::primitive_desc(desc, attr, Engine());
    };
    memory::desc src_md = plain ? PlainMd(xd) : any_src;
    memory::desc w_md(gw, dt::f32, memory::format_tag::any);
    dnnl::convolution_forward::primitive_desc pd;
    memory::desc preferred;
    if (!plain && d_.constant_data[w] && weights_.Preferred(op_index_, &preferred)) {
      try {
        pd = make(src_md, preferred);
      } catch (const dnnl::error&) {
        pd = make(src_md, w_md);
      }
    } else {
      pd = make(src_md, plain ? w_plain : w_md);
    }
    int src = As(Current(x, plain), pd.src_desc());
    int wts = Weights(w, w_plain, pd.weights_desc());
    if (op.inputs.size() == 3) args.push_back({DNNL_ARG_BIAS, Plain(op.inputs[2])});
    args.push_back({DNNL_ARG_SRC, src});
    args.push_back({DNNL_ARG_WEIGHTS, wts});
    int dst = DefineAccumulator(op, pd.dst_desc(), residual, args);
    args.push_back({DNNL_ARG_DST, dst});
    AddPrimitive(dnnl::convolution_forward(pd), pd.scratchpad_desc().get_size(), args);
    return Status::Ok();
  }

  Status MatMul(const Op& op) {
    int32_t a = op.inputs[0], b = op.inputs[1];
    size_t r = std::max(dims_[a].size(), dims_[b].size());
    Dims ad = AlignRank(dims_[a], r), bd = AlignRank(dims_[b], r);
    if (op.trans_a) std::swap(ad[r - 1], ad[r - 2]);
    if (op.trans_b) std::swap(bd[r - 1], bd[r - 2]);
    if (ad[r - 1] != bd[r - 2])
      return InvalidArgument("inner dims of " + DimsToString(dims_[a]) + " and " +
                             DimsToString(dims_[b]) + " differ");
    Dims out(r);
    for (size_t i = 0; i + 2 < r; ++i) {
      if (ad[i] != bd[i] && ad[i] != 1 && bd[i] != 1)
        return InvalidArgument("batch dims of " + DimsToString(dims_[a]) + " and " +
                               DimsToString(dims_[b]) + " do not broadcast");
      out[i] = ad[i] == 1 ? bd[i] : ad[i];
    }
    out[r - 2] = ad[r - 2];
    out[r - 1] = bd[r - 1];
    dims_[op.output] = out;
    Dims bias_dims;
    if (op.inputs.size() == 3) {
      bias_dims = AlignRank(dims_[op.inputs[2]], r);
      for (size_t i = 0; i < r; ++i) {
        if (bias_dims[i] != 1 && bias_dims[i] != out[i])
          return InvalidArgument("bias " + DimsToString(dims_[op.inputs[2]]) +
                                 " does not broadcast into " + DimsToString(out));
      }
    }
    // A weight shared by every batch (B's leading dims all 1) and a row-major A: the batched
    // product is one [batch * M, K] x [K, N] GEMM over the same bytes. oneDNN runs a batch of
    // small products (e.g. [seq, 1, K] x [K, N] from seq-first attention projections) an order
    // of magnitude slower than the one large one.
    bool collapse = r > 2 && !op.trans_a;
    for (size_t i = 0; collapse && i + 2 < r; ++i) collapse = bd[i] == 1;
    if (collapse && !bias_dims.empty()) collapse = !CollapseOperand(bias_dims, out).empty();
    for (const PostOp& p : op.post_ops) {
      if (collapse && p.kind == PostOpKind::kBinary)
        collapse = !CollapseOperand(AlignRank(dims_[p.tensor], r), out).empty();
    }
    Dims out_p = out, ad_p = ad, bd_p = bd, bias_p = bias_dims;  // as the primitive sees them
    if (collapse) {
      int64_t rows = Product(Sub(out, 0, r - 1));
      out_p = {rows, out[r - 1]};
      ad_p = {rows, ad[r - 1]};
      bd_p = Sub(bd, r - 2, r);
      if (!bias_dims.empty()) bias_p = CollapseOperand(bias_dims, out);
    }
    size_t rp = out_p.size();
    memory::desc a_md = op.trans_a ? TransposedMd(ad_p) : PlainMd(ad_p);
    memory::desc b_md = op.trans_b ? TransposedMd(bd_p) : PlainMd(bd_p);
    memory::desc bias_md = bias_p.empty() ? memory::desc() : PlainMd(bias_p);
    dnnl::primitive_attr attr = Attr();
    if (op.alpha != 1.0f) attr.set_output_scales(0, {op.alpha});
    std::vector<std::pair<int, int>> args;
    int32_t residual = -1;
    // oneDNN 2.x's GEMM-based matmul applies a gelu_erf post-op an order of magnitude slower
    // than the standalone eltwise primitive (3.3 ms vs ~0.05 ms for 16 x 1024 on one AVX2
    // core): a trailing gelu_erf runs as an in-place eltwise step after the matmul instead.
    Op fused = op;
    bool gelu_after = !fused.post_ops.empty() &&
                      fused.post_ops.back().kind == PostOpKind::kEltwise &&
                      fused.post_ops.back().eltwise == EltwiseAlg::kGeluErf;
    if (gelu_after) fused.post_ops.pop_back();
    RETURN_IF_ERROR(PostOps(fused, out, &attr, &args, &residual, collapse));
    bool const_b = d_.constant_data[b] != nullptr;
    auto make = [&](const memory::desc& wmd) {
      dnnl::matmul::desc desc = op.inputs.size() == 3
                                    ? dnnl::matmul::desc(a_md, wmd, bias_md, PlainMd(out_p))
                                    : dnnl::matmul::desc(a_md, wmd, PlainMd(out_p));
      return dnnl::matmul::primitive_desc(desc, attr, Engine());
    };
    dnnl::matmul::primitive_desc pd;
    memory::desc preferred;
    int64_t m = out_p[0], k = bd_p[0], n = bd_p[1];
    using WeightLayout = OneDnnOptions::WeightLayout;
    WeightLayout how = d_.matmul_weight_layout;
    if (const_b && rp == 2 && how != WeightLayout::kOneDnn &&
        (how != WeightLayout::kMeasured || m * k * n >= kTuneMinMacs)) {
      // Row-major [K, N] or transposed ([N, K] stored).
      std::vector<memory::desc> layouts = {PlainMd(bd_p), TransposedMd(bd_p)};
      int choice = how == WeightLayout::kRowMajor ? 0 : 1;
      if (how == WeightLayout::kMeasured) {
        // Measured once per M bucket; the faster layout can differ with the team size too.
        int64_t bucket = NextPow2(m) * 1024 + std::min(omp_get_max_threads(), 1023);
        choice = weights_.LayoutChoice(op_index_, bucket);
        if (choice < 0) {
          choice = FasterLayout(a_md, PlainMd(out_p), layouts, op.trans_b ? 1 : 0);
          weights_.SetLayoutChoice(op_index_, bucket, choice);
        }
      }
      pd = make(layouts[choice]);
    } else if (const_b && weights_.Preferred(op_index_, &preferred)) {
      try {
        pd = make(preferred);
      } catch (const dnnl::error&) {
        pd = make(memory::desc(bd_p, dt::f32, memory::format_tag::any));
      }
    } else {
      pd = make(const_b ? memory::desc(bd_p, dt::f32, memory::format_tag::any) : b_md);
    }
    // Stored (row-major) dims of A and B as the primitive reads them.
    Dims a_stored = AlignRank(dims_[a], r), b_stored = AlignRank(dims_[b], r);
    if (collapse) {
      a_stored = op.trans_a ? Dims{ad_p[1], ad_p[0]} : ad_p;
      b_stored = Sub(b_stored, r - 2, r);
    }
    int src = View(PlainView(a, a_stored), a_md);
    int wts = const_b ? Weights(b, b_md, pd.weights_desc()) : View(PlainView(b, b_stored), b_md);
    if (op.inputs.size() == 3) args.push_back({DNNL_ARG_BIAS, View(Plain(op.inputs[2]), bias_md)});
    args.push_back({DNNL_ARG_SRC, src});
    args.push_back({DNNL_ARG_WEIGHTS, wts});
    int dst = DefineAccumulator(op, PlainMd(out), residual, args);
    args.push_back({DNNL_ARG_DST, rp == r ? dst : View(dst, PlainMd(out_p))});
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

  Status Pool(const Op& op, bool plain) {
    int32_t x = op.inputs[0];
    const Dims& xd = dims_[x];
    size_t spatial = xd.size() - 2;
    Op window = op;
    Dims kernel = op.kernel;
    if (op.global) {
      kernel = Sub(xd, 2, xd.size());
      window.strides.assign(spatial, 1);
      window.dilations.assign(spatial, 1);
      window.pads.assign(2 * spatial, 0);
      window.auto_pad = AutoPad::kNotSet;
      window.ceil_mode = false;
    }
    ASSIGN_OR_RETURN(Window win, ResolveWindow(window, Sub(xd, 2, xd.size()), kernel, true));
    Dims out = {xd[0], xd[1]};
    out.insert(out.end(), win.out.begin(), win.out.end());
    dims_[op.output] = out;
    dnnl::algorithm alg = op.pool == PoolAlg::kMax ? dnnl::algorithm::pooling_max
                          : op.pool == PoolAlg::kAvgIncludePad
                              ? dnnl::algorithm::pooling_avg_include_padding
                              : dnnl::algorithm::pooling_avg_exclude_padding;
    int src = Current(x, plain);
    dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, alg, Md(src),
                                        memory::desc(out, dt::f32, memory::format_tag::any),
                                        win.strides, kernel, win.dilations, win.pad_l, win.pad_r);
    dnnl::pooling_v2_forward::primitive_desc pd(desc, Attr(), Engine());
    int dst = Define(op.output, pd.dst_desc());
    AddPrimitive(dnnl::pooling_v2_forward(pd), pd.scratchpad_desc().get_size(),
                 {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    return Status::Ok();
  }

  Status Eltwise(const Op& op, bool plain) {
    int32_t x = op.inputs[0];
    dims_[op.output] = dims_[x];
    int src = Current(x, plain);
    dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference,
                                     EltwiseAlgorithm(op.eltwise), Md(src), op.alpha, op.beta);
    dnnl::eltwise_forward::primitive_desc pd(desc, Attr(), Engine());
    int dst = Define(op.output, pd.dst_desc());
    AddPrimitive(dnnl::eltwise_forward(pd), pd.scratchpad_desc().get_size(),
                 {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    return Status::Ok();
  }

  Status Softmax(const Op& op, bool plain) {
    int32_t x = op.inputs[0];
    dims_[op.output] = dims_[x];
    if (dims_[x].empty()) return Unsupported("softmax of a scalar");
    int src = Current(x, plain);
    dnnl::softmax_v2_forward::desc desc(
        dnnl::prop_kind::forward_inference,
        op.log_softmax ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, Md(src),
        Md(src), static_cast<int>(op.axis));
    dnnl::softmax_v2_forward::primitive_desc pd(desc, Attr(), Engine());
    int dst = Define(op.output, pd.dst_desc());
    AddPrimitive(dnnl::softmax_v2_forward(pd), pd.scratchpad_desc().get_size(),
                 {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    return Status::Ok();
  }

  // oneDNN normalizes over the last dim: the input is viewed as [outer, inner].
  Status LayerNorm(const Op& op) {
    int32_t x = op.inputs[0];
    const Dims& xd = dims_[x];
    dims_[op.output] = xd;
    int64_t inner = Product(Sub(xd, op.axis, xd.size())), outer = Product(Sub(xd, 0, op.axis));
    for (size_t i = 1; i < op.inputs.size(); ++i) {
      if (Product(dims_[op.inputs[i]]) != inner)
        return InvalidArgument((i == 1 ? "scale " : "bias ") + DimsToString(dims_[op.inputs[i]]) +
                               " does not match the " + std::to_string(inner) +
                               " normalized elements");
    }
    memory::desc md2(Dims{outer, inner}, dt::f32, memory::format_tag::ab);
    auto flags = dnnl::normalization_flags::use_scale;
    if (op.inputs.size() == 3) flags = flags | dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, md2,
                                                 op.epsilon, flags);
    dnnl::layer_normalization_forward::primitive_desc pd(desc, Attr(), Engine());
    int src = PlainView(x, {outer, inner});
    std::vector<std::pair<int, int>> args = {{DNNL_ARG_SRC, src},
                                             {DNNL_ARG_SCALE, PlainView(op.inputs[1], {inner})}};
    if (op.inputs.size() == 3) args.push_back({DNNL_ARG_SHIFT, PlainView(op.inputs[2], {inner})});
    int dst = View(Define(op.output, PlainMd(xd)), md2);
    args.push_back({DNNL_ARG_DST, dst});
    AddPrimitive(dnnl::layer_normalization_forward(pd), pd.scratchpad_desc().get_size(), args);
    return Status::Ok();
  }

  Status Binary(const Op& op, bool plain) {
    int32_t a = op.inputs[0], b = op.inputs[1];
    ASSIGN_OR_RETURN(Dims out, Broadcast(dims_[a], dims_[b]));
    dims_[op.output] = out;
    bool commutative = op.binary == BinaryAlg::kAdd || op.binary == BinaryAlg::kMul ||
                       op.binary == BinaryAlg::kMax || op.binary == BinaryAlg::kMin;
    if (AlignRank(dims_[a], out.size()) != out) {
      if (!commutative || AlignRank(dims_[b], out.size()) != out)
        return Unsupported("oneDNN needs the first operand to have the output's shape, got " +
                           DimsToString(dims_[a]) + " and " + DimsToString(dims_[b]));
      std::swap(a, b);
    }
    int src0 = dims_[a] == out ? Current(a, plain) : PlainView(a, out);
    Dims bd = AlignRank(dims_[b], out.size());
    int src1 = dims_[b] == out ? Current(b, plain) : PlainView(b, bd);
    dnnl::binary::desc desc(BinaryAlgorithm(op.binary), Md(src0), Md(src1), Md(src0));
    dnnl::binary::primitive_desc pd(desc, Attr(), Engine());
    int dst = Define(op.output, pd.dst_desc());
    AddPrimitive(dnnl::binary(pd), pd.scratchpad_desc().get_size(),
                 {{DNNL_ARG_SRC_0, src0}, {DNNL_ARG_SRC_1, src1}, {DNNL_ARG_DST, dst}});
    return Status::Ok();
  }

  Status Concat(const Op& op, bool plain) {
    Dims out = dims_[op.inputs[0]];
    std::vector<memory::desc> mds;
    std::vector<std::pair<int, int>> args;
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      const Dims& d = dims_[op.inputs[i]];
      for (size_t k = 0; k < d.size(); ++k) {
        if (static_cast<int64_t>(k) != op.axis && d[k] != out[k])
          return InvalidArgument("input " + std::to_string(i) + " " + DimsToString(d) +
                                 " does not match input 0 " + DimsToString(dims_[op.inputs[0]]));
      }
      if (i > 0) out[op.axis] += d[op.axis];
      int slot = Current(op.inputs[i], plain);
      mds.push_back(Md(slot));
      args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), slot});
    }
    dims_[op.output] = out;
    dnnl::concat::primitive_desc pd =
        plain ? dnnl::concat::primitive_desc(PlainMd(out), static_cast<int>(op.axis), mds, Engine(),
                                             Attr())
              : dnnl::concat::primitive_desc(static_cast<int>(op.axis), mds, Engine(), Attr());
    int dst = Define(op.output, pd.dst_desc());
    args.push_back({DNNL_ARG_DST, dst});
    AddPrimitive(dnnl::concat(pd), pd.scratchpad_desc().get_size(), args);
    return Status::Ok();
  }

  // A view of the row-major input: no step. A region output that is a flattened tensor is
  // copied into the caller's tensor at the end like any output left in the workspace.
  Status Flatten(const Op& op) {
    int32_t x = op.inputs[0];
    const Dims& xd = dims_[x];
    Dims out = {Product(Sub(xd, 0, op.axis)), Product(Sub(xd, op.axis, xd.size()))};
    dims_[op.output] = out;
    int slot = PlainView(x, out);
    slot_of_[op.output] = slot;
    plain_of_[op.output] = slot;
    return Status::Ok();
  }

  Status BatchNorm(const Op& op, bool plain) {
    int32_t x = op.inputs[0];
    const Dims& xd = dims_[x];
    dims_[op.output] = xd;
    for (int i = 1; i < 5; ++i) {
      if (dims_[op.inputs[i]] != Dims{xd[1]})
        return InvalidArgument("statistics " + DimsToString(dims_[op.inputs[i]]) + " for " +
                               std::to_string(xd[1]) + " channels");
    }
    int src = Current(x, plain);
    auto flags = dnnl::normalization_flags::use_global_stats |
                 dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, Md(src),
                                                 op.epsilon, flags);
    dnnl::batch_normalization_forward::primitive_desc pd(desc, Attr(), Engine());
    std::vector<std::pair<int, int>> args = {{DNNL_ARG_SRC, src},
                                             {DNNL_ARG_SCALE, Plain(op.inputs[1])},
                                             {DNNL_ARG_SHIFT, Plain(op.inputs[2])},
                                             {DNNL_ARG_MEAN, Plain(op.inputs[3])},
                                             {DNNL_ARG_VARIANCE, Plain(op.inputs[4])}};
    int dst = Define(op.output, pd.dst_desc());
    args.push_back({DNNL_ARG_DST, dst});
    AddPrimitive(dnnl::batch_normalization_forward(pd), pd.scratchpad_desc().get_size(), args);
    return Status::Ok();
  }

  const RegionData& d_;
  const RegionProgram& r_;
  WeightCache& weights_;
  std::atomic<int64_t>* primitives_;
  std::shared_ptr<Plan> plan_;
  std::vector<Dims> dims_;
  std::vector<int> slot_of_, plain_of_, output_index_;
  std::vector<size_t> buffer_sizes_;  // per intermediate, aligned
  size_t scratch_ = 0;
  int op_index_ = -1;
};

}  // namespace

const dnnl::engine& Engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

Workspace::~Workspace() { std::free(buffer); }

std::unique_ptr<Workspace> Plan::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_.empty()) {
      std::unique_ptr<Workspace> ws = std::move(free_.back());
      free_.pop_back();
      return ws;
    }
  }
  auto ws = std::make_unique<Workspace>();
  ws->buffer = static_cast<uint8_t*>(std::aligned_alloc(kAlign, AlignUp(work_bytes)));
  if (ws->buffer == nullptr) throw std::bad_alloc();
  // Fault the pages in now: a fresh page costs ~10 us on first touch, inside a run it would
  // land on the request path.
  std::memset(ws->buffer, 0, AlignUp(work_bytes));
  ws->mems.reserve(slots.size());
  for (const Slot& s : slots) {
    void* handle = s.kind == Kind::kWork    ? ws->buffer + s.offset
                   : s.kind == Kind::kConst ? s.ptr
                                            : DNNL_MEMORY_NONE;
    ws->mems.emplace_back(s.md, Engine(), handle);
  }
  // dnnl::memory is a handle: the maps share the objects whose data handles a run sets.
  for (const Step& step : steps) {
    std::unordered_map<int, memory>& args = ws->step_args.emplace_back();
    for (const auto& [arg, slot] : step.args) args.emplace(arg, ws->mems[slot]);
  }
  ws->stream = dnnl::stream(Engine());
  return ws;
}

void Plan::Release(std::unique_ptr<Workspace> ws) {
  std::lock_guard<std::mutex> lock(mu_);
  if (free_.size() < kMaxPooledWorkspaces) free_.push_back(std::move(ws));
}

void* WeightCache::Get(int op, const memory::desc& plain, const void* data,
                       const memory::desc& want, std::atomic<int64_t>* primitives) {
  std::lock_guard<std::mutex> lock(mu_);
  Entry& e = entries_[op];
  for (auto& [md, bytes] : e.layouts) {
    if (md == want) return bytes.get();
  }
  if (want == plain) {
    e.layouts.push_back(
        {want, std::shared_ptr<uint8_t>(static_cast<uint8_t*>(const_cast<void*>(data)),
                                        [](uint8_t*) {})});
    return const_cast<void*>(data);
  }
  size_t size = AlignUp(std::max<size_t>(want.get_size(), 1));
  std::shared_ptr<uint8_t> bytes(static_cast<uint8_t*>(std::aligned_alloc(kAlign, size)),
                                 [](uint8_t* p) { std::free(p); });
  if (!bytes) throw std::bad_alloc();
  memory src(plain, Engine(), const_cast<void*>(data));
  memory dst(want, Engine(), bytes.get());
  dnnl::stream stream(Engine());
  dnnl::reorder(src, dst).execute(stream, src, dst);
  stream.wait();
  primitives->fetch_add(1, std::memory_order_relaxed);
  e.layouts.push_back({want, bytes});
  return bytes.get();
}

int WeightCache::LayoutChoice(int op, int64_t bucket) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [b, choice] : entries_[op].choices) {
    if (b == bucket) return choice;
  }
  return -1;
}

void WeightCache::SetLayoutChoice(int op, int64_t bucket, int choice) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [b, c] : entries_[op].choices) {
    if (b == bucket) return;  // another thread measured it first; keep one answer
  }
  entries_[op].choices.push_back({bucket, choice});
  measurements_.fetch_add(1, std::memory_order_relaxed);
}

bool WeightCache::Preferred(int op, memory::desc* md) {
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_[op].layouts.empty()) return false;
  *md = entries_[op].layouts.front().first;
  return true;
}

StatusOr<std::shared_ptr<Plan>> BuildPlan(const RegionData& data, WeightCache& weights,
                                          const std::vector<Dims>& inputs,
                                          std::atomic<int64_t>* primitives) {
  ASSIGN_OR_RETURN(std::shared_ptr<Plan> plan, Builder(data, weights, primitives).Build(inputs));
  // One workspace ready before the first run (plans of static shapes are built at load).
  plan->Release(plan->Acquire());
  return plan;
}

Status ExecutePlan(Plan& plan, const Tensor* const* args, int num_inputs, int num_outputs) {
  std::unique_ptr<Workspace> ws = plan.Acquire();
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot& s = plan.slots[i];
    if (s.kind == Kind::kInput) ws->mems[i].set_data_handle(args[s.index]->data());
    if (s.kind == Kind::kOutput) ws->mems[i].set_data_handle(args[num_inputs + s.index]->data());
  }
  for (size_t i = 0; i < plan.steps.size(); ++i)
    plan.steps[i].prim.execute(ws->stream, ws->step_args[i]);
  ws->stream.wait();
  plan.Release(std::move(ws));
  return Status::Ok();
}

}  // namespace kiln::onednn::internal
