// The plan builder's core: building op by op with a plain-layout fallback, slots and steps,
// layouts and reorders, post-ops, accumulation into residuals, constant weights, and the
// placement of intermediates in the workspace. The ops themselves live in plan_<family>.cc.
#include "external/onednn/run/plan_builder.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <string>

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using Kind = Slot::Kind;

// Step::threads for steps of `work` whose largest input written by a team's step has `spread`
// elements: 1 when the team would not pay, else 0.
int SerialIfSmall(int64_t work, int64_t spread) {
  const int team = omp_get_max_threads();
  return StepThreads(work, spread, team) < team ? 1 : 0;
}

}  // namespace

std::string DimsToString(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

memory::data_type DataType(DType t) {
  switch (t) {
    case DType::kU8:
      return dt::u8;
    case DType::kI8:
      return dt::s8;
    case DType::kI32:
      return dt::s32;
    default:
      return dt::f32;
  }
}

memory::desc PlainMd(Dims dims, dt type) {
  if (dims.empty()) dims = {1};
  Dims strides(dims.size());
  int64_t s = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    strides[i] = s;
    s *= std::max<int64_t>(dims[i], 1);
  }
  return memory::desc(dims, type, strides);
}

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

void* TrialBuffer(size_t bytes, std::vector<std::shared_ptr<void>>* owned) {
  bytes = AlignUp(std::max<size_t>(bytes, 4));
  void* p = std::aligned_alloc(kAlign, bytes);
  if (p == nullptr) throw std::bad_alloc();
  owned->emplace_back(p, [](void* q) { std::free(q); });
  float* f = static_cast<float*>(p);
  for (size_t i = 0; i < bytes / sizeof(float); ++i)
    f[i] = 0.125f * static_cast<float>(i % 13) - 0.75f;
  return p;
}

int64_t Product(const Dims& d) {
  int64_t p = 1;
  for (int64_t x : d) p *= x;
  return p;
}

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

struct Builder::Snapshot {
  size_t slots, steps, buffers, scratch;
  int residual_copies;
  std::vector<int> slot_of, plain_of;
  size_t layouts;
};

StatusOr<std::shared_ptr<Plan>> Builder::Build(const std::vector<Dims>& inputs) {
  plan_ = std::make_shared<Plan>();
  dims_.assign(r_.tensors.size(), Dims());
  slot_of_.assign(r_.tensors.size(), -1);
  plain_of_.assign(r_.tensors.size(), -1);
  layouts_.clear();
  output_index_.assign(r_.tensors.size(), -1);
  for (size_t i = 0; i < r_.outputs.size(); ++i) output_index_[r_.outputs[i]] = static_cast<int>(i);
  AddSlot({memory::desc(), Kind::kWork});  // slot 0: the scratchpad, sized at the end
  for (size_t i = 0; i < r_.inputs.size(); ++i) {
    int32_t t = r_.inputs[i].tensor;
    dims_[t] = inputs[i];
    slot_of_[t] = AddSlot({PlainOf(t), Kind::kInput, static_cast<int>(i)});
  }
  for (const BoundTensor& c : r_.constants) {
    dims_[c.tensor] = c.dims;
    Slot s{PlainOf(c.tensor), Kind::kConst};
    s.ptr = const_cast<void*>(d_.constant_data[c.tensor]);
    slot_of_[c.tensor] = AddSlot(s);
  }
  spread_.assign(r_.tensors.size(), false);
  readers_.assign(r_.tensors.size(), 0);
  for (int32_t t : r_.outputs) ++readers_[t];
  for (const Op& op : r_.ops) {
    for (int32_t t : op.inputs) ++readers_[t];
    for (const PostOp& p : op.post_ops) {
      if (p.tensor >= 0) ++readers_[p.tensor];
    }
  }
  for (size_t i = 0; i < r_.ops.size(); ++i) {
    op_index_ = static_cast<int>(i);
    const Op& op = r_.ops[i];
    std::string where = "ops[" + std::to_string(i) + "] (" + OpKindName(op.kind) + ")";
    skip_next_ = false;
    // An op too small to pay for a fork gets primitives made for, and run on, one thread.
    step_threads_ = SerialIfSmall(OpWork(op, dims_), SpreadInput(op));
    TeamSize team(step_threads_);
    Status s = BuildOpWithFallback(op);
    if (!s.ok()) return s.WithContext(where);
    NoteSpread(op);
    if (skip_next_) NoteSpread(r_.ops[++i]);
  }
  op_index_ = -1;
  for (size_t i = 0; i < r_.outputs.size(); ++i) {
    int32_t t = r_.outputs[i];
    plan_->output_dims.push_back(dims_[t]);
    int out = OutputSlot(t);
    const Slot& cur = plan_->slots[slot_of_[t]];
    // A copy reads and writes each element once: work of two elements per element.
    Op copy;
    copy.inputs = {t};
    step_threads_ = SerialIfSmall(OpWork(copy, dims_), SpreadInput(copy));
    TeamSize team(step_threads_);
    if (cur.kind != Kind::kOutput) AddReorder(slot_of_[t], out);
  }
  step_threads_ = 0;
  AssignOffsets();
  plan_->slots[0].md = memory::desc({static_cast<int64_t>(std::max<size_t>(scratch_, 1))}, dt::u8,
                                    memory::format_tag::x);
  plan_->slots[0].offset = AlignUp(plan_->work_bytes);
  plan_->work_bytes = plan_->slots[0].offset + AlignUp(std::max<size_t>(scratch_, 1));
  return std::move(plan_);
}

