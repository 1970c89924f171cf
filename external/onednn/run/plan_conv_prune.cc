// Convolution taps that read only padding, dropped at plan build (the shapes are known then):
// with a dilation as large as the input (DeepLab's ASPP: 3x3 at dilation 24 and 36 on 16x16)
// every tap but the centre multiplies zeros, and the conv is a 1x1 one.
#include <algorithm>
#include <cstring>
#include <vector>

#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {

namespace {

using dnnl::memory;

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

// Tap t of a dim reads the input at o * stride - pad_l + t * dilation for outputs o < out:
// true when one of those lies in [0, in).
bool TapReadsInput(int64_t t, int64_t in, int64_t out, int64_t stride, int64_t dilation,
                   int64_t pad_l) {
  int64_t c = t * dilation - pad_l;
  int64_t lo = std::max<int64_t>(0, -FloorDiv(c, stride));  // ceil(-c / stride)
  int64_t hi = std::min(out - 1, FloorDiv(in - 1 - c, stride));
  return lo <= hi;
}

}  // namespace

std::optional<PrunedTaps> PadOnlyTaps(const Dims& xd, const Dims& wd, Window* win) {
  const size_t spatial = xd.size() - 2;
  PrunedTaps p;
  p.wd = wd;
  p.first.assign(spatial, 0);
  Window pruned = *win;
  bool any = false;
  for (size_t i = 0; i < spatial; ++i) {
    int64_t k = wd[2 + i], in = xd[2 + i], out = win->out[i], s = win->strides[i];
    int64_t dil = win->dilations[i] + 1, pl = win->pad_l[i];
    int64_t first = 0, last = k - 1;
    while (first < k && !TapReadsInput(first, in, out, s, dil, pl)) ++first;
    while (last > first && !TapReadsInput(last, in, out, s, dil, pl)) --last;
    // No tap reads the input (the output is the bias): nothing to slice to. Keep the dim.
    if (first == k || (first == 0 && last == k - 1)) continue;
    int64_t taps = last - first + 1, new_pl = pl - first * dil;
    int64_t new_pr = (out - 1) * s + (taps - 1) * dil + 1 - in - new_pl;
    if (new_pl < 0 || new_pr < 0) continue;  // oneDNN pads are non-negative
    p.first[i] = first;
    p.wd[2 + i] = taps;
    pruned.pad_l[i] = new_pl;
    pruned.pad_r[i] = new_pr;
    if (taps == 1) pruned.dilations[i] = 0;  // one tap: the dilation is moot
    any = true;
  }
  if (!any) return std::nullopt;
  *win = pruned;
  return p;
}

std::vector<float> SliceTaps(const float* w, const Dims& wd, const PrunedTaps& p) {
  const size_t spatial = wd.size() - 2;
  Dims old_k = Sub(wd, 2, wd.size()), new_k = Sub(p.wd, 2, p.wd.size());
  int64_t blocks = wd[0] * wd[1], old_taps = Product(old_k), new_taps = Product(new_k);
  std::vector<float> out(static_cast<size_t>(blocks * new_taps));
  std::vector<int64_t> at(spatial);
  for (int64_t t = 0; t < new_taps; ++t) {
    // Tap t of the slice (row-major over new_k) -> its flat index in the full kernel.
    int64_t rest = t, src = 0;
    for (size_t i = spatial; i-- > 0;) {
      at[i] = rest % new_k[i] + p.first[i];
      rest /= new_k[i];
    }
    for (size_t i = 0; i < spatial; ++i) src = src * old_k[i] + at[i];
    for (int64_t b = 0; b < blocks; ++b) out[b * new_taps + t] = w[b * old_taps + src];
  }
  return out;
}

int Builder::OwnedWeights(const memory::desc& plain_md, std::vector<float> data,
                          const memory::desc& want) {
  size_t size = AlignUp(std::max<size_t>(want.get_size(), 1));
  std::shared_ptr<uint8_t> bytes(static_cast<uint8_t*>(std::aligned_alloc(kAlign, size)),
                                 [](uint8_t* q) { std::free(q); });
  if (!bytes) throw std::bad_alloc();
  if (want == plain_md) {
    std::memcpy(bytes.get(), data.data(), data.size() * sizeof(float));
  } else {
    memory src(plain_md, Engine(), data.data());
    memory dst(want, Engine(), bytes.get());
    dnnl::stream stream(Engine());
    dnnl::reorder(src, dst).execute(stream, src, dst);
    stream.wait();
    primitives_->fetch_add(1, std::memory_order_relaxed);
  }
  plan_->weights.push_back(bytes);
  Slot s{want, Slot::Kind::kConst};
  s.ptr = bytes.get();
  return AddSlot(s);
}

}  // namespace kiln::onednn::internal
