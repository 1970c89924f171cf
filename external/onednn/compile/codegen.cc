// The oneDNN codegen's Generator: a region of graph nodes -> the region blob the run side
// executes, with BatchNormalization folding and post-op fusion (see codegen.h). Which nodes
// oneDNN runs, and the helpers and matchers shared with it, are in support.{h,cc}.
#include "external/onednn/compile/codegen.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "compiler/ops/attributes.h"
#include "compiler/passes/partition.h"
#include "external/onednn/compile/support.h"
#include "external/onednn/region.h"

namespace kiln::onednn {
namespace internal {
namespace {

using compiler::TensorDataRef;

class Generator {
 public:
  Generator(const Graph& g, const std::vector<NodeId>& nodes, const std::vector<ValueId>& inputs,
            const std::vector<ValueId>& outputs)
      : g_(g),
        inputs_(inputs),
        outputs_(outputs.begin(), outputs.end()),
        output_list_(outputs) {
    in_region_.insert(nodes.begin(), nodes.end());
  }

  StatusOr<compiler::ExternalCode> Run() {
    ASSIGN_OR_RETURN(std::vector<NodeId> topo, g_.TopologicalOrder());
    for (NodeId n : topo) {
      if (in_region_.count(n)) order_.push_back(n);
    }
    if (order_.size() != in_region_.size())
      return InvalidArgument("oneDNN codegen: a region node is not in the graph");
    for (ValueId v : inputs_) {
      // u8 inputs feed int8 operations (the codegen checks each use).
      bool u8 = g_.value(v).dtype == DType::kU8 && ShapeOf(g_, v) && RankOf(g_, v) <= 8;
      if (!IsF32(g_, v) && !u8)
        return InvalidArgument("oneDNN codegen: input '" + g_.value(v).name +
                               "' is not f32 or u8 of known rank");
      BoundTensor b{NewTensor(RankOf(g_, v), g_.value(v).dtype), {}};
      for (const DimExpr& d : *ShapeOf(g_, v))
        b.dims.push_back(d.is_const() ? d.const_value() : -1);
      tensor_of_[v] = b.tensor;
      region_.inputs.push_back(std::move(b));
    }
    FindInt8s();
    FindGelus();
    FindLayerNorms();
    FindShuffles();
    for (NodeId n : order_) {
      if (consumed_.count(n) || int8_member_.count(n)) continue;
      if (auto q = int8_root_.find(n); q != int8_root_.end()) {
        Status s = EmitInt8(int8s_[q->second]);
        if (!s.ok()) return s.WithContext("oneDNN codegen: " + g_.DescribeNode(n));
        continue;
      }
      if (auto ln = ln_root_.find(n); ln != ln_root_.end()) {
        Status s = EmitLayerNorm(lns_[ln->second]);
        if (!s.ok()) return s.WithContext("oneDNN codegen: " + g_.DescribeNode(n));
        continue;
      }
      if (ln_member_.count(n)) continue;  // emitted with its root
      if (auto sh = shuffle_root_.find(n); sh != shuffle_root_.end()) {
        Status s = EmitShuffle(shuffles_[sh->second]);
        if (!s.ok()) return s.WithContext("oneDNN codegen: " + g_.DescribeNode(n));
        continue;
      }
      if (shuffle_member_.count(n)) continue;  // emitted with its root
      auto gelu = gelu_last_.find(n);
      if (gelu_member_.count(n) && gelu == gelu_last_.end()) continue;  // emitted with its last
      Status s = gelu != gelu_last_.end() ? EmitGelu(gelus_[gelu->second])
                 : SwishMul(n)                ? EmitSwish(n, *SwishMul(n))
                                              : EmitNode(n);
      if (!s.ok()) return s.WithContext("oneDNN codegen: " + g_.DescribeNode(n));
    }
    for (ValueId v : output_list_) {
      auto it = tensor_of_.find(v);
      if (it == tensor_of_.end() || !produced_.count(it->second))
        return InvalidArgument("oneDNN codegen: output '" + g_.value(v).name +
                               "' is not produced by the region");
      region_.outputs.push_back(it->second);
    }
    Status valid = ValidateRegion(region_);
    if (!valid.ok())
      return Internal("oneDNN codegen produced an invalid region: " + valid.message());
    code_.blob = EncodeRegion(region_);
    return std::move(code_);
  }

 private:
  // ---- Tensors ----

