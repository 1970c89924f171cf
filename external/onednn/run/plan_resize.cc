// The plan builder's nearest upsampling by whole factors (region op kResize): oneDNN's
// resampling on the layout its input already has, so YOLO's neck (conv, Upsample x2, concat,
// conv) stays one region on blocked layouts.
#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {

using dnnl::memory;

// oneDNN's nearest resampling reads src at round((o + 0.5) * in / out - 0.5) (its reference
// and JIT kernels alike); with out = s * in and o = k s + r that is round(k + (r + 0.5) / s -
// 0.5) = k, the pixel repeated, so the result is the input's values bit for bit.
Status Builder::Resize(const Op& op, bool plain) {
  int32_t x = op.inputs[0];
  const Dims& xd = dims_[x];
  if (op.strides.size() + 2 != xd.size())
    return InvalidArgument(std::to_string(op.strides.size()) + " factors for input " +
                           DimsToString(xd));
  Dims out = xd;
  for (size_t i = 0; i < op.strides.size(); ++i) out[2 + i] *= op.strides[i];
  dims_[op.output] = out;
  int src = Current(x, plain);
  // dst takes src's layout (oneDNN's choice for format any: channel-blocked stays blocked).
  memory::desc any(out, memory::data_type::f32, memory::format_tag::any);
  dnnl::resampling_forward::desc desc(dnnl::prop_kind::forward_inference,
                                      dnnl::algorithm::resampling_nearest, Md(src), any);
  dnnl::resampling_forward::primitive_desc pd(desc, Attr(), Engine());
  int dst = Define(op.output, pd.dst_desc());
  AddPrimitive(dnnl::resampling_forward(pd), pd.scratchpad_desc().get_size(),
               {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
  return Status::Ok();
}

}  // namespace kiln::onednn::internal
