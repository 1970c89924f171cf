// The plan builder's elementwise ops: eltwise functions, binary ops with numpy broadcasting,
// concatenation, and Flatten (a view, no step).
#include <algorithm>
#include <optional>
#include <string>

#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using Kind = Slot::Kind;

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

// The channel-blocked format `md` has (nChw8c, nChw16c and their 3-D / 5-D kin), if any.
std::optional<memory::format_tag> ChannelBlockedTag(const memory::desc& md) {
  using tag = memory::format_tag;
  int rank = md.data.ndims;
  if (rank < 3 || rank > 5) return std::nullopt;
  const tag by_rank[3][2] = {{tag::nCw8c, tag::nCw16c},
                             {tag::nChw8c, tag::nChw16c},
                             {tag::nCdhw8c, tag::nCdhw16c}};
  for (tag t : by_rank[rank - 3]) {
    if (md == memory::desc(md.dims(), md.data_type(), t)) return t;
  }
  return std::nullopt;
}

// Whether a tensor stored with layout `md` (and no padding) has the element positions of the
// sub-tensor `sub` (a submemory of a larger tensor, whose strides may differ only along dims of
// size 1, where they address nothing).
bool SameLayout(const memory::desc& md, const memory::desc& sub) {
  const dnnl_memory_desc_t &a = md.data, &b = sub.data;
  if (a.format_kind != dnnl_blocked || b.format_kind != dnnl_blocked || a.ndims != b.ndims ||
      a.data_type != b.data_type)
    return false;
  const dnnl_blocking_desc_t &x = a.format_desc.blocking, &y = b.format_desc.blocking;
  if (x.inner_nblks != y.inner_nblks) return false;
  for (int i = 0; i < x.inner_nblks; ++i) {
    if (x.inner_blks[i] != y.inner_blks[i] || x.inner_idxs[i] != y.inner_idxs[i]) return false;
  }
  for (int d = 0; d < a.ndims; ++d) {
    if (a.dims[d] != b.dims[d] || a.padded_dims[d] != a.dims[d]) return false;
    if (a.dims[d] > 1 && x.strides[d] != y.strides[d]) return false;
  }
  return a.offset0 == 0;
}

}  // namespace

