// The plan builder's channel copies: region op kChannels (a channel Slice, ShuffleNet's channel
// shuffle, a Concat folded into one) by kiln's ChannelGather and kDepthToSpace by kiln's
// DepthToSpace, on the layout the inputs already have, so the copy stays between the region's
// blocked primitives.
#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

// The channel-blocked tag (8 or 16 lanes) `md` has for its rank, or undef.
tag BlockedTag(const memory::desc& md, const Dims& dims) {
  static const tag k8[] = {tag::nCw8c, tag::nChw8c, tag::nCdhw8c};
  static const tag k16[] = {tag::nCw16c, tag::nChw16c, tag::nCdhw16c};
  size_t r = dims.size() - 3;
  for (tag t : {k8[r], k16[r]}) {
    if (md == memory::desc(dims, memory::data_type::f32, t)) return t;
  }
  return tag::undef;
}

}  // namespace

Status Builder::Channels(const Op& op, bool plain) {
  Dims out = dims_[op.inputs[0]];
  int64_t c = 0, start = op.pads[0], count = op.pads[1];
  for (int32_t x : op.inputs) {
    const Dims& xd = dims_[x];
    if (xd.size() != out.size() || xd[0] != out[0] ||
        Sub(xd, 2, xd.size()) != Sub(out, 2, out.size()))
      return InvalidArgument("input " + DimsToString(xd) + " does not match " + DimsToString(out));
    c += xd[1];
  }
  if (c % op.group != 0 || start + count > c)
    return InvalidArgument("channels [" + std::to_string(start) + ", " +
                           std::to_string(start + count) + ") of " + std::to_string(c) + " in " +
                           std::to_string(op.group) + " groups");
  out[1] = count;
  dims_[op.output] = out;
  // Blocked when every input has the same channel-blocked layout (the output gets it too,
  // with zero padding lanes), else row-major copies.
  tag blocked = plain ? tag::undef : BlockedTag(Md(slot_of_[op.inputs[0]]), dims_[op.inputs[0]]);
  for (int32_t x : op.inputs) {
    if (blocked != tag::undef && BlockedTag(Md(slot_of_[x]), dims_[x]) != blocked)
      blocked = tag::undef;
  }
  Args args;
  std::vector<memory::desc> srcs;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    int32_t x = op.inputs[i];
    int src = blocked != tag::undef ? slot_of_[x] : Plain(x);
    args.push_back({DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i), src});
    srcs.push_back(Md(src));
  }
  memory::desc dst_md =
      blocked != tag::undef ? memory::desc(out, memory::data_type::f32, blocked) : PlainMd(out);
  std::shared_ptr<const ChannelGather> gather = ChannelGather::Make(srcs, dst_md, op.group, start);
  if (gather == nullptr) return Internal("the channel copy refused its layouts");
  int dst = Define(op.output, dst_md);
  args.push_back({DNNL_ARG_DST, dst});
  // The step's primitive only describes it (Step::channels runs instead).
  dnnl::reorder::primitive_desc pd(Engine(), dst_md, Engine(), dst_md, Attr());
  AddPrimitive(dnnl::reorder(pd), 0, std::move(args));
  plan_->steps.back().channels = std::move(gather);
  return Status::Ok();
}

// Blocked when the input is channel-blocked and DCR moves whole blocks (each phase's channels
// start on a block), the output then blocked the same way; otherwise row-major.
Status Builder::DepthToSpace(const Op& op, bool plain) {
  const int32_t x = op.inputs[0];
  const Dims& xd = dims_[x];
  const int64_t s = op.strides.empty() ? 0 : op.strides[0];
  if (xd.size() != 4 || s < 1 || xd[1] % (s * s) != 0)
    return InvalidArgument("input " + DimsToString(xd) + " for blocksize " + std::to_string(s));
  const Dims out = {xd[0], xd[1] / (s * s), xd[2] * s, xd[3] * s};
  dims_[op.output] = out;
  tag blocked = plain ? tag::undef : BlockedTag(Md(slot_of_[x]), xd);
  const int64_t block = blocked == tag::nChw16c ? 16 : 8;
  if (blocked != tag::undef && (op.axis != 0 || out[1] % block != 0)) blocked = tag::undef;
  const int src = blocked != tag::undef ? slot_of_[x] : Plain(x);
  const memory::desc dst_md =
      blocked != tag::undef ? memory::desc(out, memory::data_type::f32, blocked) : PlainMd(out);
  std::shared_ptr<const internal::DepthToSpace> d2s =
      internal::DepthToSpace::Make(Md(src), dst_md, s, op.axis == 1);
  if (d2s == nullptr) return Internal("DepthToSpace refused its layouts");
  const int dst = Define(op.output, dst_md);
  // The step's primitive only describes it (Step::depth_to_space runs instead).
  dnnl::reorder::primitive_desc pd(Engine(), dst_md, Engine(), dst_md, Attr());
  AddPrimitive(dnnl::reorder(pd), 0, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  plan_->steps.back().depth_to_space = std::move(d2s);
  return Status::Ok();
}

}  // namespace kiln::onednn::internal
