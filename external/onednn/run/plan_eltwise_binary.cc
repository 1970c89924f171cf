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
  int src1 = dims_[b] == out ? Current(b, plain) : PlainView(b, bd);
  dnnl::binary::desc desc(BinaryAlgorithm(op.binary), Md(src0), Md(src1), Md(src0));
  dnnl::binary::primitive_desc pd(desc, Attr(), Engine());
  // A broadcast operand in row-major layout beside a channel-blocked src0 (the [N, C, 1, 1]
  // scale of a squeeze-excite block) gets oneDNN 2.6's reference kernel: 1.9-12 ms for one
  // multiply of a 1x144x16x20 tensor. Reordering the small operand into src0's blocking first
  // (a few hundred floats) gets its JIT kernel.
  std::optional<memory::format_tag> blocked = ChannelBlockedTag(Md(src0));
  if (blocked && dims_[b] != out && std::string(pd.impl_info_str()).find("ref") == 0) {
    src1 = As(src1, memory::desc(bd, dt::f32, *blocked));
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