Status Builder::Eltwise(const Op& op, bool plain) {
  int32_t x = op.inputs[0];
  dims_[op.output] = dims_[x];
  int src = Current(x, plain);
  dnnl::eltwise_forward::desc desc(dnnl::prop_kind::forward_inference, EltwiseAlgorithm(op.eltwise),
                                   Md(src), op.alpha, op.beta);
  dnnl::eltwise_forward::primitive_desc pd(desc, Attr(), Engine());
  int dst = Define(op.output, pd.dst_desc());
  AddPrimitive(dnnl::eltwise_forward(pd), pd.scratchpad_desc().get_size(),
               {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  return Status::Ok();
}

Status Builder::Binary(const Op& op, bool plain) {
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
  std::optional<memory::format_tag> blocked = ChannelBlockedTag(Md(src0));
  // A broadcast operand already in src0's blocking (the [N, C, 1, 1] scale of a squeeze-excite
  // block, made by a blocked 1x1 conv) is read as it is: a row-major copy of it would be
  // reordered straight back below, two primitives (and two fork / joins) per block for nothing.
  const bool same_blocking = blocked && !plain && dims_[b] != out && dims_[b] == bd &&
                             Md(slot_of_[b]) == memory::desc(bd, dt::f32, *blocked);
  int src1 = dims_[b] == out || same_blocking ? Current(b, plain) : PlainView(b, bd);
  dnnl::binary::desc desc(BinaryAlgorithm(op.binary), Md(src0), Md(src1), Md(src0));
  dnnl::binary::primitive_desc pd(desc, Attr(), Engine());
  // A broadcast operand in row-major layout beside a channel-blocked src0 gets oneDNN 2.6's
  // reference kernel: 1.9-12 ms for one multiply of a 1x144x16x20 tensor. Reordering the small
  // operand into src0's blocking first (a few hundred floats) gets its JIT kernel.
  if (blocked && dims_[b] != out && std::string(pd.impl_info_str()).find("ref") == 0) {
    src1 = As(src1, memory::desc(bd, dt::f32, *blocked));
    dnnl::binary::desc fast(BinaryAlgorithm(op.binary), Md(src0), Md(src1), Md(src0));
    pd = dnnl::binary::primitive_desc(fast, Attr(), Engine());
  } else if (dims_[b] == out && std::string(pd.impl_info_str()).find("ref") == 0) {
    // Two full-shape operands in different layouts (a row-major Resize or region input beside
    // a blocked conv output: a BiFPN's weighted fusion) get the reference kernel too, 10 ms for
    // one add of 1x64x16x16. One reorder into the blocked operand's layout gets the JIT kernel.
    std::optional<memory::format_tag> blocked1 = ChannelBlockedTag(Md(src1));
    if (blocked)
      src1 = As(src1, Md(src0));
    else if (blocked1)
      src0 = As(src0, memory::desc(out, dt::f32, *blocked1));
    dnnl::binary::desc fast(BinaryAlgorithm(op.binary), Md(src0), Md(src1), Md(src0));
    pd = dnnl::binary::primitive_desc(fast, Attr(), Engine());
  }
  int dst = Define(op.output, pd.dst_desc());
  AddPrimitive(dnnl::binary(pd), pd.scratchpad_desc().get_size(),
               {{DNNL_ARG_SRC_0, src0}, {DNNL_ARG_SRC_1, src1}, {DNNL_ARG_DST, dst}});
  return Status::Ok();
}

Status Builder::Concat(const Op& op, bool plain) {
  Dims out = dims_[op.inputs[0]];
  std::vector<memory::desc> mds;
  Args args;
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
  if (!plain && ConcatIntoCaller(op, args)) return Status::Ok();
  dnnl::concat::primitive_desc pd =
      plain ? dnnl::concat::primitive_desc(PlainMd(out), static_cast<int>(op.axis), mds, Engine(),
                                           Attr())
            : dnnl::concat::primitive_desc(static_cast<int>(op.axis), mds, Engine(), Attr());
  if (ConcatInPlace(op, pd.dst_desc(), args)) return Status::Ok();
  if (ConcatByReorders(op, plain ? pd.dst_desc() : ConcatLayout(op, pd.dst_desc()), args))
    return Status::Ok();
  int dst = Define(op.output, pd.dst_desc());
  args.push_back({DNNL_ARG_DST, dst});
  AddPrimitive(dnnl::concat(pd), pd.scratchpad_desc().get_size(), args);
  return Status::Ok();
}

namespace {

// The channel block oneDNN's f32 convolutions take on this CPU: 16 floats with AVX-512, else 8.
int64_t NativeChannelBlock() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return 16;
    default:
      return 8;
  }
}

}  // namespace

// The layout a concat copied by reorders writes. Along the channels of f32 inputs whose channel
// counts are whole blocks: an input's channel blocking if it has one, else (all inputs plain)
// the native block, as the convolution that usually follows takes it (U-Net's decoder
// concatenates two row-major tensors, from outside the region, ahead of a 3x3 conv: a plain
// result was reordered whole a second time). Otherwise oneDNN's choice, `chosen`.
memory::desc Builder::ConcatLayout(const Op& op, const memory::desc& chosen) const {
  using tag = memory::format_tag;
  const Dims& out = dims_[op.output];
  const int rank = static_cast<int>(out.size());
  if (op.axis != 1 || rank < 3 || rank > 5 || chosen.data_type() != dt::f32) return chosen;
  std::optional<tag> blocked;
  for (int32_t t : op.inputs) {
    const memory::desc& md = Md(slot_of_[t]);
    if (md.data_type() != dt::f32) return chosen;
    if (std::optional<tag> b = ChannelBlockedTag(md)) {
      if (blocked && *blocked != *b) return chosen;
      blocked = b;
    } else if (md != PlainOf(t)) {
      return chosen;  // neither plain nor channel-blocked
    }
  }
  const tag native[3][2] = {{tag::nCw8c, tag::nCw16c},
                            {tag::nChw8c, tag::nChw16c},
                            {tag::nCdhw8c, tag::nCdhw16c}};
  const tag want = blocked ? *blocked : native[rank - 3][NativeChannelBlock() == 16 ? 1 : 0];
  const memory::desc md(out, dt::f32, want);
  const int64_t block = md.data.format_desc.blocking.inner_blks[0];
  for (int32_t t : op.inputs) {
    if (dims_[t][1] % block != 0) return chosen;
  }
  return md;
}