  int32_t NewTensor(int rank, DType dtype = DType::kF32) {
    region_.tensors.push_back({dtype, rank});
    return static_cast<int32_t>(region_.tensors.size()) - 1;
  }
  int32_t AddConstant(ValueId value, TensorDataRef data) {
    const TensorData& d = value != kNoValue ? *Data(g_, value) : *data;
    int32_t t = NewTensor(static_cast<int>(d.dims().size()), d.dtype());
    region_.constants.push_back({t, d.dims()});
    code_.constants.push_back({value, value != kNoValue ? nullptr : std::move(data)});
    return t;
  }
  // The region tensor of a value read by a node: an input, an earlier result, or a constant.
  StatusOr<int32_t> Use(ValueId v) {
    auto it = tensor_of_.find(v);
    if (it != tensor_of_.end()) return it->second;
    const TensorData* d = Data(g_, v);
    if (!d || (g_.value(v).producer != compiler::kNoNode && in_region_.count(g_.value(v).producer)))
      return InvalidArgument("value '" + g_.value(v).name +
                             "' is neither a region input nor a constant");
    if (d->dtype() != DType::kF32)
      return InvalidArgument("constant '" + g_.value(v).name + "' is not f32");
    int32_t t = AddConstant(v, nullptr);
    tensor_of_[v] = t;
    return t;
  }
  // A value that can be read now (for post-ops: it must exist before the anchor op runs).
  bool Available(ValueId v) const {
    if (tensor_of_.count(v)) return true;
    return Data(g_, v) &&
           !(g_.value(v).producer != compiler::kNoNode && in_region_.count(g_.value(v).producer));
  }
  int32_t Define(ValueId v) {
    int32_t t = NewTensor(RankOf(g_, v), g_.value(v).dtype);
    tensor_of_[v] = t;
    produced_.insert(t);
    return t;
  }
  Status Emit(Op op, ValueId out) {
    op.output = Define(out);
    region_.ops.push_back(std::move(op));
    return Status::Ok();
  }
  Status Inputs(Op* op, const Node& n, size_t count) {
    for (size_t i = 0; i < count; ++i) {
      if (In(n, i) == kNoValue) continue;
      ASSIGN_OR_RETURN(int32_t t, Use(In(n, i)));
      op->inputs.push_back(t);
    }
    return Status::Ok();
  }

  // The single region user of `v` that may be fused (v is not read outside the op).
  std::optional<NodeId> SoleUser(ValueId v) const {
    if (outputs_.count(v)) return std::nullopt;
    std::optional<NodeId> only;
    for (NodeId r : g_.Users(v)) {
      if (only) return std::nullopt;
      only = r;
    }
    if (!only) return std::nullopt;
    NodeId u = *only;
    if (!in_region_.count(u) || consumed_.count(u) || gelu_member_.count(u) ||
        ln_member_.count(u) || int8_member_.count(u) || int8_root_.count(u) ||
        shuffle_member_.count(u))
      return std::nullopt;
    return u;
  }

  // ---- Nodes ----

  Status EmitNode(NodeId id) {
    const Node& n = g_.node(id);
    if (!IsSupported(g_, id)) return InvalidArgument("not supported by oneDNN");
    const std::string& t = n.op_type;
    Op op;
    if (t == "Conv") return EmitConv(id);
    if (t == "MatMul" || t == "Gemm") return EmitMatMul(id);
    if (t == "MaxPool" || t == "AveragePool" || t == "GlobalAveragePool" || t == "GlobalMaxPool") {
      RETURN_IF_ERROR(SetPool(&op, n));
      RETURN_IF_ERROR(Inputs(&op, n, 1));
      return Emit(std::move(op), n.outputs[0]);
    }
    int rank = RankOf(g_, n.inputs[0]);
    if (t == "Softmax" || t == "LogSoftmax") {
      op.kind = OpKind::kSoftmax;
      op.log_softmax = t == "LogSoftmax";
      op.axis = NormalizeAxis(GetInt(n, "axis", g_.OpsetFor("") >= 13 ? -1 : 1), rank);
      RETURN_IF_ERROR(Inputs(&op, n, 1));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "LayerNormalization") {
      op.kind = OpKind::kLayerNorm;
      op.axis = NormalizeAxis(GetInt(n, "axis", -1), rank);
      op.epsilon = GetFloat(n, "epsilon", 1e-5f);
      RETURN_IF_ERROR(Inputs(&op, n, 3));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "Flatten") {  // a view: no oneDNN primitive, no copy inside the region
      op.kind = OpKind::kFlatten;
      op.axis = NormalizeAxis(GetInt(n, "axis", 1), rank);
      RETURN_IF_ERROR(Inputs(&op, n, 1));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "Concat") {
      op.kind = OpKind::kConcat;
      op.axis = NormalizeAxis(GetInt(n, "axis", 0), rank);
      RETURN_IF_ERROR(Inputs(&op, n, n.inputs.size()));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "BatchNormalization") {
      op.kind = OpKind::kBatchNorm;
      op.epsilon = GetFloat(n, "epsilon", 1e-5f);
      RETURN_IF_ERROR(Inputs(&op, n, 5));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "HardSigmoid") return EmitHardSigmoid(n);
    if (t == "Slice") {  // a channel copy: group 1, channels [start, start + count)
      std::pair<int64_t, int64_t> range = *ChannelSlice(g_, n);
      op.kind = OpKind::kChannels;
      op.pads = {range.first, range.second};
      RETURN_IF_ERROR(Inputs(&op, n, 1));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "Split") {  // one channel copy per output
      std::vector<std::pair<int64_t, int64_t>> ranges = *ChannelSplit(g_, n);
      ASSIGN_OR_RETURN(int32_t x, Use(n.inputs[0]));
      for (size_t i = 0; i < ranges.size(); ++i) {
        if (n.outputs[i] == kNoValue) continue;
        Op part;
        part.kind = OpKind::kChannels;
        part.pads = {ranges[i].first, ranges[i].second};
        part.inputs = {x};
        RETURN_IF_ERROR(Emit(std::move(part), n.outputs[i]));
      }
      return Status::Ok();
    }
    if (t == "Resize" || t == "Upsample") {  // nearest by whole factors; reads x only
      op.kind = OpKind::kResize;
      op.strides = *UpsampleFactors(g_, n);
      RETURN_IF_ERROR(Inputs(&op, n, 1));
      return Emit(std::move(op), n.outputs[0]);
    }
    if (t == "DepthToSpace") {
      op.kind = OpKind::kDepthToSpace;
      op.strides = {GetInt(n, "blocksize", 1)};
      op.axis = GetString(n, "mode", "DCR") == "CRD" ? 1 : 0;
      RETURN_IF_ERROR(Inputs(&op, n, 1));
      return Emit(std::move(op), n.outputs[0]);
    }
    std::optional<EltwiseSpec> e = EltwiseOf(g_, n);
    if (!e) {
      op.kind = OpKind::kBinary;
      op.binary = *BinaryOf(t);
      RETURN_IF_ERROR(Inputs(&op, n, 2));
      return Emit(std::move(op), n.outputs[0]);
    }
    op.kind = OpKind::kEltwise;
    op.eltwise = e->alg;
    op.alpha = e->alpha;
    op.beta = e->beta;
    ASSIGN_OR_RETURN(int32_t t_in, Use(DataInput(g_, n)));
    op.inputs.push_back(t_in);
    return Emit(std::move(op), n.outputs[0]);
  }

