// How many threads a region op's steps use: small work runs on the calling thread alone, so a
// small model does not fork an OpenMP team per primitive and wait for a worker the OS has
// descheduled.
//
// The threshold (kSerialWork, plan_builder.h) is measured, on an AMD EPYC (Zen 3 class, AVX2,
// 2 cores), by every step of mobilenet_v3_small at one and at two threads (`kiln profile
// --threads 1|2 --iters 100`, real-time priority so other processes count little): below 2^20
// of this work two threads never paid on the whole (speed-up 0.4-1.1; a broadcast binary on
// 1x240x14x14 took 11.5 us alone, 30 us at two), from 2^20 to 2^21 they paid 0.74-1.41x (about
// 1.1 on average), only beyond 2^21 (about 50 us at one thread) 1.2-2x. Under load the fork is
// what costs: with the other processes at load 12-15, a 1x1 convolution of 64 channels at 25x5
// (5e5 multiply-adds, 20 us alone) took 0.5-1.3 ms at two threads, waiting for its worker,
// and kws_dscnn's plan of such steps 12-14 ms per run, against 0.13 ms all on one thread.
// Below 2^21 a step therefore runs on one thread: nothing is lost on a quiet host, and a
// loaded one waits only for the steps that have real work to share.
//
// Except where its input was written by the team (kSpreadElements): those figures time a
// step in a plan all on one thread against one all on two, but a step held to one thread in
// a two-thread plan reads what the step before it wrote on both cores, half from the other
// core's cache, and its worker may sleep meanwhile (GOMP_SPINCOUNT, ~75 us). In
// efficientnet_b0 at two threads (`kiln profile --threads 2 --iters 50`, 3 runs each, medians)
// the squeeze-excite steps after a team's depthwise convolution took, serial / on the team:
// the global pool of 480x14x14 36 / 19 us (26 at one thread in a one-thread plan), the
// broadcast multiply of 480x14x14 67-72 / 26-28 us (23 alone), of 1152x7x7 65 / 46, of
// 144x28x28 78 / 47; the pool of 672x7x7 (32,928 values) 25 / 17, of 240x14x14 20 / 15;
// a 3x3 depthwise convolution of 1152x7x7 127 / 70. The 1x1 convolutions between them, of
// 4-1152 values, lost 3-10 us each on the team. A step whose input the team wrote with at
// least 2^15 values (128 KiB of f32) therefore keeps the team; its small neighbours do not.
#include <algorithm>

#include "external/onednn/run/plan_builder.h"

namespace kiln::onednn::internal {
namespace {

// Work is counted in multiply-adds; an element an op reads or writes counts as
// kElementWork of them (oneDNN's f32 convolutions and GEMMs on small shapes run ~8-16
// multiply-adds per ns on one Zen 3 core, eltwise / binary / pool / reorders ~1-2 elements per
// ns).
constexpr int64_t kElementWork = 8;

int64_t Saturate(double v) { return v >= 4e18 ? int64_t{4} << 60 : static_cast<int64_t>(v); }

double Elements(const Dims& d) {
  double p = 1;
  for (int64_t x : d) p *= static_cast<double>(std::max<int64_t>(x, 0));
  return p;
}

// Multiply-adds of a convolution (X dims `xd`, W dims `wd`): every output reads its window
// over in_channels / group. Unknown (an error the build reports) counts as big.
double ConvMacs(const Op& op, const Dims& xd, const Dims& wd) {
  Dims out;
  if (xd.size() < 3 || wd.size() != xd.size()) return 1e30;
  StatusOr<Window> win = ConvWindow(op, xd, wd, nullptr, &out);
  if (!win.ok()) return 1e30;
  return Elements(out) * Elements(Sub(wd, 1, wd.size()));
}

// Multiply-adds of a (batched, broadcasting) product A x B: the larger of A's elements times
// B's columns and B's elements times A's rows (whichever operand carries the batch).
double MatMulMacs(const Op& op, const Dims& ad, const Dims& bd) {
  if (ad.empty() || bd.empty()) return 1e30;
  const bool a_vector = ad.size() == 1, b_vector = bd.size() == 1;
  const int64_t rows = a_vector ? 1 : op.trans_a ? ad.back() : ad[ad.size() - 2];
  const int64_t cols = b_vector ? 1 : op.trans_b ? bd[bd.size() - 2] : bd.back();
  return std::max(Elements(ad) * static_cast<double>(cols),
                  Elements(bd) * static_cast<double>(rows));
}

}  // namespace

int64_t OpWork(const Op& op, const std::vector<Dims>& dims) {
  auto in = [&](size_t i) -> const Dims& { return dims[op.inputs[i]]; };
  double elements = 0, largest = 0;
  for (int32_t t : op.inputs) {
    elements += Elements(dims[t]);
    largest = std::max(largest, Elements(dims[t]));
  }
  double macs = 0, out = largest;  // the output: the largest input's size unless known
  switch (op.kind) {
    case OpKind::kConv:
    case OpKind::kQConv:
      if (op.inputs.size() < 2) return Saturate(1e30);
      macs = ConvMacs(op, in(0), in(1));
      out = in(1).empty() ? 0 : macs / std::max(1.0, Elements(Sub(in(1), 1, in(1).size())));
      break;
    case OpKind::kMatMul:
    case OpKind::kQMatMul: {
      if (op.inputs.size() < 2) return Saturate(1e30);
      macs = MatMulMacs(op, in(0), in(1));
      const Dims& ad = in(0);
      const int64_t k = ad.empty() ? 1 : op.trans_a && ad.size() > 1 ? ad[ad.size() - 2] : ad.back();
      out = macs / static_cast<double>(std::max<int64_t>(k, 1));
      break;
    }
    case OpKind::kPool:
      // Each output reads its window: kernel / strides reads per input element (1 for a
      // global pool, whose kernel is the image).
      if (!op.inputs.empty() && !op.global) {
        double taps = 1, steps = 1;
        for (int64_t k : op.kernel) taps *= static_cast<double>(std::max<int64_t>(k, 1));
        for (int64_t s : op.strides) steps *= static_cast<double>(std::max<int64_t>(s, 1));
        elements += Elements(in(0)) * std::max(1.0, taps / steps);
      }
      break;
    case OpKind::kResize:  // the output: the input times every spatial factor
      for (int64_t f : op.strides) out *= static_cast<double>(std::max<int64_t>(f, 1));
      break;
    default:
      break;
  }
  // The output, and each post-op's operand (read or written once more per output).
  elements += out * static_cast<double>(1 + op.post_ops.size());
  return Saturate(macs + elements * kElementWork);
}

int StepThreads(int64_t work, int64_t spread, int threads) {
  return threads > 1 && work < kSerialWork && spread < kSpreadElements ? 1 : threads;
}

}  // namespace kiln::onednn::internal