// A concat copied by one reorder per input into its place in the output (layout `dst_md`).
// oneDNN 2.6's concat primitive ("simple:any") copies 7-15x slower than its reorders, on every
// shape measured (one thread, Zen 3): two 1x16x128x128 row-major inputs 1.68 ms against 0.11 ms,
// four 1x128x14x14 0.30 ms against 0.024, two 1x256x56x56 blocked 3.7 ms against 0.45. False
// (the caller runs the primitive) when a place cannot be described in `dst_md` (a channel
// offset inside a block).
bool Builder::ConcatByReorders(const Op& op, const memory::desc& dst_md, const Args& srcs) {
  const Dims& out = dims_[op.output];
  std::vector<memory::desc> places;
  Dims offsets(out.size(), 0);
  try {
    for (size_t i = 0; i < srcs.size(); ++i) {
      const Dims& d = dims_[op.inputs[i]];
      places.push_back(dst_md.submemory_desc(d, offsets));
      offsets[op.axis] += d[op.axis];
    }
  } catch (const dnnl::error&) {
    return false;
  }
  int dst = Define(op.output, dst_md);
  for (size_t i = 0; i < srcs.size(); ++i) {
    if (Product(dims_[op.inputs[i]]) == 0) continue;
    AddReorder(srcs[i].second, View(dst, places[i]));
  }
  return true;
}

// A concat the region returns: each input reordered straight to its place in the caller's
// plain tensor, one pass per input. oneDNN's concat of mixed layouts into a plain output (each
// ShuffleNetV2 unit concatenates the plain half it passes through with its convolutions'
// blocked output) is its reference implementation. Only in the first attempt of the op
// (`plain` false): when a reorder cannot be made, the retry runs the concat primitive.
bool Builder::ConcatIntoCaller(const Op& op, const Args& srcs) {
  if (output_index_[op.output] < 0) return false;
  memory::desc dst = PlainOf(op.output);
  if (dst.data.data_type != dnnl_f32) return false;
  int out = OutputSlot(op.output);
  Dims offsets(dims_[op.output].size(), 0);
  for (size_t i = 0; i < srcs.size(); ++i) {
    const Dims& d = dims_[op.inputs[i]];
    int to = View(out, dst.submemory_desc(d, offsets));
    offsets[op.axis] += d[op.axis];
    AddReorder(srcs[i].second, to);
  }
  DefineOn(op.output, dst, out);
  return true;
}

struct Builder::ConcatPart {
  enum How { kPlaced, kMove, kCopy } how;
  memory::desc md;  // the input's layout at its place
  size_t at, size;  // bytes into the output
};

// A concat without a copy step (Squeezenet's fire modules, GoogLeNet's inception blocks and
// DenseNet's dense blocks spend 5-20% of their time in concats otherwise, DenseNet's in oneDNN's
// reference concat when its first input is plain): each input lives at its own place inside the
// output and the output is a view. That place has a dense layout at batch 1 for plain and
// channel-blocked outputs when the channel offsets are whole blocks (else, e.g. at batch 2, the
// concat copies as usual). Per input: one already placed by an earlier concat at its offset
// (DenseNet concatenates every earlier output of its block again) fixes the buffer, which grows;
// an intermediate in that layout moves there with every slot that views it, so its producer
// writes it in place; any other (a region input, a tensor placed elsewhere) is reordered into its
// place once, and later ops read that copy. Modifies nothing unless it returns true.
bool Builder::ConcatInPlace(const Op& op, const memory::desc& dst_md, const Args& srcs) {
  if (output_index_[op.output] >= 0 || dst_md.data.data_type != dnnl_f32) return false;
  std::vector<ConcatPart> parts;
  int target = -1;
  if (!PlaceConcatInputs(op, dst_md, srcs, &parts, &target)) return false;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].how == ConcatPart::kCopy && Movable(op, srcs, i, parts[i]))
      parts[i].how = ConcatPart::kMove;
  }
  bool useful = false;
  for (const ConcatPart& p : parts) {
    useful = useful || p.how != ConcatPart::kCopy;
    if (target < 0 || p.how == ConcatPart::kPlaced) continue;
    for (const auto& [at, size] : parts_[target]) {
      if (p.at < at + size && at < p.at + p.size) return false;  // bytes another input holds
    }
  }
  if (!useful) return false;  // copying every input is what the concat primitive does
  // The reorders first: their constructors may throw, and BuildOpWithFallback undoes only
  // appended slots and steps.
  if (target < 0) target = plan_->slots[NewWork(dst_md)].buffer;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].how != ConcatPart::kCopy) continue;
    Slot copy{parts[i].md, Kind::kWork};
    copy.buffer = target;
    copy.within = parts[i].at;
    int to = AddSlot(copy);
    AddReorder(srcs[i].second, to);
    slot_of_[op.inputs[i]] = to;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const ConcatPart& p = parts[i];
    if (p.how != ConcatPart::kPlaced) parts_[target].push_back({p.at, p.size});
    if (p.how == ConcatPart::kMove) MoveBuffer(plan_->slots[srcs[i].second].buffer, target, p.at);
  }
  buffer_sizes_[target] = std::max(buffer_sizes_[target], AlignUp(dst_md.get_size()));
  Slot out{dst_md, Kind::kWork};
  out.buffer = target;
  DefineOn(op.output, dst_md, AddSlot(out));
  ++plan_->concats_in_place;
  return true;
}

