// The oneDNN region blob: what the codegen (compile side) hands the runtime (run side) for one
// region — tensors, constants, and a list of ops with their attributes and fused post-ops.
#ifndef KILN_EXTERNAL_ONEDNN_REGION_H_
#define KILN_EXTERNAL_ONEDNN_REGION_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/dtype.h"
#include "base/status.h"

namespace kiln::onednn {

/// The vendor name both sides use: the compile side registers its ExternalCompiler under it,
/// regions carry it (ExternalRegionSpec::vendor), the run side registers its runtime under it.
inline constexpr const char* kVendorName = "onednn";

// Binary layout (little-endian), version kRegionMajor.kRegionMinor:
//   u32 magic 'KDNR' | u16 major | u16 minor
//   u32 n, n x {u8 dtype, u8 rank}                         tensors (ids are positions)
//   u32 n, n x {i32 tensor, u32 rank, rank x i64 dim}      region inputs (dim -1 = symbolic)
//   u32 n, n x i32 tensor                                  region outputs
//   u32 n, n x {i32 tensor, u32 rank, rank x i64 dim}      constants (index = position)
//   u32 n, n x op (see EncodeRegion)                        ops, in execution order
//   (1.5) tuning (RegionTuning; an empty one is 2 bytes and two zero counts):
//   u8 probed, i32 f4_from                                  the F(4x4) limit, if probed
//   u32 n, n x {u32 threads, u32 k, k x {u32 rank, rank x i64 dim},
//               u32 m, m x {i32 op, u8 tile}}               timed Conv tiles per shape
//   u32 n, n x {i32 op, i64 bucket, u8 choice}              MatMul weight layouts
// A runtime decodes a blob of the same major and a minor at or below its own. Decoding checks
// every count against the bytes left, so no input allocates more than the blob's size.

inline constexpr uint32_t kRegionMagic = 0x524E444B;  // "KDNR" read as little-endian u32
inline constexpr uint16_t kRegionMajor = 1;
// 1.1: kFlatten; 1.2: kQConv, kQMatMul, int8 tensors; 1.3: kChannels; 1.4: kResize;
// 1.5: tuning records (RegionTuning); 1.6: kDepthToSpace.
inline constexpr uint16_t kRegionMinor = 6;

enum class OpKind : uint8_t {
  kConv = 0,       // [x, w, (bias)] ONNX Conv: w is [O, I/group, k...]
  kMatMul = 1,     // [a, b, (bias)] dst = alpha * (op(a) . op(b) + bias) (MatMul and Gemm)
  kPool = 2,       // [x] max / average, windowed or global
  kEltwise = 3,    // [x]
  kSoftmax = 4,    // [x] along `axis` (log_softmax for LogSoftmax)
  kLayerNorm = 5,  // [x, scale, (bias)] over dims [axis, rank)
  kBinary = 6,     // [a, b] numpy broadcasting (one operand has the output's shape)
  kConcat = 7,     // [x...] along `axis`
  kBatchNorm = 8,  // [x, scale, bias, mean, var] inference, channel dim 1
  kFlatten = 9,    // [x] row-major view as [prod(dims[0, axis)), prod(dims[axis, rank))]
  // Integer ops (the QDQ form's DequantizeLinear -> Conv / MatMul / Gemm -> QuantizeLinear):
  // x u8, w s8 constant (per-output-channel scales folded into out_scales), zero_points s32 [2]
  // = {x zero point, y zero point}, bias s32 [O] in accumulator units, y u8:
  //   y = saturate(round_half_even(out_scales[o] * post_ops(sum((x - zx) * w) + bias[o])) + zy)
  // (eltwise post-ops only: Relu commutes with the positive scale).
  kQConv = 10,    // [x, w, out_scales, zero_points, (bias)] Conv's window attributes
  kQMatMul = 11,  // [a, b, out_scales, zero_points, (bias)] b a constant matrix, trans_b
  // [x...] (1-16) rank 3-5, a copy of some channels (dim 1) of x, the concatenation of the
  // inputs along dim 1: y[:, c] = x[:, p(pads[0] + c)] for c < pads[1], where p is
  // ShuffleNet's channel shuffle of `group` groups over x's C channels,
  // p(i * group + j) = j * (C / group) + i (Reshape [N, g, C/g, ...], Transpose, Reshape);
  // group 1 is the identity, so a channel Slice. pads = {start, count}; C % group == 0 and
  // start + count <= C are checked when shapes are known.
  kChannels = 12,
  // [x] rank 3-5, nearest-neighbour upsampling by whole factors, `strides` (one per spatial
  // dim, >= 1): y[n, c, o...] = x[n, c, o / s...] (each pixel repeated s times per dim), the
  // ONNX Resize / Upsample modes that equal it exactly (compile/support.h, UpsampleFactors).
  kResize = 13,
  // [x] rank 4, ONNX DepthToSpace: strides = {blocksize s}, axis 0 (DCR) or 1 (CRD):
  // y[n, c, h s + i, w s + j] = x[n, (i s + j) C + c, h, w] (DCR) or x[n, c s s + i s + j, h, w]
  // (CRD), for x [N, C s s, H, W]. A ConvTranspose as phase convolutions ends in one (DCR).
  kDepthToSpace = 14,
};
inline constexpr int kNumOpKinds = 15;
/// The largest factor of a kResize op (ValidateRegion's bound; the codegen claims no larger).
inline constexpr int64_t kMaxUpsampleFactor = 1024;
/// The most inputs a kChannels op takes (the run side keeps their pointers on the stack).
inline constexpr int kMaxChannelInputs = 16;
const char* OpKindName(OpKind k);

enum class EltwiseAlg : uint8_t {
  kRelu = 0,  // alpha = negative slope (LeakyRelu)
  kSigmoid,
  kTanh,
  kGeluErf,
  kGeluTanh,
  kClip,  // alpha = min, beta = max
  kHardSwish,
  kElu,  // alpha
  kExp,
  kLog,
  kAbs,
  kSqrt,
  kSoftplus,
  kLinear,  // alpha * x + beta
  kSwish,   // x * sigmoid(alpha * x)
  kRound,
  kSquare,
};
inline constexpr int kNumEltwiseAlgs = 17;
const char* EltwiseAlgName(EltwiseAlg a);

enum class BinaryAlg : uint8_t { kAdd = 0, kSub, kMul, kDiv, kMax, kMin };
inline constexpr int kNumBinaryAlgs = 6;

enum class PoolAlg : uint8_t { kMax = 0, kAvgIncludePad, kAvgExcludePad };
inline constexpr int kNumPoolAlgs = 3;

enum class AutoPad : uint8_t { kNotSet = 0, kSameUpper, kSameLower, kValid };
inline constexpr int kNumAutoPads = 4;

enum class PostOpKind : uint8_t {
  kEltwise = 0,  // dst = eltwise(dst)
  kSum,          // dst = dst + tensor (the residual; same shape as dst)
  kBinary,       // dst = binary(dst, tensor) (tensor broadcasts into dst)
};
inline constexpr int kNumPostOpKinds = 3;

struct PostOp {
  PostOpKind kind = PostOpKind::kEltwise;
  EltwiseAlg eltwise = EltwiseAlg::kRelu;
  BinaryAlg binary = BinaryAlg::kAdd;
  float alpha = 0.0f, beta = 0.0f;
  int32_t tensor = -1;  // kSum, kBinary
};

/// One op. Fields not used by an op's kind keep their defaults (and are encoded anyway).
struct Op {
  OpKind kind = OpKind::kEltwise;
  std::vector<int32_t> inputs;  // tensor ids
  int32_t output = -1;
  // Windows (Conv, Pool): ONNX semantics; `pads` are all begins then all ends.
  std::vector<int64_t> kernel, strides, dilations, pads;
  AutoPad auto_pad = AutoPad::kNotSet;
  bool ceil_mode = false;
  bool global = false;  // GlobalAveragePool / GlobalMaxPool
  int64_t group = 1;
  PoolAlg pool = PoolAlg::kMax;
  EltwiseAlg eltwise = EltwiseAlg::kRelu;
  BinaryAlg binary = BinaryAlg::kAdd;
  float alpha = 1.0f, beta = 0.0f;        // eltwise parameters; MatMul: alpha is the output scale
  int64_t axis = 0;                       // Softmax, LayerNorm, Concat, Flatten (>= 0)
  float epsilon = 1e-5f;                  // LayerNorm, BatchNorm
  bool trans_a = false, trans_b = false;  // MatMul: the last two dims are swapped
  bool log_softmax = false;
  std::vector<PostOp> post_ops;  // Conv and MatMul only
};

struct TensorInfo {
  DType dtype = DType::kF32;
  int rank = 0;
};

/// A tensor with dims known at compile time (-1 for a symbolic dim; constants have none).
struct BoundTensor {
  int32_t tensor = -1;
  std::vector<int64_t> dims;
};

/// The F(2x2) / F(4x4) / oneDNN choice the timed trial made for one Conv (0: oneDNN's
/// convolution, 2 / 4: kiln's Winograd F(m x m)).
struct TunedTile {
  int32_t op = -1;
  uint8_t tile = 0;
};

/// The timed choices of one plan: input dims (all known) and the OpenMP team size they were
/// measured with (a tile's speed depends on both).
struct TunedShape {
  int32_t threads = 1;
  std::vector<std::vector<int64_t>> inputs;
  std::vector<TunedTile> tiles;
};

/// A MatMul's measured weight layout (OneDnnOptions::kMeasured) for one bucket of M and team
/// size (the run side's key), 0 row-major or 1 transposed.
struct TunedLayout {
  int32_t op = -1;
  int64_t bucket = 0;
  uint8_t choice = 0;
};

/// (1.5) What the run side measures when it builds a plan, measured once by `kiln compile
/// --tune` and recorded so a load builds its plans without measuring. `f4_from` (when
/// `probed`) is the Winograd accuracy probe's answer: ops before it never run F(4x4). It is a
/// property of the weights and the depth, not the shape, so it holds for every shape. Tiles
/// are per shape and team size; layouts per M bucket and team size. Empty: nothing recorded
/// (every blob before 1.5), the run side measures as it always did.
struct RegionTuning {
  bool probed = false;
  int32_t f4_from = 0;
  std::vector<TunedShape> shapes;
  std::vector<TunedLayout> layouts;
  bool empty() const { return !probed && shapes.empty() && layouts.empty(); }
};

/// What one region blob holds, decoded: tensors, boundary, constants and ops. The codegen builds
/// it and encodes it; the runtime decodes it and builds plans from it. (Not the partitioner's
/// compiler::PartitionedRegion, which is a set of graph nodes.)
struct RegionProgram {
  std::vector<TensorInfo> tensors;
  std::vector<BoundTensor> inputs;     // region input i is tensor inputs[i].tensor
  std::vector<int32_t> outputs;        // region output i
  std::vector<BoundTensor> constants;  // constant i is ExternalRegionSpec::constants[i]
  std::vector<Op> ops;                 // in execution order
  RegionTuning tuning;                 // (1.5) measurements recorded at compile time
};

/// The blob for `region` (does not validate; the codegen validates before encoding).
std::vector<uint8_t> EncodeRegion(const RegionProgram& region);

/// Decodes and validates a blob. Never crashes or over-allocates on any bytes. InvalidFormat
/// ("region blob: ...") for a bad magic, truncation, out-of-range enum or count, trailing bytes
/// or a structure ValidateRegion rejects; Unsupported naming both versions for another major
/// or a newer minor.
StatusOr<RegionProgram> DecodeRegion(const uint8_t* data, size_t size);

/// Structural checks the runtime relies on: every tensor id in range and defined exactly once
/// (as an input, a constant or one op's output) before it is used; outputs distinct and defined
/// by ops; per-op input counts, ranks, attribute list lengths and values (strides, dilations,
/// kernel > 0, pads >= 0, axis < rank, group >= 1); post-op tensors defined before their op.
/// InvalidFormat naming the op ("ops[3] (Conv): ..."). Tuning records must name ops of their
/// kind (a tile a Conv, a layout a MatMul), once per record, with known values (tile 0, 2, 4;
/// choice 0, 1; f4_from <= the op count; threads >= 1), and a shape must match the region's
/// inputs (count, ranks, static dims, no symbolic dim): InvalidFormat naming the record and
/// field ("tuning.shapes[0].tiles[3]: ops[7] is Relu, not a Conv").
Status ValidateRegion(const RegionProgram& region);

/// A decoded blob as text for `kiln inspect`, one newline-terminated line each: the inputs and
/// constants with their dims ("in0 [?, 256]", "const1 [256, 768]"), then every op with its
/// operands, result and attributes, post-ops included:
///   "[1] MatMul (t3, const2, const3) -> t4  trans_b; post-ops: gelu_erf"
/// then one line per tuning record ("tuned at [1, 3, 224, 224], 2 threads: 16 Conv tiles
/// (F4 5, F2 3, oneDNN 8)"). Region outputs are named out0, out1, ...; other op results t<id>. DecodeRegion's errors.
StatusOr<std::string> DescribeRegion(const uint8_t* data, size_t size);

}  // namespace kiln::onednn

#endif  // KILN_EXTERNAL_ONEDNN_REGION_H_