  // HardSigmoid max(0, min(1, alpha * x + beta)) as two eltwise ops through a tensor of its own.
  Status EmitHardSigmoid(const Node& n) {
    std::vector<PostOp> parts = HardSigmoidParts(n);
    Op linear;
    linear.kind = OpKind::kEltwise;
    linear.eltwise = parts[0].eltwise;
    linear.alpha = parts[0].alpha;
    linear.beta = parts[0].beta;
    ASSIGN_OR_RETURN(int32_t x, Use(n.inputs[0]));
    linear.inputs.push_back(x);
    linear.output = NewTensor(RankOf(g_, n.inputs[0]));
    Op clip = linear;
    clip.eltwise = parts[1].eltwise;
    clip.alpha = parts[1].alpha;
    clip.beta = parts[1].beta;
    clip.inputs = {linear.output};
    region_.ops.push_back(std::move(linear));
    return Emit(std::move(clip), n.outputs[0]);
  }

  // HardSigmoid as oneDNN eltwise steps: alpha * x + beta, then clip to [0, 1].
  static std::vector<PostOp> HardSigmoidParts(const Node& n) {
    return {{PostOpKind::kEltwise, EltwiseAlg::kLinear, BinaryAlg::kAdd,
             GetFloat(n, "alpha", 0.2f), GetFloat(n, "beta", 0.5f)},
            {PostOpKind::kEltwise, EltwiseAlg::kClip, BinaryAlg::kAdd, 0.0f, 1.0f}};
  }

  // A pooling node's kind, algorithm and window into `op` (inputs and output left to the caller).
  Status SetPool(Op* op, const Node& n) const {
    const std::string& t = n.op_type;
    op->kind = OpKind::kPool;
    op->global = t[0] == 'G';
    op->pool = t.find("Max") != std::string::npos ? PoolAlg::kMax : PoolAlg::kAvgExcludePad;
    if (!op->global) {
      ASSIGN_OR_RETURN(compiler::PoolAttributes pool,
                       compiler::ParsePoolAttributes(n, RankOf(g_, n.inputs[0]) - 2));
      SetWindow(op, pool);
      op->ceil_mode = pool.ceil_mode;
      if (op->pool != PoolAlg::kMax && pool.count_include_pad) op->pool = PoolAlg::kAvgIncludePad;
    }
    return Status::Ok();
  }

  static bool AllZero(const std::vector<int64_t>& v) {
    return std::all_of(v.begin(), v.end(), [](int64_t x) { return x == 0; });
  }

  // The AveragePool that may run before Conv `conv` instead of after it: the conv's only user,
  // windowed, unpadded and without ceil_mode, after a 1x1 conv of stride 1 without padding.
  // Both are then per-pixel linear maps whose pool weights sum to 1, so they commute (bias
  // included); only the rounding of the sums changes. DenseNet's transitions (conv 1x1 ->
  // AvgPool 2x2) then convolve a quarter of the pixels: a fifth of densenet121's FLOPs.
  std::optional<NodeId> PoolFirst(const Node& conv, ValueId out) const {
    std::optional<NodeId> u = SoleUser(out);
    if (!u || !IsSupported(g_, *u)) return std::nullopt;
    const Node& p = g_.node(*u);
    if (p.op_type != "AveragePool" || p.inputs.empty() || p.inputs[0] != out) return std::nullopt;
    int spatial = RankOf(g_, conv.inputs[0]) - 2;
    std::optional<compiler::ConvAttributes> c = ConvOf(g_, conv, spatial);
    StatusOr<compiler::PoolAttributes> pool = compiler::ParsePoolAttributes(p, spatial);
    if (!c || !pool.ok() || pool->ceil_mode || !AllZero(pool->pads) || pool->same() ||
        !AllZero(c->pads) || c->same())
      return std::nullopt;
    for (int i = 0; i < spatial; ++i) {
      if (c->kernel[i] != 1 || c->strides[i] != 1) return std::nullopt;
    }
    return u;
  }