// Where each input of a concat goes in the output `dst_md` (ConcatInPlace): its layout and
// bytes there, kPlaced if it already sits there (in *target, the buffer of the first such input),
// else kCopy. False when some place is not dense (an offset inside a channel block, batch > 1).
bool Builder::PlaceConcatInputs(const Op& op, const memory::desc& dst_md, const Args& srcs,
                                std::vector<ConcatPart>* parts, int* target) {
  std::optional<memory::format_tag> tag = ChannelBlockedTag(dst_md);
  bool plain = dst_md == PlainMd(dims_[op.output]);
  if (!plain && !tag) return false;
  Dims offsets(dims_[op.output].size(), 0);
  for (size_t i = 0; i < srcs.size(); ++i) {
    const Dims& d = dims_[op.inputs[i]];
    memory::desc sub;
    try {
      sub = dst_md.submemory_desc(d, offsets);
    } catch (const dnnl::error&) {
      return false;  // e.g. an offset inside a channel block
    }
    offsets[op.axis] += d[op.axis];
    memory::desc md = plain ? PlainMd(d) : memory::desc(d, dt::f32, *tag);
    if (!SameLayout(md, sub)) return false;
    const Slot& s = plan_->slots[srcs[i].second];
    ConcatPart p{ConcatPart::kCopy, md, static_cast<size_t>(sub.data.offset0) * sizeof(float),
                 md.get_size()};
    if (s.kind == Kind::kWork && s.md == md && parts_.count(s.buffer) && s.within == p.at &&
        (*target < 0 || *target == s.buffer)) {
      p.how = ConcatPart::kPlaced;
      *target = s.buffer;
    }
    parts->push_back(p);
  }
  return true;
}

// Whether concat input `i` (part `p`) can move into the output: an intermediate of the
// workspace in its layout there, not a region output, alone in its buffer and not placed by
// another concat, and not an earlier input again (one tensor twice moves once).
bool Builder::Movable(const Op& op, const Args& srcs, size_t i, const ConcatPart& p) const {
  const Slot& s = plan_->slots[srcs[i].second];
  if (s.kind != Kind::kWork || s.buffer < 0 || s.md != p.md || parts_.count(s.buffer) ||
      output_index_[op.inputs[i]] >= 0 || !WholeBuffer(s.buffer, p.size))
    return false;
  for (size_t j = 0; j < i; ++j) {
    if (plan_->slots[srcs[j].second].buffer == s.buffer) return false;
  }
  return true;
}

// Moves intermediate `from` to byte `at` of intermediate `to`, with every slot that views it.
void Builder::MoveBuffer(int from, int to, size_t at) {
  for (Slot& s : plan_->slots) {
    if (s.kind != Kind::kWork || s.buffer != from) continue;
    s.buffer = to;
    s.within += at;
  }
}

// Whether every workspace slot of intermediate `buffer` views it from its start and within
// `size` bytes, so that it can move as a whole.
bool Builder::WholeBuffer(int buffer, size_t size) const {
  for (const Slot& s : plan_->slots) {
    if (s.kind != Kind::kWork || s.buffer != buffer) continue;
    if (s.within != 0 || s.md.get_size() > size) return false;
  }
  return true;
}

// A view of the row-major input: no step. A region output that is a flattened tensor is
// copied into the caller's tensor at the end like any output left in the workspace.
Status Builder::Flatten(const Op& op) {
  int32_t x = op.inputs[0];
  const Dims& xd = dims_[x];
  Dims out = {Product(Sub(xd, 0, op.axis)), Product(Sub(xd, op.axis, xd.size()))};
  dims_[op.output] = out;
  int slot = PlainView(x, out);
  slot_of_[op.output] = slot;
  plain_of_[op.output] = slot;
  return Status::Ok();
}

}  // namespace kiln::onednn::internal
