// The plan builder's integer ops (QConv, QMatMul: the QDQ form's int8 operations, region.h):
// oneDNN int8 convolution and matmul with per-channel output scales, source and destination
// zero points and eltwise post-ops, u8 in, s8 weights, s32 bias, u8 out.
#include <string>
#include <vector>

#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

using dnnl::memory;
using dt = memory::data_type;

}  // namespace

// oneDNN 2.x computes dst = zero_point_dst + post_ops(out_scale[c] * (sum((src - zero_point_src)
// * w) + bias[c])), rounded half to even and saturated to u8: the requantization ONNX's
// QuantizeLinear defines (up to float rounding of the scale product). `channel_mask` selects
// the dst dim the scales run along.
StatusOr<dnnl::primitive_attr> Builder::Int8Attr(const Op& op, int channel_mask,
                                                 int64_t channels) {
  int32_t scales = op.inputs[2], zeros = op.inputs[3];
  const float* s = static_cast<const float*>(d_.constant_data[scales]);
  const int32_t* z = static_cast<const int32_t*>(d_.constant_data[zeros]);
  if (s == nullptr || z == nullptr)
    return InvalidArgument("out_scales and zero_points must be constants");
  if (dims_[scales] != Dims{channels} || dims_[zeros] != Dims{2})
    return InvalidArgument("out_scales " + DimsToString(dims_[scales]) + " for " +
                           std::to_string(channels) + " channels, zero_points " +
                           DimsToString(dims_[zeros]) + " (expected [2])");
  dnnl::primitive_attr attr = Attr();
  attr.set_output_scales(channel_mask, std::vector<float>(s, s + channels));
  if (z[0] != 0) attr.set_zero_points(DNNL_ARG_SRC, 0, {z[0]});
  if (z[1] != 0) attr.set_zero_points(DNNL_ARG_DST, 0, {z[1]});
  dnnl::post_ops po;
  for (const PostOp& p : op.post_ops)
    po.append_eltwise(1.0f, EltwiseAlgorithm(p.eltwise), p.alpha, p.beta);
  attr.set_post_ops(po);
  return attr;
}

Status Builder::QConv(const Op& op) {
  int32_t x = op.inputs[0], w = op.inputs[1];
  const Dims &xd = dims_[x], &wd = dims_[w];
  bool has_bias = op.inputs.size() == 5;
  const Dims* bias = has_bias ? &dims_[op.inputs[4]] : nullptr;
  Dims out;
  ASSIGN_OR_RETURN(Window win, ConvWindow(op, xd, wd, bias, &out));
  dims_[op.output] = out;
  Dims gw = GroupedWeightDims(wd, op.group);
  ASSIGN_OR_RETURN(dnnl::primitive_attr attr, Int8Attr(op, 1 << 1, wd[0]));
  memory::desc bias_md = has_bias ? PlainMd({wd[0]}, dt::s32) : memory::desc();
  dnnl::convolution_forward::desc desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
      memory::desc(xd, dt::u8, memory::format_tag::any),
      memory::desc(gw, dt::s8, memory::format_tag::any), bias_md,
      memory::desc(out, dt::u8, memory::format_tag::any), win.strides, win.dilations, win.pad_l,
      win.pad_r);
  dnnl::convolution_forward::primitive_desc pd(desc, attr, Engine());
  Args args;
  args.push_back({DNNL_ARG_SRC, As(slot_of_[x], pd.src_desc())});
  args.push_back({DNNL_ARG_WEIGHTS, Weights(w, PlainMd(gw, dt::s8), pd.weights_desc())});
  if (has_bias) args.push_back({DNNL_ARG_BIAS, Plain(op.inputs[4])});
  args.push_back({DNNL_ARG_DST, Define(op.output, pd.dst_desc())});
  AddPrimitive(dnnl::convolution_forward(pd), pd.scratchpad_desc().get_size(), args);
  return Status::Ok();
}

// A as the matrix [prod(leading dims), K], B [K, N] (stored [N, K] with trans_b), out
// [leading dims..., N] written as [M, N].
Status Builder::QMatMul(const Op& op) {
  int32_t a = op.inputs[0], b = op.inputs[1];
  const Dims &ad = dims_[a], &bd = dims_[b];
  int64_t k = op.trans_b ? bd[1] : bd[0], n = op.trans_b ? bd[0] : bd[1];
  if (ad.back() != k)
    return InvalidArgument("A " + DimsToString(ad) + " and B " + DimsToString(bd) +
                           (op.trans_b ? " (transposed)" : "") + " do not multiply");
  bool has_bias = op.inputs.size() == 5;
  if (has_bias && dims_[op.inputs[4]] != Dims{n})
    return InvalidArgument("bias " + DimsToString(dims_[op.inputs[4]]) + " for " +
                           std::to_string(n) + " columns");
  int64_t m = Product(Sub(ad, 0, ad.size() - 1));
  Dims out = Sub(ad, 0, ad.size() - 1);
  out.push_back(n);
  dims_[op.output] = out;
  ASSIGN_OR_RETURN(dnnl::primitive_attr attr, Int8Attr(op, 1 << 1, n));
  memory::desc a_md = PlainMd({m, k}, dt::u8), out_md = PlainMd({m, n}, dt::u8);
  memory::desc b_plain = op.trans_b ? memory::desc({k, n}, dt::s8, Dims{1, k})
                                    : PlainMd({k, n}, dt::s8);
  memory::desc bias_md = has_bias ? PlainMd({1, n}, dt::s32) : memory::desc();
  dnnl::matmul::desc desc(a_md, memory::desc({k, n}, dt::s8, memory::format_tag::any), bias_md,
                          out_md);
  dnnl::matmul::primitive_desc pd(desc, attr, Engine());
  Args args;
  args.push_back({DNNL_ARG_SRC, View(Plain(a), a_md)});
  args.push_back({DNNL_ARG_WEIGHTS, Weights(b, b_plain, pd.weights_desc())});
  if (has_bias) args.push_back({DNNL_ARG_BIAS, View(Plain(op.inputs[4]), bias_md)});
  args.push_back({DNNL_ARG_DST, View(Define(op.output, PlainOf(op.output)), out_md)});
  AddPrimitive(dnnl::matmul(pd), pd.scratchpad_desc().get_size(), args);
  return Status::Ok();
}

}  // namespace kiln::onednn::internal

namespace kiln::onednn::internal {

Status DeclineSaturatingInt8(const RegionData& data) {
  dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  if (isa == dnnl::cpu_isa::avx2_vnni || isa == dnnl::cpu_isa::avx512_core_vnni ||
      isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx)
    return Status::Ok();
  const RegionProgram& r = data.region;
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const Op& op = r.ops[i];
    if (op.kind != OpKind::kQConv && op.kind != OpKind::kQMatMul) continue;
    const int8_t* w = static_cast<const int8_t*>(data.constant_data[op.inputs[1]]);
    if (w == nullptr) continue;  // Bind makes every constant's data available
    int64_t n = 0;
    for (const BoundTensor& c : r.constants) {
      if (c.tensor == op.inputs[1]) n = Product(c.dims);
    }
    for (int64_t k = 0; k < n; ++k) {
      if (w[k] < -64 || w[k] > 64)
        return Declined("ops[" + std::to_string(i) + "] (" + OpKindName(op.kind) + "): weight " +
                        std::to_string(w[k]) +
                        " outside [-64, 64] on a CPU without VNNI (u8 x s8 pairs would saturate "
                        "vpmaddubsw's int16 sums; quantize weights to 7 bits)");
    }
  }
  return Status::Ok();
}

}  // namespace kiln::onednn::internal