  // The parsed window into the blob's op (its AutoPad mirrors compiler::AutoPad).
  static void SetWindow(Op* op, const compiler::WindowAttributes& w) {
    op->kernel = w.kernel;
    op->strides = w.strides;
    op->dilations = w.dilations;
    op->pads = w.pads;
    op->auto_pad = w.auto_pad == compiler::AutoPad::kSameUpper   ? AutoPad::kSameUpper
                   : w.auto_pad == compiler::AutoPad::kSameLower ? AutoPad::kSameLower
                   : w.auto_pad == compiler::AutoPad::kValid     ? AutoPad::kValid
                                                                 : AutoPad::kNotSet;
  }

  Status EmitConv(NodeId id) {
    const Node& n = g_.node(id);
    Op op;
    op.kind = OpKind::kConv;
    std::optional<compiler::ConvAttributes> conv = ConvOf(g_, n, RankOf(g_, n.inputs[0]) - 2);
    if (!conv) return InvalidArgument("malformed Conv attributes");
    op.group = conv->group;
    SetWindow(&op, *conv);
    // An empty kernel tells the runtime to take W's dims; a Conv without kernel_shape keeps it
    // empty so its blob stays byte-identical to the one it always had.
    if (!n.FindAttribute("kernel_shape")) op.kernel.clear();
    ValueId out = n.outputs[0];
    // BatchNormalization folded into constant weights: W' = W * s, B' = (B - mean) * s + beta
    // with s = gamma / sqrt(var + eps), per output channel.
    std::optional<NodeId> bn = SoleUser(out);
    if (bn && g_.node(*bn).op_type == "BatchNormalization" && IsSupported(g_, *bn) &&
        g_.node(*bn).inputs[0] == out && FoldableBn(n, g_.node(*bn))) {
      RETURN_IF_ERROR(FoldBn(&op, n, g_.node(*bn)));
      consumed_.insert(*bn);
      out = g_.node(*bn).outputs[0];
    } else if (std::optional<NodeId> pool = PoolFirst(n, out)) {
      Op first;
      RETURN_IF_ERROR(SetPool(&first, g_.node(*pool)));
      ASSIGN_OR_RETURN(int32_t x, Use(n.inputs[0]));
      first.inputs.push_back(x);
      first.output = NewTensor(RankOf(g_, n.inputs[0]));
      RETURN_IF_ERROR(Inputs(&op, n, 3));
      op.inputs[0] = first.output;
      region_.ops.push_back(std::move(first));
      consumed_.insert(*pool);
      out = g_.node(*pool).outputs[0];
    } else {
      RETURN_IF_ERROR(Inputs(&op, n, 3));
    }
    RETURN_IF_ERROR(Fuse(&op, &out));
    return Emit(std::move(op), out);
  }

  bool FoldableBn(const Node& conv, const Node& bn) const {
    if (!Data(g_, conv.inputs[1]) || (In(conv, 2) != kNoValue && !Data(g_, In(conv, 2))))
      return false;
    for (size_t i = 1; i < 5; ++i) {
      if (!Data(g_, bn.inputs[i])) return false;
    }
    return true;
  }

  Status FoldBn(Op* op, const Node& conv, const Node& bn) {
    const TensorData& w = *Data(g_, conv.inputs[1]);
    int64_t oc = w.dims()[0], per = w.num_elements() / std::max<int64_t>(oc, 1);
    std::vector<double> gamma = Data(g_, bn.inputs[1])->ToDoubles();
    std::vector<double> beta = Data(g_, bn.inputs[2])->ToDoubles();
    std::vector<double> mean = Data(g_, bn.inputs[3])->ToDoubles();
    std::vector<double> var = Data(g_, bn.inputs[4])->ToDoubles();
    if (static_cast<int64_t>(gamma.size()) != oc || beta.size() != gamma.size() ||
        mean.size() != gamma.size() || var.size() != gamma.size())
      return InvalidArgument("BatchNormalization statistics do not match the conv's channels");
    double eps = GetFloat(bn, "epsilon", 1e-5f);
    std::vector<double> bias(oc, 0.0);
    if (In(conv, 2) != kNoValue) bias = Data(g_, In(conv, 2))->ToDoubles();
    std::vector<double> wv = w.ToDoubles();
    std::vector<float> nw(wv.size()), nb(oc);
    for (int64_t o = 0; o < oc; ++o) {
      double s = gamma[o] / std::sqrt(var[o] + eps);
      for (int64_t k = 0; k < per; ++k) nw[o * per + k] = static_cast<float>(wv[o * per + k] * s);
      nb[o] = static_cast<float>((bias[o] - mean[o]) * s + beta[o]);
    }
    ASSIGN_OR_RETURN(int32_t x, Use(conv.inputs[0]));
    ASSIGN_OR_RETURN(TensorDataRef wd,
                     TensorData::Copy(DType::kF32, w.dims(), nw.data(), nw.size() * sizeof(float)));
    ASSIGN_OR_RETURN(TensorDataRef bd,
                     TensorData::Copy(DType::kF32, {oc}, nb.data(), nb.size() * sizeof(float)));
    op->inputs = {x, AddConstant(kNoValue, wd), AddConstant(kNoValue, bd)};
    return Status::Ok();
  }