int64_t Builder::SpreadInput(const Op& op) const {
  double largest = 0;
  auto note = [&](int32_t t) {
    if (t < 0 || !spread_[t]) return;
    double n = 1;
    for (int64_t d : dims_[t]) n *= static_cast<double>(std::max<int64_t>(d, 0));
    largest = std::max(largest, n);
  };
  for (int32_t t : op.inputs) note(t);
  for (const PostOp& p : op.post_ops) note(p.tensor);
  return largest >= 4e18 ? int64_t{4} << 60 : static_cast<int64_t>(largest);
}

void Builder::NoteSpread(const Op& op) {
  if (op.output >= 0) spread_[op.output] = step_threads_ == 0 && omp_get_max_threads() > 1;
}

Status Builder::BuildOpWithFallback(const Op& op) {
  Snapshot snap{plan_->slots.size(),
                plan_->steps.size(),
                buffer_sizes_.size(),
                scratch_,
                plan_->residual_copies,
                slot_of_,
                plain_of_,
                layouts_.size()};
  std::string first_error;
  for (bool plain : {false, true}) {
    try {
      return BuildOp(op, plain);
    } catch (const dnnl::error& e) {
      if (first_error.empty()) first_error = e.what();
      plan_->slots.resize(snap.slots);
      plan_->steps.resize(snap.steps);
      buffer_sizes_.resize(snap.buffers);
      pinned_.erase(std::remove_if(pinned_.begin(), pinned_.end(),
                                   [&](int b) { return b >= static_cast<int>(snap.buffers); }),
                    pinned_.end());
      scratch_ = snap.scratch;
      plan_->residual_copies = snap.residual_copies;
      slot_of_ = snap.slot_of;
      plain_of_ = snap.plain_of;
      layouts_.resize(snap.layouts);
    }
  }
  return Internal("oneDNN: " + first_error);
}

Status Builder::BuildOp(const Op& op, bool plain) {
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
    case OpKind::kQConv:
      return QConv(op);
    case OpKind::kQMatMul:
      return QMatMul(op);
    case OpKind::kChannels:
      return Channels(op, plain);
    case OpKind::kResize:
      return Resize(op, plain);
    case OpKind::kDepthToSpace:
      return DepthToSpace(op, plain);
  }
  return Internal("unknown op kind");
}

// ---- Slots and steps ----

int Builder::AddSlot(Slot s) {
  plan_->slots.push_back(std::move(s));
  return static_cast<int>(plan_->slots.size()) - 1;
}

int Builder::NewWork(const memory::desc& md) {
  Slot s{md, Kind::kWork};
  s.buffer = static_cast<int>(buffer_sizes_.size());
  buffer_sizes_.push_back(AlignUp(std::max<size_t>(md.get_size(), 1)));
  return AddSlot(s);
}

