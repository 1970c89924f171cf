// Shared pieces of the nn lowerings (nn*.cc): loop nests, sliding-window attributes, and the
// tiled GEMM loop builder that MatMul, Gemm and Conv run on. Internal to //compiler/lower:nn.
#ifndef KILN_COMPILER_LOWER_NN_INTERNAL_H_
#define KILN_COMPILER_LOWER_NN_INTERNAL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "compiler/lower/loops.h"
#include "compiler/lower/lower.h"
#include "compiler/ops/attributes.h"
#include "jit/compute.h"
#include "jit/kernel_ir.h"

namespace kiln::compiler::nn {

using jit::Buffer;
using jit::Expr;
using jit::ForKind;
using jit::Stmt;
using jit::Var;

/// Accumulator dtype: f32 for f16/bf16, else the dtype itself.
DType AccType(DType t);
/// The lowest value of `t` (-inf for floats): the identity of max.
Expr Lowest(DType t);
/// 0 <= p < n.
Expr InBounds(const Expr& p, const Expr& n);
/// p clamped into [0, n - 1] (n >= 1).
Expr Clamp(const Expr& p, const Expr& n);
/// ceil(a / b) for b > 0.
Expr CeilDivE(const Expr& a, const Expr& b);
/// The integer i64 constant v.
inline Expr I(int64_t v) { return jit::IntImm(v); }

/// A window parsed once (ConvAttributes / PoolAttributes, compiler/ops/attributes.h) with its
/// pads resolved for auto_pad, as run-time expressions when the input dims are symbolic.
struct WindowAttrs : WindowAttributes {
  std::vector<Expr> pad_begin;  // per spatial dim
  std::vector<Expr> pad_end;    // per spatial dim (AveragePool's count_include_pad)
};
/// The pads of `w` for Conv and pooling: explicit for NOTSET, 0 for VALID; for SAME_* they follow
/// from input dim `in_dims[d]` and output dim `out_dims[d]`: total = max(0, (out - 1) * stride +
/// extent - in), split as attributes.h says.
WindowAttrs ResolvePads(const WindowAttributes& w, const std::vector<Expr>& in_dims,
                        const std::vector<Expr>& out_dims);

// ---- Tiled GEMM ----------------------------------------------------------------------------

/// Where a pack statement writes: pack[kk][jj] = B(b, k0 + kk, j0 + jj) for kk < klen and
/// jj < cols, 0 for columns j0 + jj >= n (the compute always runs whole tiles).
struct PackArgs {
  Expr b, k0, klen, j0;
  Buffer pack;  // local [kc][cols] of the accumulator dtype
  int64_t cols;
};

/// C(b, i, j) = store(sum_k A(b, i, k) * B(b, k, j)) for b < batch, i < m, j < n.
/// Parallel over (batch, column panels, groups of row tiles); per task the K dim runs in chunks:
/// each chunk packs a kc x cols panel of B once and streams it through every row tile of the
/// group, accumulating a rows x cols register tile (the approach of jit/compute_matmul.cc).
/// Edge tiles compute whole (rows of A clamped, packed columns zero) and store only valid parts.
struct GemmSpec {
  DType acc = DType::kF32;
  Expr batch, m, n, k;
  int64_t rows = 6, cols = 64;
  /// A(b, i, k), i in [0, m) and k in [0, k).
  std::function<Expr(const Expr& b, const Expr& i, const Expr& k)> a;
  std::function<Stmt(const PackArgs&)> pack;
  /// Instead of `pack`: B already packed (PackedMatMul's weights), element jj of column panel
  /// `panel` at row k, with panels exactly `cols` wide. The tiles read it in place.
  std::function<Expr(const Expr& panel, const Expr& k, const Expr& jj)> packed_b;
  /// Stores the accumulated value (acc dtype) for (b, i, j).
  std::function<Stmt(const Expr& b, const Expr& i, const Expr& j, const Expr& value)> store;
  /// Optional: wraps each task's body once its batch index `b` is bound (Lets of per-batch
  /// offsets the callbacks above refer to, so they are computed once per task).
  std::function<Stmt(const Expr& b, Stmt body)> bind_batch;
};
Stmt GemmLoops(const GemmSpec& spec);
/// A pack from an element function B(b, k, j) (j < n guaranteed); `k_contiguous` picks the loop
/// order that streams B contiguously (true for a transposed B).
std::function<Stmt(const PackArgs&)> PackFrom(
    std::function<Expr(const Expr& b, const Expr& k, const Expr& j)> element, Expr n,
    bool k_contiguous, DType acc);
/// Tile shape for an accumulator dtype and (when constant) m and n: 6 rows by two vectors of
/// the compiling host's width (16 f32 columns with AVX2, 12 accumulator registers of 16) or four
/// with AVX-512 (64 columns, 24 of 32). A kernel runs correctly on any host, fastest on one
/// like the compiler's.
void ChooseTile(GemmSpec& spec, std::optional<int64_t> m, std::optional<int64_t> n);

/// The constant value of a dim expression, if any.
std::optional<int64_t> ConstOf(const Expr& e);

// ---- Lowerings (one function per op; registered in nn.cc) ----------------------------------
Status LowerMatMul(LowerContext& ctx);
Status LowerGemm(LowerContext& ctx);
Status LowerPackedMatMul(LowerContext& ctx);
Status LowerRecurrentSequence(LowerContext& ctx);  // nn_recurrent.cc
Status LowerEinsum(LowerContext& ctx);
Status LowerConv(LowerContext& ctx);
Status LowerConvTranspose(LowerContext& ctx);
/// ConvTranspose as a GEMM per output phase (nn_conv_transpose.cc), `win` with its pads resolved
/// (pad_begin) for the node's output size. `upsample`: the caller found kernel = stride,
/// dilation 1 and no pads, output padding or output shape in every dim, so every output is
/// one input times one tap (output size stride x input size).
Status LowerConvTransposeGemm(LowerContext& ctx, const WindowAttrs& win, int64_t group,
                              bool upsample);
Status LowerMaxPool(LowerContext& ctx);
Status LowerAveragePool(LowerContext& ctx);
Status LowerLpPool(LowerContext& ctx);
Status LowerGlobalPool(LowerContext& ctx);
Status LowerBatchNorm(LowerContext& ctx);
Status LowerInstanceNorm(LowerContext& ctx);
Status LowerLayerNorm(LowerContext& ctx);
Status LowerMeanVarianceNorm(LowerContext& ctx);
Status LowerLpNorm(LowerContext& ctx);
Status LowerLrn(LowerContext& ctx);
Status LowerDepthToSpace(LowerContext& ctx);
Status LowerSpaceToDepth(LowerContext& ctx);
Status LowerResize(LowerContext& ctx);
Status ResizeShape(ShapeFuncContext& ctx);
Status LowerUpsample(LowerContext& ctx);
Status LowerCol2Im(LowerContext& ctx);  // nn_resize.cc
Status Col2ImShape(ShapeFuncContext& ctx);
Status UpsampleShape(ShapeFuncContext& ctx);
Status LowerMaxUnpool(LowerContext& ctx);  // nn_sample.cc
Status MaxUnpoolShape(ShapeFuncContext& ctx);
Status LowerDet(LowerContext& ctx);
Status LowerGridSample(LowerContext& ctx);
Status LowerRoiAlign(LowerContext& ctx);

}  // namespace kiln::compiler::nn

#endif  // KILN_COMPILER_LOWER_NN_INTERNAL_H_