  // MatMul, and Gemm as alpha * (op(A) op(B) + C / alpha * beta) with alpha and beta folded into
  // constant B and C where possible.
  Status EmitMatMul(NodeId id) {
    const Node& n = g_.node(id);
    Op op;
    op.kind = OpKind::kMatMul;
    if (n.op_type == "MatMul") {
      RETURN_IF_ERROR(Inputs(&op, n, 2));
    } else {
      op.trans_a = GetInt(n, "transA", 0) != 0;
      op.trans_b = GetInt(n, "transB", 0) != 0;
      float alpha = GetFloat(n, "alpha", 1.0f), beta = GetFloat(n, "beta", 1.0f);
      ASSIGN_OR_RETURN(int32_t a, Use(n.inputs[0]));
      op.inputs.push_back(a);
      if (alpha != 1.0f && Data(g_, n.inputs[1])) {
        ASSIGN_OR_RETURN(TensorDataRef b, Scaled(*Data(g_, n.inputs[1]), alpha));
        op.inputs.push_back(AddConstant(kNoValue, b));
        alpha = 1.0f;
      } else {
        ASSIGN_OR_RETURN(int32_t b, Use(n.inputs[1]));
        op.inputs.push_back(b);
      }
      op.alpha = alpha;
      ValueId c = In(n, 2);
      if (c != kNoValue) {
        float scale = beta / alpha;
        if (Data(g_, c) && scale != 1.0f) {
          ASSIGN_OR_RETURN(TensorDataRef cd, Scaled(*Data(g_, c), scale));
          op.inputs.push_back(AddConstant(kNoValue, cd));
        } else if (Data(g_, c) || scale == 1.0f) {
          ASSIGN_OR_RETURN(int32_t ct, Use(c));
          op.inputs.push_back(ct);
        } else {
          return InvalidArgument("Gemm with a run-time C needs alpha == beta");
        }
      }
    }
    ValueId out = n.outputs[0];
    RETURN_IF_ERROR(Fuse(&op, &out));
    return Emit(std::move(op), out);
  }

  static StatusOr<TensorDataRef> Scaled(const TensorData& d, double s) {
    std::vector<double> v = d.ToDoubles();
    std::vector<float> f(v.size());
    for (size_t i = 0; i < v.size(); ++i) f[i] = static_cast<float>(v[i] * s);
    return TensorData::Copy(DType::kF32, d.dims(), f.data(), f.size() * sizeof(float));
  }

  // ---- Post-op fusion ----

  // Appends the elementwise chain after `*out` to the anchor op's post-ops, moving `*out` to
  // the chain's last value.
  Status Fuse(Op* op, ValueId* out) {
    for (;;) {
      if (auto g = gelu_by_x_.find(*out); g != gelu_by_x_.end() && !outputs_.count(*out)) {
        const GeluMatch& m = gelus_[g->second];
        bool all_in = true;
        for (NodeId u : g_.Users(*out)) all_in = all_in && m.nodes.count(u);
        if (all_in) {
          op->post_ops.push_back({PostOpKind::kEltwise, EltwiseAlg::kGeluErf});
          for (NodeId u : m.nodes) consumed_.insert(u);
          for (NodeId u : m.nodes) gelu_member_.erase(u);
          *out = m.out;
          continue;
        }
      }
      if (std::optional<NodeId> mul = SwishOf(*out)) {
        op->post_ops.push_back({PostOpKind::kEltwise, EltwiseAlg::kSwish, BinaryAlg::kAdd, 1.0f});
        consumed_.insert(g_.Users(*out).begin(), g_.Users(*out).end());
        *out = g_.node(*mul).outputs[0];
        continue;
      }
      std::optional<NodeId> u = SoleUser(*out);
      if (!u || !IsSupported(g_, *u)) return Status::Ok();
      const Node& n = g_.node(*u);
      if (n.op_type == "HardSigmoid" && n.inputs[0] == *out) {
        for (const PostOp& p : HardSigmoidParts(n)) op->post_ops.push_back(p);
        consumed_.insert(*u);
        *out = n.outputs[0];
        continue;
      }
      std::optional<EltwiseSpec> e = EltwiseOf(g_, n, /*scalar_binaries=*/false);
      if (n.inputs.empty() || n.inputs[0] != *out) {
        if (!(n.inputs.size() == 2 && n.inputs[1] == *out && BinaryOf(n.op_type) &&
              IsCommutative(*BinaryOf(n.op_type))))
          return Status::Ok();
      }
      if (e) {
        if (e->alg == EltwiseAlg::kRound) return Status::Ok();  // not a oneDNN post-op
        op->post_ops.push_back({PostOpKind::kEltwise, e->alg, BinaryAlg::kAdd, e->alpha, e->beta});
      } else if (std::optional<BinaryAlg> alg = BinaryOf(n.op_type)) {
        if (*alg == BinaryAlg::kMax || *alg == BinaryAlg::kMin) return Status::Ok();
        std::optional<ValueId> other = Other(n, *out);
        if (!other || !Available(*other)) return Status::Ok();
        const SymbolicShape &o = *ShapeOf(g_, *other), &v = *ShapeOf(g_, *out);
        if (*ShapeOf(g_, n.outputs[0]) != v || !BroadcastsInto(o, v)) return Status::Ok();
        if (!FuseBias(op, *alg, *other, v)) {
          ASSIGN_OR_RETURN(int32_t t, Use(*other));
          bool sum = *alg == BinaryAlg::kAdd && o == v && op->post_ops.empty();
          op->post_ops.push_back({sum ? PostOpKind::kSum : PostOpKind::kBinary, EltwiseAlg::kRelu,
                                  *alg, 0.0f, 0.0f, t});
        }
      } else {
        return Status::Ok();
      }
      consumed_.insert(*u);
      *out = n.outputs[0];
    }
  }