// Places the intermediates in the workspace: a buffer is live from the first step that
// touches it to the last, and buffers whose lives do not overlap share bytes (first fit).
void Builder::AssignOffsets() {
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
  for (int b : pinned_) {
    if (first[b] >= 0) first[b] = 0, last[b] = static_cast<int>(plan_->steps.size());
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
    live.erase(
        std::remove_if(live.begin(), live.end(), [&](const Live& l) { return l.last < first[b]; }),
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
    if (s.kind == Kind::kWork && s.buffer >= 0) s.offset = offset[s.buffer] + s.within;
  }
  plan_->work_bytes = end;
}

int Builder::View(int slot, const memory::desc& md) {
  Slot s = plan_->slots[slot];
  s.md = md;
  return AddSlot(s);
}

int Builder::OutputSlot(int32_t t) {
  return AddSlot({PlainOf(t), Kind::kOutput, output_index_[t]});
}

// Whether op output `t` with layout `md` is written straight into the caller's tensor: it is a
// region output and the layout is plain.
bool Builder::IntoCaller(int32_t t, const memory::desc& md) {
  return output_index_[t] >= 0 && md == PlainOf(t);
}

// Where op output `t` with layout `md` goes: the caller's tensor (IntoCaller), else the
// workspace.
int Builder::Define(int32_t t, const memory::desc& md) {
  return DefineOn(t, md, IntoCaller(t, md) ? View(OutputSlot(t), md) : NewWork(md));
}

int Builder::DefineOn(int32_t t, const memory::desc& md, int slot) {
  slot_of_[t] = slot;
  plain_of_[t] = md == PlainOf(t) ? slot : -1;
  return slot;
}

dnnl::primitive_attr Builder::Attr() const {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

void Builder::AddPrimitive(dnnl::primitive p, size_t scratch, Args args) {
  scratch_ = std::max(scratch_, scratch);
  args.push_back({DNNL_ARG_SCRATCHPAD, 0});
  plan_->steps.push_back({std::move(p), std::move(args), op_index_});
  plan_->steps.back().threads = step_threads_;
  primitives_->fetch_add(1, std::memory_order_relaxed);
}

void Builder::AddReorder(int from, int to) {
  dnnl::reorder::primitive_desc pd(Engine(), Md(from), Engine(), Md(to), Attr());
  AddPrimitive(dnnl::reorder(pd), pd.scratchpad_desc().get_size(),
               {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
}

// `slot` in layout `md`, reordering into the workspace when it differs.
int Builder::As(int slot, const memory::desc& md) {
  if (Md(slot) == md) return slot;
  int to = NewWork(md);
  AddReorder(slot, to);
  return to;
}

int Builder::CurrentAs(int32_t t, bool plain, const memory::desc& md) {
  const int from = Current(t, plain);
  if (Md(from) == md) return from;
  for (const Layout& l : layouts_) {
    if (l.tensor == t && Md(l.slot) == md) return l.slot;
  }
  const int to = As(from, md);
  layouts_.push_back({t, to});
  return to;
}

// Tensor `t` in row-major layout (a reorder the first time it is needed, then reused).
int Builder::Plain(int32_t t) {
  if (plain_of_[t] < 0) plain_of_[t] = As(slot_of_[t], PlainOf(t));
  return plain_of_[t];
}

// ---- Post-ops, residuals and weights (Conv, MatMul) ----

// Appends the op's post-ops to `attr`; returns the extra arguments (binary operands) and the
// residual the primitive accumulates into (the first sum, -1 if none; see DefineAccumulator).
// `collapsed`: the primitive computes `out` as a matrix (see CollapseOperand), so binary
// operands are viewed as matrices too (the caller checked they collapse). `full_operand_md`
// (optional): the layout for binary operands of out's full shape, else they are row-major.
Status Builder::PostOps(const Op& op, const Dims& out, dnnl::primitive_attr* attr, Args* args,
                        int32_t* residual, bool collapsed,
                        const dnnl::memory::desc* full_operand_md) {
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
      int slot = full_operand_md != nullptr && !collapsed && b == out
                     ? As(slot_of_[p.tensor], *full_operand_md)
                     : PlainView(p.tensor, collapsed ? CollapseOperand(b, out) : b);
      po.append_binary(BinaryAlgorithm(alg), Md(slot));
      args->push_back({DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(i)) | DNNL_ARG_SRC_1, slot});
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

// Defines op output `op.output` (layout `md`) for a primitive whose sum post-op accumulates
// `residual` (-1: none) into dst. A residual that may be overwritten (CanOverwrite) is dst
// itself, unless dst is the caller's tensor (IntoCaller); otherwise it is copied into dst
// first (oneDNN copies a blocked tensor to the same layout with its generic reorder: 0.25 ms
// for 1x256x56x56 on two AVX2 cores, 16 of them per ResNet-50 run). `args`: the primitive's
// other arguments.
int Builder::DefineAccumulator(const Op& op, const memory::desc& md, int32_t residual,
                               const Args& args) {
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
bool Builder::CanOverwrite(int32_t t, const memory::desc& md, const Args& args) const {
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
int Builder::Weights(int32_t t, const memory::desc& plain_md, const memory::desc& want) {
  if (d_.constant_data[t] != nullptr) {
    Slot s{want, Kind::kConst};
    plan_->weights.push_back(
        weights_.Share(op_index_, plain_md, d_.constant_data[t], want, primitives_));
    s.ptr = plan_->weights.back().get();
    return AddSlot(s);
  }
  return As(View(Plain(t), plain_md), want);
}

}  // namespace kiln::onednn::internal
