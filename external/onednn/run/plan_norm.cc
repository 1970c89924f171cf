// The plan builder's normalizations: softmax / log-softmax, layer normalization (over a 2-D
// view) and inference batch normalization (with a following Relu fused in).
#include <string>

#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using dt = memory::data_type;

}  // namespace

Status Builder::Softmax(const Op& op, bool plain) {
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
Status Builder::LayerNorm(const Op& op) {
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
  dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, md2, op.epsilon,
                                               flags);
  dnnl::layer_normalization_forward::primitive_desc pd(desc, Attr(), Engine());
  int src = PlainView(x, {outer, inner});
  Args args = {{DNNL_ARG_SRC, src}, {DNNL_ARG_SCALE, PlainView(op.inputs[1], {inner})}};
  if (op.inputs.size() == 3) args.push_back({DNNL_ARG_SHIFT, PlainView(op.inputs[2], {inner})});
  int dst = View(Define(op.output, PlainMd(xd)), md2);
  args.push_back({DNNL_ARG_DST, dst});
  AddPrimitive(dnnl::layer_normalization_forward(pd), pd.scratchpad_desc().get_size(), args);
  return Status::Ok();
}

const Op* Builder::SoleRelu(const Op& op) const {
  size_t next = static_cast<size_t>(op_index_) + 1;
  if (next >= r_.ops.size() || readers_[op.output] != 1) return nullptr;
  const Op& relu = r_.ops[next];
  if (relu.kind != OpKind::kEltwise || relu.eltwise != EltwiseAlg::kRelu || relu.alpha != 0.0f ||
      relu.inputs.size() != 1 || relu.inputs[0] != op.output || !relu.post_ops.empty())
    return nullptr;
  return &relu;
}

// A Relu right after the normalization (DenseNet's pre-activation BN -> ReLU -> conv, which no
// conv post-op can take) is applied by the same primitive (fuse_norm_relu): one pass over the
// tensor instead of two, the same values (relu of the normalized ones).
Status Builder::BatchNorm(const Op& op, bool plain) {
  int32_t x = op.inputs[0];
  const Dims& xd = dims_[x];
  dims_[op.output] = xd;
  for (int i = 1; i < 5; ++i) {
    if (dims_[op.inputs[i]] != Dims{xd[1]})
      return InvalidArgument("statistics " + DimsToString(dims_[op.inputs[i]]) + " for " +
                             std::to_string(xd[1]) + " channels");
  }
  int src = Current(x, plain);
  auto flags = dnnl::normalization_flags::use_global_stats | dnnl::normalization_flags::use_scale |
               dnnl::normalization_flags::use_shift;
  const Op* relu = SoleRelu(op);
  auto make = [&](dnnl::normalization_flags f) {
    dnnl::batch_normalization_forward::desc desc(dnnl::prop_kind::forward_inference, Md(src),
                                                 op.epsilon, f);
    return dnnl::batch_normalization_forward::primitive_desc(desc, Attr(), Engine());
  };
  dnnl::batch_normalization_forward::primitive_desc pd =
      make(relu ? flags | dnnl::normalization_flags::fuse_norm_relu : flags);
  // Where the fused form only has reference code, the two primitives run as before.
  if (relu && std::string(pd.impl_info_str()).find("ref") == 0) {
    relu = nullptr;
    pd = make(flags);
  }
  Args args = {{DNNL_ARG_SRC, src},
               {DNNL_ARG_SCALE, Plain(op.inputs[1])},
               {DNNL_ARG_SHIFT, Plain(op.inputs[2])},
               {DNNL_ARG_MEAN, Plain(op.inputs[3])},
               {DNNL_ARG_VARIANCE, Plain(op.inputs[4])}};
  int32_t out = relu ? relu->output : op.output;
  dims_[out] = xd;
  int dst = Define(out, pd.dst_desc());
  args.push_back({DNNL_ARG_DST, dst});
  AddPrimitive(dnnl::batch_normalization_forward(pd), pd.scratchpad_desc().get_size(), args);
  skip_next_ = relu != nullptr;
  return Status::Ok();
}

}  // namespace kiln::onednn::internal