  // A constant Add right after a bias-less MatMul ([.., N] with ones before) or Conv ([C, 1..]
  // or [1, C, 1..]) becomes the op's bias.
  bool FuseBias(Op* op, BinaryAlg alg, ValueId v, const SymbolicShape& out) {
    const TensorData* d = Data(g_, v);
    if (alg != BinaryAlg::kAdd || !d || d->dtype() != DType::kF32 || !op->post_ops.empty() ||
        op->inputs.size() != 2 || op->alpha != 1.0f)
      return false;
    const std::vector<int64_t>& dims = d->dims();
    if (op->kind == OpKind::kMatMul) {
      for (size_t i = 0; i + 1 < dims.size(); ++i) {
        if (dims[i] != 1) return false;
      }
    } else {
      int rank = region_.tensors[op->inputs[0]].rank;
      if (static_cast<int>(dims.size()) < rank - 1) return false;
      size_t c = dims.size() - (rank - 1);  // the channel dim, aligned
      if (out[1] != DimExpr(d->num_elements())) return false;
      for (size_t i = 0; i < dims.size(); ++i) {
        if (i != c && dims[i] != 1) return false;
      }
    }
    if (op->kind == OpKind::kMatMul) {  // the runtime broadcasts a bias of any rank
      StatusOr<int32_t> t = Use(v);
      if (!t.ok()) return false;
      op->inputs.push_back(*t);
      return true;
    }
    // Conv takes a [C] bias: a new constant viewing the same bytes.
    StatusOr<TensorDataRef> flat = TensorData::Make(DType::kF32, {d->num_elements()},
                                                    g_.value(v).data, d->data(), d->size_bytes());
    if (!flat.ok()) return false;
    op->inputs.push_back(AddConstant(kNoValue, *flat));
    return true;
  }

  // ---- Swish: x * sigmoid(x), SiLU as exporters write it ----
  // One swish instead of a sigmoid and a product: oneDNN 2.6 runs a sigmoid on a blocked
  // layout whose channels do not fill the block (efficientnet_b0's 1x20x1x1 squeeze tensors)
  // with its reference implementation, as sigmoid(0) != 0 would spoil the padding; swish(0) = 0
  // keeps the JIT kernel, and it fuses into a conv as a post-op.

  // The Mul of x * sigmoid(x) when `id` is a region Sigmoid whose output only that Mul reads
  // (same shape as x: no broadcast).
  std::optional<NodeId> SwishMul(NodeId id) const {
    const Node& s = g_.node(id);
    if (s.op_type != "Sigmoid" || s.inputs.size() != 1 || !s.domain.empty() ||
        consumed_.count(id) || !IsSupported(g_, id))
      return std::nullopt;
    std::optional<NodeId> mul = SoleUser(s.outputs[0]);
    if (!mul || g_.node(*mul).op_type != "Mul" || !IsSupported(g_, *mul)) return std::nullopt;
    std::optional<ValueId> other = Other(g_.node(*mul), s.outputs[0]);
    if (!other || *other != s.inputs[0] ||
        *ShapeOf(g_, g_.node(*mul).outputs[0]) != *ShapeOf(g_, s.inputs[0]))
      return std::nullopt;
    return mul;
  }

  // The Mul of a swish that reads `x` and is x's only use (then it can be a post-op).
  std::optional<NodeId> SwishOf(ValueId x) const {
    const std::vector<NodeId>& users = g_.Users(x);
    if (outputs_.count(x) || users.size() != 2) return std::nullopt;
    for (int i = 0; i < 2; ++i) {
      std::optional<NodeId> mul = SwishMul(users[i]);
      if (mul && *mul == users[1 - i]) return mul;
    }
    return std::nullopt;
  }

  Status EmitSwish(NodeId sigmoid, NodeId mul) {
    Op op;
    op.kind = OpKind::kEltwise;
    op.eltwise = EltwiseAlg::kSwish;
    op.alpha = 1.0f;
    ASSIGN_OR_RETURN(int32_t x, Use(g_.node(sigmoid).inputs[0]));
    op.inputs = {x};
    consumed_.insert(mul);
    return Emit(std::move(op), g_.node(mul).outputs[0]);
  }

  // ---- Int8 (QDQ form) ----

  void FindInt8s() {
    for (NodeId n : order_) {
      std::optional<Int8Match> m = MatchInt8(
          g_, n, [&](NodeId u) { return in_region_.count(u) > 0; },
          [&](ValueId v) { return outputs_.count(v) > 0; });
      if (!m) continue;
      int8_root_[n] = static_cast<int>(int8s_.size());  // the Q comes last in order_
      for (NodeId u : m->nodes) {
        if (u != n) int8_member_.insert(u);
      }
      int8s_.push_back(std::move(*m));
    }
  }

  // One QConv / QMatMul (region.h): out_scales[o] = x_scale * w_scale[o] / y_scale, computed
  // in double and rounded once; the weights and bias are the model's integer constants.
  Status EmitInt8(const Int8Match& m) {
    const Node& anchor = g_.node(m.anchor);
    Op op;
    op.kind = m.conv ? OpKind::kQConv : OpKind::kQMatMul;
    if (m.conv) {
      std::optional<compiler::ConvAttributes> conv =
          ConvOf(g_, anchor, RankOf(g_, m.x_q) - 2);
      if (!conv) return InvalidArgument("malformed Conv attributes");
      op.group = conv->group;
      SetWindow(&op, *conv);
      if (!anchor.FindAttribute("kernel_shape")) op.kernel.clear();
    }
    op.trans_b = m.trans_b;
    std::vector<float> scales(m.w_scales.size());
    for (size_t c = 0; c < scales.size(); ++c)
      scales[c] = static_cast<float>(static_cast<double>(m.x_scale) * m.w_scales[c] / m.y_scale);
    int32_t zeros[2] = {m.x_zero, m.y_zero};
    ASSIGN_OR_RETURN(TensorDataRef sd,
                     TensorData::Copy(DType::kF32, {static_cast<int64_t>(scales.size())},
                                      scales.data(), scales.size() * sizeof(float)));
    ASSIGN_OR_RETURN(TensorDataRef zd, TensorData::Copy(DType::kI32, {2}, zeros, sizeof(zeros)));
    auto x = tensor_of_.find(m.x_q);
    if (x == tensor_of_.end())
      return InvalidArgument("int8 input '" + g_.value(m.x_q).name + "' is not available");
    op.inputs = {x->second, AddConstant(m.w_q, nullptr), AddConstant(kNoValue, sd),
                 AddConstant(kNoValue, zd)};
    if (m.bias_q != kNoValue) op.inputs.push_back(AddConstant(m.bias_q, nullptr));
    if (m.relu) op.post_ops.push_back({PostOpKind::kEltwise, EltwiseAlg::kRelu});
    for (NodeId u : m.nodes) consumed_.insert(u);
    return Emit(std::move(op), m.out);
  }

  // ---- Gelu ----

  void FindGelus() {
    for (NodeId n : order_) {
      const Node& erf = g_.node(n);
      if (erf.op_type != "Erf" || erf.inputs.size() != 1) continue;
      std::optional<GeluMatch> m = MatchGelu(
          g_, n, [&](NodeId u) { return in_region_.count(u) > 0; },
          [&](ValueId v) { return outputs_.count(v) > 0; });
      if (!m) continue;
      int index = static_cast<int>(gelus_.size());
      NodeId last = *std::max_element(m->nodes.begin(), m->nodes.end(), [&](NodeId a, NodeId b) {
        return Position(a) < Position(b);
      });
      gelu_last_[last] = index;
      gelu_by_x_[m->x] = index;
      gelu_member_.insert(m->nodes.begin(), m->nodes.end());
      gelus_.push_back(std::move(*m));
    }
  }

  // ---- Decomposed LayerNorm ----

  void FindLayerNorms() {
    for (NodeId n : order_) {
      if (gelu_member_.count(n) || ln_member_.count(n)) continue;
      std::optional<LnMatch> m = MatchLayerNorm(
          g_, n, [&](NodeId u) { return in_region_.count(u) > 0 && !gelu_member_.count(u); },
          [&](ValueId v) { return outputs_.count(v) > 0; });
      if (!m) continue;
      ln_root_[n] = static_cast<int>(lns_.size());  // the root Add comes last in order_
      ln_member_.insert(m->nodes.begin(), m->nodes.end());
      lns_.push_back(std::move(*m));
    }
  }

  Status EmitLayerNorm(const LnMatch& m) {
    Op op;
    op.kind = OpKind::kLayerNorm;
    op.axis = RankOf(g_, m.x) - 1;
    op.epsilon = m.epsilon;
    for (ValueId v : {m.x, m.gamma, m.beta}) {
      ASSIGN_OR_RETURN(int32_t t, Use(v));
      op.inputs.push_back(t);
    }
    for (NodeId u : m.nodes) consumed_.insert(u);
    return Emit(std::move(op), m.out);
  }

  // ---- Channel shuffle ----

  void FindShuffles() {
    for (NodeId n : order_) {
      if (gelu_member_.count(n) || ln_member_.count(n) || shuffle_member_.count(n)) continue;
      std::optional<ShuffleMatch> m = MatchShuffle(
          g_, n, [&](NodeId u) { return in_region_.count(u) > 0; },
          [&](ValueId v) { return outputs_.count(v) > 0; });
      if (!m) continue;
      shuffle_root_[n] = static_cast<int>(shuffles_.size());  // the last Reshape comes last
      NodeId concat = ChannelConcat(m->x);  // before the members are marked (SoleUser)
      shuffle_member_.insert(m->nodes.begin(), m->nodes.end());
      if (concat != compiler::kNoNode) shuffle_member_.insert(concat);
      shuffle_concat_.push_back(concat);
      shuffles_.push_back(std::move(*m));
    }
  }

  // The region Concat along channels producing `x` when the shuffle is its only reader (then
  // the shuffle reads its inputs: one copy instead of two), else kNoNode.
  NodeId ChannelConcat(ValueId x) const {
    NodeId p = g_.value(x).producer;
    std::optional<NodeId> reader = SoleUser(x);
    if (p == compiler::kNoNode || !in_region_.count(p) || !reader ||
        g_.node(*reader).op_type != "Reshape" || consumed_.count(p) || gelu_member_.count(p) ||
        ln_member_.count(p) || int8_member_.count(p) || shuffle_member_.count(p))
      return compiler::kNoNode;
    const Node& c = g_.node(p);
    if (c.op_type != "Concat" || !IsSupported(g_, p) || c.inputs.empty() ||
        c.inputs.size() > static_cast<size_t>(kMaxChannelInputs) ||
        NormalizeAxis(GetInt(c, "axis", 0), RankOf(g_, x)) != 1)
      return compiler::kNoNode;
    for (ValueId v : c.inputs) {
      if (!ShapeOf(g_, v) || !(*ShapeOf(g_, v))[1].is_const()) return compiler::kNoNode;
    }
    return p;
  }

  Status EmitShuffle(const ShuffleMatch& m) {
    Op op;
    op.kind = OpKind::kChannels;
    op.group = m.group;
    op.pads = {0, ShapeOf(g_, m.x)->at(1).const_value()};
    NodeId concat = shuffle_concat_[&m - shuffles_.data()];
    std::vector<ValueId> reads = {m.x};
    if (concat != compiler::kNoNode) {
      reads = g_.node(concat).inputs;
      consumed_.insert(concat);
    }
    for (ValueId v : reads) {
      ASSIGN_OR_RETURN(int32_t x, Use(v));
      op.inputs.push_back(x);
    }
    for (NodeId u : m.nodes) consumed_.insert(u);
    return Emit(std::move(op), m.out);
  }

  size_t Position(NodeId n) const {
    return std::find(order_.begin(), order_.end(), n) - order_.begin();
  }

  Status EmitGelu(const GeluMatch& m) {
    Op op;
    op.kind = OpKind::kEltwise;
    op.eltwise = EltwiseAlg::kGeluErf;
    ASSIGN_OR_RETURN(int32_t x, Use(m.x));
    op.inputs = {x};
    for (NodeId u : m.nodes) consumed_.insert(u);
    return Emit(std::move(op), m.out);
  }

  const Graph& g_;
  std::vector<ValueId> inputs_;
  std::set<ValueId> outputs_;
  std::vector<ValueId> output_list_;
  std::set<NodeId> in_region_, consumed_, gelu_member_;
  std::vector<NodeId> order_;
  std::map<ValueId, int32_t> tensor_of_;
  std::set<int32_t> produced_;
  std::vector<GeluMatch> gelus_;
  std::map<NodeId, int> gelu_last_;
  std::map<ValueId, int> gelu_by_x_;
  std::vector<LnMatch> lns_;
  std::map<NodeId, int> ln_root_;  // root Add -> lns_ index
  std::set<NodeId> ln_member_;
  std::vector<Int8Match> int8s_;
  std::map<NodeId, int> int8_root_;  // the Q -> int8s_ index
  std::set<NodeId> int8_member_;     // the other nodes of each match
  std::vector<ShuffleMatch> shuffles_;
  std::vector<NodeId> shuffle_concat_;  // per shuffle: the Concat it reads through, or kNoNode
  std::map<NodeId, int> shuffle_root_;  // the last Reshape -> shuffles_ index
  std::set<NodeId> shuffle_member_;
  onednn::RegionProgram region_;
  compiler::ExternalCode code_;
};

}  // namespace
}  // namespace internal

StatusOr<compiler::ExternalCode> Codegen(const compiler::Graph& graph,
                                         const std::vector<compiler::NodeId>& nodes,
                                         const std::vector<compiler::ValueId>& inputs,
                                         const std::vector<compiler::ValueId>& outputs) {
  for (compiler::NodeId n : nodes) {
    if (n < 0 || n >= graph.num_nodes())
      return InvalidArgument("oneDNN codegen: node id " + std::to_string(n) + " is out of range");
  }
  for (compiler::ValueId v : inputs) {
    if (v < 0 || v >= graph.num_values())
      return InvalidArgument("oneDNN codegen: input value id " + std::to_string(v) +
                             " is out of range");
  }
  for (compiler::ValueId v : outputs) {
    if (v < 0 || v >= graph.num_values())
      return InvalidArgument("oneDNN codegen: output value id " + std::to_string(v) +
                             " is out of range");
  }
  return internal::Generator(graph, nodes, inputs, outputs).Run();
}

}  // namespace kiln::onednn
