// The oneDNN region blob: encoding, bounds-checked decoding and structural validation.
#include "external/onednn/region.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <utility>
#include <type_traits>

#include "base/tensor.h"

namespace kiln::onednn {
namespace {

// ---- Writing ---------------------------------------------------------------------------------

class Writer {
 public:
  template <typename T>
  void Put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));  // hosts are little-endian (x86-64)
  }
  template <typename T>
  void PutList(const std::vector<T>& v) {
    Put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const T& x : v) Put<T>(x);
  }
  std::vector<uint8_t> Take() { return std::move(out_); }

 private:
  std::vector<uint8_t> out_;
};

void PutBound(Writer& w, const BoundTensor& b) {
  w.Put<int32_t>(b.tensor);
  w.PutList(b.dims);
}

void PutOp(Writer& w, const Op& op) {
  w.Put<uint8_t>(static_cast<uint8_t>(op.kind));
  w.PutList(op.inputs);
  w.Put<int32_t>(op.output);
  w.PutList(op.kernel);
  w.PutList(op.strides);
  w.PutList(op.dilations);
  w.PutList(op.pads);
  w.Put<uint8_t>(static_cast<uint8_t>(op.auto_pad));
  w.Put<uint8_t>(op.ceil_mode);
  w.Put<uint8_t>(op.global);
  w.Put<int64_t>(op.group);
  w.Put<uint8_t>(static_cast<uint8_t>(op.pool));
  w.Put<uint8_t>(static_cast<uint8_t>(op.eltwise));
  w.Put<uint8_t>(static_cast<uint8_t>(op.binary));
  w.Put<float>(op.alpha);
  w.Put<float>(op.beta);
  w.Put<int64_t>(op.axis);
  w.Put<float>(op.epsilon);
  w.Put<uint8_t>(op.trans_a);
  w.Put<uint8_t>(op.trans_b);
  w.Put<uint8_t>(op.log_softmax);
  w.Put<uint32_t>(static_cast<uint32_t>(op.post_ops.size()));
  for (const PostOp& p : op.post_ops) {
    w.Put<uint8_t>(static_cast<uint8_t>(p.kind));
    w.Put<uint8_t>(static_cast<uint8_t>(p.eltwise));
    w.Put<uint8_t>(static_cast<uint8_t>(p.binary));
    w.Put<float>(p.alpha);
    w.Put<float>(p.beta);
    w.Put<int32_t>(p.tensor);
  }
}

void PutTuning(Writer& w, const RegionTuning& t) {
  w.Put<uint8_t>(t.probed);
  w.Put<int32_t>(t.f4_from);
  w.Put<uint32_t>(static_cast<uint32_t>(t.shapes.size()));
  for (const TunedShape& s : t.shapes) {
    w.Put<uint32_t>(static_cast<uint32_t>(s.threads));
    w.Put<uint32_t>(static_cast<uint32_t>(s.inputs.size()));
    for (const std::vector<int64_t>& d : s.inputs) w.PutList(d);
    w.Put<uint32_t>(static_cast<uint32_t>(s.tiles.size()));
    for (const TunedTile& tile : s.tiles) {
      w.Put<int32_t>(tile.op);
      w.Put<uint8_t>(tile.tile);
    }
  }
  w.Put<uint32_t>(static_cast<uint32_t>(t.layouts.size()));
  for (const TunedLayout& l : t.layouts) {
    w.Put<int32_t>(l.op);
    w.Put<int64_t>(l.bucket);
    w.Put<uint8_t>(l.choice);
  }
}

// ---- Reading ---------------------------------------------------------------------------------

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  // On an error *v is left as it was. Callers return on the error, but initialize what they
  // read anyway: g++ 12 cannot see through RETURN_IF_ERROR (-Wmaybe-uninitialized).
  template <typename T>
  Status Get(T* v, const char* what) {
    if (size_ - pos_ < sizeof(T)) return Truncated(what);
    std::memcpy(v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }
  // A count of elements that take at least `min_bytes` each: bounded by the bytes left.
  Status GetCount(uint32_t* n, size_t min_bytes, const char* what) {
    RETURN_IF_ERROR(Get(n, what));
    if (*n > (size_ - pos_) / min_bytes) return Truncated(what);
    return Status::Ok();
  }
  template <typename T>
  Status GetList(std::vector<T>* v, const char* what) {
    uint32_t n = 0;
    RETURN_IF_ERROR(GetCount(&n, sizeof(T), what));
    v->resize(n);
    for (T& x : *v) RETURN_IF_ERROR(Get(&x, what));
    return Status::Ok();
  }
  template <typename E>
  Status GetEnum(E* e, int limit, const char* what) {
    uint8_t raw = 0;
    RETURN_IF_ERROR(Get(&raw, what));
    if (raw >= limit)
      return InvalidFormat(std::string(what) + " " + std::to_string(raw) + " is out of range");
    *e = static_cast<E>(raw);
    return Status::Ok();
  }
  Status GetBool(bool* b, const char* what) {
    uint8_t raw = 0;
    RETURN_IF_ERROR(Get(&raw, what));
    if (raw > 1) return InvalidFormat(std::string(what) + " is not 0 or 1");
    *b = raw != 0;
    return Status::Ok();
  }
  size_t remaining() const { return size_ - pos_; }
  size_t pos() const { return pos_; }

 private:
  Status Truncated(const char* what) const {
    return InvalidFormat(std::string("truncated at byte ") + std::to_string(pos_) + " reading " +
                         what);
  }
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

Status GetBound(Reader& r, BoundTensor* b, const char* what) {
  RETURN_IF_ERROR(r.Get(&b->tensor, what));
  return r.GetList(&b->dims, what);
}

Status GetOp(Reader& r, Op* op) {
  RETURN_IF_ERROR(r.GetEnum(&op->kind, kNumOpKinds, "op kind"));
  RETURN_IF_ERROR(r.GetList(&op->inputs, "op inputs"));
  RETURN_IF_ERROR(r.Get(&op->output, "op output"));
  RETURN_IF_ERROR(r.GetList(&op->kernel, "kernel"));
  RETURN_IF_ERROR(r.GetList(&op->strides, "strides"));
  RETURN_IF_ERROR(r.GetList(&op->dilations, "dilations"));
  RETURN_IF_ERROR(r.GetList(&op->pads, "pads"));
  RETURN_IF_ERROR(r.GetEnum(&op->auto_pad, kNumAutoPads, "auto_pad"));
  RETURN_IF_ERROR(r.GetBool(&op->ceil_mode, "ceil_mode"));
  RETURN_IF_ERROR(r.GetBool(&op->global, "global"));
  RETURN_IF_ERROR(r.Get(&op->group, "group"));
  RETURN_IF_ERROR(r.GetEnum(&op->pool, kNumPoolAlgs, "pool algorithm"));
  RETURN_IF_ERROR(r.GetEnum(&op->eltwise, kNumEltwiseAlgs, "eltwise algorithm"));
  RETURN_IF_ERROR(r.GetEnum(&op->binary, kNumBinaryAlgs, "binary algorithm"));
  RETURN_IF_ERROR(r.Get(&op->alpha, "alpha"));
  RETURN_IF_ERROR(r.Get(&op->beta, "beta"));
  RETURN_IF_ERROR(r.Get(&op->axis, "axis"));
  RETURN_IF_ERROR(r.Get(&op->epsilon, "epsilon"));
  RETURN_IF_ERROR(r.GetBool(&op->trans_a, "trans_a"));
  RETURN_IF_ERROR(r.GetBool(&op->trans_b, "trans_b"));
  RETURN_IF_ERROR(r.GetBool(&op->log_softmax, "log_softmax"));
  uint32_t n = 0;
  RETURN_IF_ERROR(r.GetCount(&n, 15, "post-op count"));
  op->post_ops.resize(n);
  for (PostOp& p : op->post_ops) {
    RETURN_IF_ERROR(r.GetEnum(&p.kind, kNumPostOpKinds, "post-op kind"));
    RETURN_IF_ERROR(r.GetEnum(&p.eltwise, kNumEltwiseAlgs, "post-op eltwise algorithm"));
    RETURN_IF_ERROR(r.GetEnum(&p.binary, kNumBinaryAlgs, "post-op binary algorithm"));
    RETURN_IF_ERROR(r.Get(&p.alpha, "post-op alpha"));
    RETURN_IF_ERROR(r.Get(&p.beta, "post-op beta"));
    RETURN_IF_ERROR(r.Get(&p.tensor, "post-op tensor"));
  }
  return Status::Ok();
}

Status GetTuning(Reader& r, RegionTuning* t) {
  RETURN_IF_ERROR(r.GetBool(&t->probed, "tuning probed"));
  RETURN_IF_ERROR(r.Get(&t->f4_from, "tuning f4_from"));
  uint32_t n = 0;
  RETURN_IF_ERROR(r.GetCount(&n, 12, "tuning shape count"));
  t->shapes.resize(n);
  for (TunedShape& s : t->shapes) {
    uint32_t threads = 0;
    RETURN_IF_ERROR(r.Get(&threads, "tuning threads"));
    s.threads = static_cast<int32_t>(threads);  // >= 2^31 turns negative: rejected
    RETURN_IF_ERROR(r.GetCount(&n, 4, "tuning input count"));
    s.inputs.resize(n);
    for (std::vector<int64_t>& d : s.inputs) RETURN_IF_ERROR(r.GetList(&d, "tuning input dims"));
    RETURN_IF_ERROR(r.GetCount(&n, 5, "tuning tile count"));
    s.tiles.resize(n);
    for (TunedTile& tile : s.tiles) {
      RETURN_IF_ERROR(r.Get(&tile.op, "tuning tile op"));
      RETURN_IF_ERROR(r.Get(&tile.tile, "tuning tile"));
    }
  }
  RETURN_IF_ERROR(r.GetCount(&n, 13, "tuning layout count"));
  t->layouts.resize(n);
  for (TunedLayout& l : t->layouts) {
    RETURN_IF_ERROR(r.Get(&l.op, "tuning layout op"));
    RETURN_IF_ERROR(r.Get(&l.bucket, "tuning layout bucket"));
    RETURN_IF_ERROR(r.Get(&l.choice, "tuning layout choice"));
  }
  return Status::Ok();
}

Status DecodeBody(Reader& r, uint16_t minor, RegionProgram* region) {
  uint32_t n = 0;
  RETURN_IF_ERROR(r.GetCount(&n, 2, "tensor count"));
  region->tensors.resize(n);
  for (TensorInfo& t : region->tensors) {
    uint8_t dtype = 0, rank = 0;
    RETURN_IF_ERROR(r.Get(&dtype, "tensor dtype"));
    RETURN_IF_ERROR(r.Get(&rank, "tensor rank"));
    if (!IsValidDType(dtype)) return InvalidFormat("tensor dtype " + std::to_string(dtype));
    t.dtype = static_cast<DType>(dtype);
    t.rank = rank;
  }
  RETURN_IF_ERROR(r.GetCount(&n, 8, "input count"));
  region->inputs.resize(n);
  for (BoundTensor& b : region->inputs) RETURN_IF_ERROR(GetBound(r, &b, "input"));
  RETURN_IF_ERROR(r.GetList(&region->outputs, "outputs"));
  RETURN_IF_ERROR(r.GetCount(&n, 8, "constant count"));
  region->constants.resize(n);
  for (BoundTensor& b : region->constants) RETURN_IF_ERROR(GetBound(r, &b, "constant"));
  RETURN_IF_ERROR(r.GetCount(&n, 64, "op count"));
  region->ops.resize(n);
  for (Op& op : region->ops) RETURN_IF_ERROR(GetOp(r, &op));
  if (minor >= 5) RETURN_IF_ERROR(GetTuning(r, &region->tuning));
  if (r.remaining() != 0)
    return InvalidFormat(std::to_string(r.remaining()) + " trailing bytes after the " +
                         (minor >= 5 ? "tuning records" : "last op"));
  return Status::Ok();
}

// ---- Validation ------------------------------------------------------------------------------

std::string Where(size_t i, const Op& op) {
  return "ops[" + std::to_string(i) + "] (" + OpKindName(op.kind) + ")";
}

class Validator {
 public:
  explicit Validator(const RegionProgram& r) : r_(r), defined_(r.tensors.size(), false) {}

  Status Run() {
    for (const TensorInfo& t : r_.tensors) {
      if (t.rank > kMaxRank) return InvalidFormat("a tensor has rank " + std::to_string(t.rank));
    }
    for (size_t i = 0; i < r_.inputs.size(); ++i) {
      std::string what = "inputs[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(Define(r_.inputs[i].tensor, what));
      RETURN_IF_ERROR(CheckDims(r_.inputs[i], true, what));
    }
    for (size_t i = 0; i < r_.constants.size(); ++i) {
      std::string what = "constants[" + std::to_string(i) + "]";
      RETURN_IF_ERROR(Define(r_.constants[i].tensor, what));
      RETURN_IF_ERROR(CheckDims(r_.constants[i], false, what));
    }
    for (size_t i = 0; i < r_.ops.size(); ++i) {
      const Op& op = r_.ops[i];
      std::string where = Where(i, op);
      for (int32_t t : op.inputs) RETURN_IF_ERROR(Use(t, where + " input"));
      for (const PostOp& p : op.post_ops) {
        if (p.kind != PostOpKind::kEltwise) RETURN_IF_ERROR(Use(p.tensor, where + " post-op"));
      }
      RETURN_IF_ERROR(CheckOp(op, where));
      RETURN_IF_ERROR(Define(op.output, where + " output"));
    }
    for (size_t i = 0; i < r_.tensors.size(); ++i) {
      if (!defined_[i]) return InvalidFormat("tensor " + std::to_string(i) + " is never defined");
    }
    std::vector<bool> is_output(r_.tensors.size(), false);
    std::vector<bool> is_input(r_.tensors.size(), false);
    for (const BoundTensor& b : r_.inputs) is_input[b.tensor] = true;
    for (const BoundTensor& b : r_.constants) is_input[b.tensor] = true;
    for (size_t i = 0; i < r_.outputs.size(); ++i) {
      int32_t t = r_.outputs[i];
      std::string what = "outputs[" + std::to_string(i) + "]";
      if (t < 0 || static_cast<size_t>(t) >= r_.tensors.size())
        return InvalidFormat(what + ": tensor " + std::to_string(t) + " is out of range");
      if (is_input[t]) return InvalidFormat(what + " is a region input or constant");
      if (is_output[t]) return InvalidFormat(what + " repeats tensor " + std::to_string(t));
      is_output[t] = true;
    }
    return CheckTuning(r_.tuning);
  }

 private:
  Status InRange(int32_t t, const std::string& what) const {
    if (t < 0 || static_cast<size_t>(t) >= r_.tensors.size())
      return InvalidFormat(what + ": tensor " + std::to_string(t) + " is out of range [0, " +
                           std::to_string(r_.tensors.size()) + ")");
    return Status::Ok();
  }
  Status Define(int32_t t, const std::string& what) {
    RETURN_IF_ERROR(InRange(t, what));
    if (defined_[t])
      return InvalidFormat(what + ": tensor " + std::to_string(t) + " is defined twice");
    defined_[t] = true;
    return Status::Ok();
  }
  Status Use(int32_t t, const std::string& what) const {
    RETURN_IF_ERROR(InRange(t, what));
    if (!defined_[t])
      return InvalidFormat(what + ": tensor " + std::to_string(t) +
                           " is used before it is defined");
    return Status::Ok();
  }
  Status CheckDims(const BoundTensor& b, bool symbolic_ok, const std::string& what) const {
    if (static_cast<int>(b.dims.size()) != r_.tensors[b.tensor].rank)
      return InvalidFormat(what + ": " + std::to_string(b.dims.size()) + " dims for rank " +
                           std::to_string(r_.tensors[b.tensor].rank));
    for (int64_t d : b.dims) {
      if (d < (symbolic_ok ? -1 : 0) || d > (int64_t{1} << 40))
        return InvalidFormat(what + ": bad dim " + std::to_string(d));
    }
    return Status::Ok();
  }
  int Rank(int32_t t) const { return r_.tensors[t].rank; }

  Status CheckWindow(const Op& op, int spatial, bool kernel_required, const std::string& where) {
    auto check = [&](const std::vector<int64_t>& v, size_t n, int64_t min,
                     const char* name) -> Status {
      if (v.size() != n)
        return InvalidFormat(where + ": " + name + " has " + std::to_string(v.size()) +
                             " values, expected " + std::to_string(n));
      for (int64_t x : v) {
        if (x < min || x > (int64_t{1} << 30))
          return InvalidFormat(where + ": " + name + " value " + std::to_string(x) +
                               " is out of range");
      }
      return Status::Ok();
    };
    if (kernel_required || !op.kernel.empty())
      RETURN_IF_ERROR(check(op.kernel, spatial, 1, "kernel"));
    RETURN_IF_ERROR(check(op.strides, spatial, 1, "strides"));
    RETURN_IF_ERROR(check(op.dilations, spatial, 1, "dilations"));
    return check(op.pads, 2 * spatial, 0, "pads");
  }

  Status CheckOp(const Op& op, const std::string& where) {
    auto count = [&](size_t lo, size_t hi) -> Status {
      if (op.inputs.size() < lo || op.inputs.size() > hi)
        return InvalidFormat(where + ": " + std::to_string(op.inputs.size()) + " inputs");
      return Status::Ok();
    };
    auto rank_is = [&](int32_t t, int lo, int hi, const char* what) -> Status {
      if (Rank(t) < lo || Rank(t) > hi)
        return InvalidFormat(where + ": " + what + " has rank " + std::to_string(Rank(t)));
      return Status::Ok();
    };
    RETURN_IF_ERROR(InRange(op.output, where + " output"));
    bool quantized = op.kind == OpKind::kQConv || op.kind == OpKind::kQMatMul;
    if (!op.post_ops.empty() && op.kind != OpKind::kConv && op.kind != OpKind::kMatMul &&
        !quantized)
      return InvalidFormat(where + ": only Conv and MatMul take post-ops");
    for (const PostOp& p : op.post_ops) {
      if (quantized && p.kind != PostOpKind::kEltwise)
        return InvalidFormat(where + ": an integer op takes eltwise post-ops only");
    }
    if (quantized) {
      RETURN_IF_ERROR(CheckQuantized(op, where));
    } else {  // float ops read and write f32 only (integer tensors belong to kQConv / kQMatMul)
      std::vector<int32_t> used = op.inputs;
      used.push_back(op.output);
      for (const PostOp& p : op.post_ops) {
        if (p.kind != PostOpKind::kEltwise) used.push_back(p.tensor);
      }
      for (int32_t t : used) {
        if (t >= 0 && t < static_cast<int32_t>(r_.tensors.size()) &&
            r_.tensors[t].dtype != DType::kF32 && IsIntegerOperand(t))
          return InvalidFormat(where + ": tensor " + std::to_string(t) + " is " +
                               DTypeShortName(r_.tensors[t].dtype) + ", a float op needs f32");
      }
    }
    int out_rank = Rank(op.output);
    int x_rank = op.inputs.empty() ? 0 : Rank(op.inputs[0]);
    switch (op.kind) {
      case OpKind::kConv:
        RETURN_IF_ERROR(count(2, 3));
        RETURN_IF_ERROR(rank_is(op.inputs[0], 3, 5, "X"));
        RETURN_IF_ERROR(rank_is(op.inputs[1], x_rank, x_rank, "W"));
        if (op.inputs.size() == 3) RETURN_IF_ERROR(rank_is(op.inputs[2], 1, 1, "bias"));
        if (op.group < 1 || op.group > (int64_t{1} << 30))
          return InvalidFormat(where + ": group " + std::to_string(op.group));
        RETURN_IF_ERROR(CheckWindow(op, x_rank - 2, false, where));
        break;
      case OpKind::kQConv:
        RETURN_IF_ERROR(count(4, 5));
        RETURN_IF_ERROR(rank_is(op.inputs[0], 3, 5, "X"));
        RETURN_IF_ERROR(rank_is(op.inputs[1], x_rank, x_rank, "W"));
        if (op.group < 1 || op.group > (int64_t{1} << 30))
          return InvalidFormat(where + ": group " + std::to_string(op.group));
        RETURN_IF_ERROR(CheckWindow(op, x_rank - 2, false, where));
        break;
      case OpKind::kQMatMul:
        RETURN_IF_ERROR(count(4, 5));
        RETURN_IF_ERROR(rank_is(op.inputs[0], 2, kMaxRank, "A"));
        RETURN_IF_ERROR(rank_is(op.inputs[1], 2, 2, "B"));
        break;
      case OpKind::kPool:
        RETURN_IF_ERROR(count(1, 1));
        RETURN_IF_ERROR(rank_is(op.inputs[0], 3, 5, "X"));
        if (!op.global) RETURN_IF_ERROR(CheckWindow(op, x_rank - 2, true, where));
        break;
      case OpKind::kMatMul: {
        RETURN_IF_ERROR(count(2, 3));
        RETURN_IF_ERROR(rank_is(op.inputs[0], 2, kMaxRank, "A"));
        RETURN_IF_ERROR(rank_is(op.inputs[1], 2, kMaxRank, "B"));
        x_rank = std::max(x_rank, Rank(op.inputs[1]));
        if (op.inputs.size() == 3) RETURN_IF_ERROR(rank_is(op.inputs[2], 0, x_rank, "bias"));
        break;
      }
      case OpKind::kEltwise:
        RETURN_IF_ERROR(count(1, 1));
        break;
      case OpKind::kSoftmax:
      case OpKind::kLayerNorm:
        RETURN_IF_ERROR(op.kind == OpKind::kSoftmax ? count(1, 1) : count(2, 3));
        if (op.axis < 0 || op.axis >= std::max(x_rank, 1))
          return InvalidFormat(where + ": axis " + std::to_string(op.axis) + " for rank " +
                               std::to_string(x_rank));
        break;
      case OpKind::kBinary:
        RETURN_IF_ERROR(count(2, 2));
        x_rank = std::max(x_rank, Rank(op.inputs[1]));
        break;
      case OpKind::kConcat:
        RETURN_IF_ERROR(count(1, 1 << 16));
        for (int32_t t : op.inputs) RETURN_IF_ERROR(rank_is(t, x_rank, x_rank, "an input"));
        if (op.axis < 0 || op.axis >= x_rank)
          return InvalidFormat(where + ": axis " + std::to_string(op.axis) + " for rank " +
                               std::to_string(x_rank));
        break;
      case OpKind::kBatchNorm:
        RETURN_IF_ERROR(count(5, 5));
        RETURN_IF_ERROR(rank_is(op.inputs[0], 2, kMaxRank, "X"));
        for (int i = 1; i < 5; ++i) RETURN_IF_ERROR(rank_is(op.inputs[i], 1, 1, "statistics"));
        break;
      case OpKind::kFlatten:
        RETURN_IF_ERROR(count(1, 1));
        if (op.axis < 0 || op.axis > x_rank)
          return InvalidFormat(where + ": axis " + std::to_string(op.axis) + " for rank " +
                               std::to_string(x_rank));
        x_rank = 2;  // the output is always a matrix
        break;
      case OpKind::kChannels:
        RETURN_IF_ERROR(count(1, kMaxChannelInputs));
        for (int32_t t : op.inputs) RETURN_IF_ERROR(rank_is(t, x_rank, x_rank, "an input"));
        RETURN_IF_ERROR(rank_is(op.inputs[0], 3, 5, "X"));
        if (op.group < 1 || op.group > (int64_t{1} << 30))
          return InvalidFormat(where + ": group " + std::to_string(op.group));
        if (op.pads.size() != 2 || op.pads[0] < 0 || op.pads[1] < 1 ||
            op.pads[0] > (int64_t{1} << 40) || op.pads[1] > (int64_t{1} << 40))
          return InvalidFormat(where + ": pads must be {start >= 0, count >= 1}");
        break;
      case OpKind::kResize:
        RETURN_IF_ERROR(count(1, 1));
        RETURN_IF_ERROR(rank_is(op.inputs[0], 3, 5, "X"));
        if (op.strides.size() != static_cast<size_t>(x_rank - 2))
          return InvalidFormat(where + ": " + std::to_string(op.strides.size()) +
                               " factors for " + std::to_string(x_rank - 2) + " spatial dims");
        for (int64_t f : op.strides) {
          if (f < 1 || f > kMaxUpsampleFactor)
            return InvalidFormat(where + ": factor " + std::to_string(f) + " is out of range");
        }
        break;
      case OpKind::kDepthToSpace:
        RETURN_IF_ERROR(count(1, 1));
        RETURN_IF_ERROR(rank_is(op.inputs[0], 4, 4, "X"));
        if (op.strides.size() != 1 || op.strides[0] < 1 || op.strides[0] > kMaxUpsampleFactor)
          return InvalidFormat(where + ": blocksize must be one factor in [1, " +
                               std::to_string(kMaxUpsampleFactor) + "]");
        if (op.axis != 0 && op.axis != 1)
          return InvalidFormat(where + ": mode " + std::to_string(op.axis) +
                               " is neither DCR (0) nor CRD (1)");
        break;
    }
    if (out_rank != x_rank)
      return InvalidFormat(where + ": output rank " + std::to_string(out_rank) + ", expected " +
                           std::to_string(x_rank));
    for (const PostOp& p : op.post_ops) {
      if (p.kind != PostOpKind::kEltwise && Rank(p.tensor) > out_rank)
        return InvalidFormat(where + ": post-op tensor rank " + std::to_string(Rank(p.tensor)) +
                             " exceeds the output rank");
    }
    return Status::Ok();
  }

  // u8 / s8 / s32: the dtypes only integer ops read and write (Bind rejects others by name).
  bool IsIntegerOperand(int32_t t) const {
    DType d = r_.tensors[t].dtype;
    return d == DType::kU8 || d == DType::kI8 || d == DType::kI32;
  }

  // The operand dtypes of kQConv / kQMatMul (region.h), after the count checks.
  Status CheckQuantized(const Op& op, const std::string& where) {
    if (op.inputs.size() < 4 || op.inputs.size() > 5)
      return InvalidFormat(where + ": " + std::to_string(op.inputs.size()) + " inputs");
    const DType want[] = {DType::kU8, DType::kI8, DType::kF32, DType::kI32, DType::kI32};
    const char* what[] = {"x", "w", "out_scales", "zero_points", "bias"};
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      RETURN_IF_ERROR(InRange(op.inputs[i], where + " " + what[i]));
      if (r_.tensors[op.inputs[i]].dtype != want[i])
        return InvalidFormat(where + ": " + what[i] + " is " +
                             DTypeShortName(r_.tensors[op.inputs[i]].dtype) + ", expected " +
                             DTypeShortName(want[i]));
    }
    for (size_t i = 2; i < op.inputs.size(); ++i) {
      if (Rank(op.inputs[i]) != 1) return InvalidFormat(where + ": " + what[i] + " is not 1-D");
    }
    if (r_.tensors[op.output].dtype != DType::kU8)
      return InvalidFormat(where + ": the output is " +
                           DTypeShortName(r_.tensors[op.output].dtype) + ", expected u8");
    return Status::Ok();
  }

  // Tuning records name existing ops of their kind, once per record, with known values; a
  // shape is a complete set of the region's input dims.
  Status CheckTuning(const RegionTuning& t) const {
    const size_t n = r_.ops.size();
    if (t.f4_from < 0 || static_cast<size_t>(t.f4_from) > n)
      return InvalidFormat("tuning.f4_from: " + std::to_string(t.f4_from) + " is not in [0, " +
                           std::to_string(n) + "]");
    auto op_of = [&](int32_t op, OpKind kind, const std::string& what) -> Status {
      if (op < 0 || static_cast<size_t>(op) >= n)
        return InvalidFormat(what + ": ops[" + std::to_string(op) + "] does not exist (" +
                             std::to_string(n) + " ops)");
      if (r_.ops[op].kind != kind)
        return InvalidFormat(what + ": ops[" + std::to_string(op) + "] is " +
                             OpKindName(r_.ops[op].kind) + ", not a " + OpKindName(kind));
      return Status::Ok();
    };
    for (size_t i = 0; i < t.shapes.size(); ++i) {
      const TunedShape& s = t.shapes[i];
      const std::string what = "tuning.shapes[" + std::to_string(i) + "]";
      if (s.threads < 1) return InvalidFormat(what + ".threads: " + std::to_string(s.threads) + " < 1");
      if (s.inputs.size() != r_.inputs.size())
        return InvalidFormat(what + ": " + std::to_string(s.inputs.size()) + " inputs, the region has " +
                             std::to_string(r_.inputs.size()));
      for (size_t k = 0; k < s.inputs.size(); ++k) {
        const std::vector<int64_t>& d = s.inputs[k];
        const std::vector<int64_t>& want = r_.inputs[k].dims;
        bool ok = d.size() == want.size();
        for (size_t j = 0; ok && j < d.size(); ++j) ok = d[j] >= 0 && (want[j] < 0 || want[j] == d[j]);
        if (!ok)
          return InvalidFormat(what + ".inputs[" + std::to_string(k) + "]: " + DimsText(d) +
                               " is not a shape of the region's input " + DimsText(want));
      }
      std::set<int32_t> seen;
      for (size_t j = 0; j < s.tiles.size(); ++j) {
        const TunedTile& tile = s.tiles[j];
        const std::string at = what + ".tiles[" + std::to_string(j) + "]";
        RETURN_IF_ERROR(op_of(tile.op, OpKind::kConv, at));
        if (tile.tile != 0 && tile.tile != 2 && tile.tile != 4)
          return InvalidFormat(at + ": tile " + std::to_string(tile.tile) + " is not 0, 2 or 4");
        if (!seen.insert(tile.op).second)
          return InvalidFormat(at + ": ops[" + std::to_string(tile.op) + "] again");
      }
    }
    std::set<std::pair<int32_t, int64_t>> buckets;
    for (size_t j = 0; j < t.layouts.size(); ++j) {
      const TunedLayout& l = t.layouts[j];
      const std::string at = "tuning.layouts[" + std::to_string(j) + "]";
      RETURN_IF_ERROR(op_of(l.op, OpKind::kMatMul, at));
      if (l.choice > 1) return InvalidFormat(at + ": choice " + std::to_string(l.choice) + " is not 0 or 1");
      if (l.bucket <= 0) return InvalidFormat(at + ": bucket " + std::to_string(l.bucket) + " <= 0");
      if (!buckets.insert({l.op, l.bucket}).second)
        return InvalidFormat(at + ": ops[" + std::to_string(l.op) + "] bucket " +
                             std::to_string(l.bucket) + " again");
    }
    return Status::Ok();
  }

  static std::string DimsText(const std::vector<int64_t>& d) {
    std::string s = "[";
    for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
    return s + "]";
  }

  const RegionProgram& r_;
  std::vector<bool> defined_;
};

}  // namespace

const char* OpKindName(OpKind k) {
  static const char* const kNames[] = {"Conv",      "MatMul", "Pool",   "Eltwise",   "Softmax",
                                       "LayerNorm", "Binary", "Concat", "BatchNorm", "Flatten",
                                       "QConv",     "QMatMul", "Channels", "Resize",
                                       "DepthToSpace"};
  int i = static_cast<int>(k);
  return i < kNumOpKinds ? kNames[i] : "?";
}

const char* EltwiseAlgName(EltwiseAlg a) {
  static const char* const kNames[] = {
      "relu", "sigmoid", "tanh", "gelu_erf", "gelu_tanh", "clip",  "hardswish", "elu",   "exp",
      "log",  "abs",     "sqrt", "softplus", "linear",    "swish", "round",     "square"};
  int i = static_cast<int>(a);
  return i < kNumEltwiseAlgs ? kNames[i] : "?";
}

std::vector<uint8_t> EncodeRegion(const RegionProgram& region) {
  Writer w;
  w.Put<uint32_t>(kRegionMagic);
  w.Put<uint16_t>(kRegionMajor);
  w.Put<uint16_t>(kRegionMinor);
  w.Put<uint32_t>(static_cast<uint32_t>(region.tensors.size()));
  for (const TensorInfo& t : region.tensors) {
    w.Put<uint8_t>(static_cast<uint8_t>(t.dtype));
    w.Put<uint8_t>(static_cast<uint8_t>(t.rank));
  }
  w.Put<uint32_t>(static_cast<uint32_t>(region.inputs.size()));
  for (const BoundTensor& b : region.inputs) PutBound(w, b);
  w.PutList(region.outputs);
  w.Put<uint32_t>(static_cast<uint32_t>(region.constants.size()));
  for (const BoundTensor& b : region.constants) PutBound(w, b);
  w.Put<uint32_t>(static_cast<uint32_t>(region.ops.size()));
  for (const Op& op : region.ops) PutOp(w, op);
  PutTuning(w, region.tuning);
  return w.Take();
}

StatusOr<RegionProgram> DecodeRegion(const uint8_t* data, size_t size) {
  auto fail = [](const Status& s) { return s.WithContext("region blob"); };
  if (data == nullptr && size != 0) return InvalidFormat("region blob: null data");
  Reader r(data, size);
  uint32_t magic = 0;
  uint16_t major = 0, minor = 0;
  if (Status s = r.Get(&magic, "magic"); !s.ok()) return fail(s);
  if (magic != kRegionMagic) return InvalidFormat("region blob: bad magic (not a oneDNN region)");
  if (Status s = r.Get(&major, "version"); !s.ok()) return fail(s);
  if (Status s = r.Get(&minor, "version"); !s.ok()) return fail(s);
  if (major != kRegionMajor || minor > kRegionMinor)
    return Unsupported("region blob: version " + std::to_string(major) + "." +
                       std::to_string(minor) + " is not readable by this runtime (version " +
                       std::to_string(kRegionMajor) + "." + std::to_string(kRegionMinor) + ")");
  RegionProgram region;
  if (Status s = DecodeBody(r, minor, &region); !s.ok()) return fail(s);
  if (Status s = ValidateRegion(region); !s.ok()) return fail(s);
  return region;
}

Status ValidateRegion(const RegionProgram& region) { return Validator(region).Run(); }

namespace {

std::string Ints(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + (v[i] < 0 ? std::string("?") : std::to_string(v[i]));
  return s + "]";
}

std::string Float(float f) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", static_cast<double>(f));
  return buf;
}

const char* BinaryAlgName(BinaryAlg a) {
  static const char* const kNames[] = {"add", "sub", "mul", "div", "max", "min"};
  int i = static_cast<int>(a);
  return i < kNumBinaryAlgs ? kNames[i] : "?";
}

// "alpha=.. beta=.." for the eltwise algorithms whose parameters mean something.
std::string EltwiseParams(EltwiseAlg a, float alpha, float beta) {
  switch (a) {
    case EltwiseAlg::kRelu:
      return alpha != 0.0f ? " slope=" + Float(alpha) : "";
    case EltwiseAlg::kClip:
      return " min=" + Float(alpha) + " max=" + Float(beta);
    case EltwiseAlg::kElu:
    case EltwiseAlg::kSwish:
      return " alpha=" + Float(alpha);
    case EltwiseAlg::kLinear:
      return " alpha=" + Float(alpha) + " beta=" + Float(beta);
    default:
      return "";
  }
}

}  // namespace

StatusOr<std::string> DescribeRegion(const uint8_t* data, size_t size) {
  ASSIGN_OR_RETURN(RegionProgram r, DecodeRegion(data, size));
  std::vector<std::string> name(r.tensors.size());
  for (size_t i = 0; i < name.size(); ++i) name[i] = "t" + std::to_string(i);
  for (size_t i = 0; i < r.inputs.size(); ++i) name[r.inputs[i].tensor] = "in" + std::to_string(i);
  for (size_t i = 0; i < r.constants.size(); ++i)
    name[r.constants[i].tensor] = "const" + std::to_string(i);
  for (size_t i = 0; i < r.outputs.size(); ++i) name[r.outputs[i]] = "out" + std::to_string(i);
  auto list = [&](const std::vector<BoundTensor>& ts) {
    std::string s;
    for (const BoundTensor& b : ts) s += (s.empty() ? "" : ", ") + name[b.tensor] + " " + Ints(b.dims);
    return s.empty() ? std::string("none") : s;
  };
  std::string out = "inputs: " + list(r.inputs) + "\n";
  if (!r.constants.empty()) out += "constants: " + list(r.constants) + "\n";
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const Op& op = r.ops[i];
    std::string line = "[" + std::to_string(i) + "] " + OpKindName(op.kind);
    if (op.kind == OpKind::kEltwise) line += std::string(" ") + EltwiseAlgName(op.eltwise);
    if (op.kind == OpKind::kBinary) line += std::string(" ") + BinaryAlgName(op.binary);
    line += " (";
    for (size_t j = 0; j < op.inputs.size(); ++j) line += (j ? ", " : "") + name[op.inputs[j]];
    line += ") -> " + name[op.output];
    std::vector<std::string> attrs;
    auto window = [&] {
      if (!op.kernel.empty()) attrs.push_back("kernel=" + Ints(op.kernel));
      if (!op.strides.empty()) attrs.push_back("strides=" + Ints(op.strides));
      if (!op.pads.empty()) attrs.push_back("pads=" + Ints(op.pads));
      if (!op.dilations.empty()) attrs.push_back("dilations=" + Ints(op.dilations));
      static const char* const kAutoPad[] = {"", "SAME_UPPER", "SAME_LOWER", "VALID"};
      if (op.auto_pad != AutoPad::kNotSet)
        attrs.push_back(std::string("auto_pad=") + kAutoPad[static_cast<int>(op.auto_pad)]);
    };
    switch (op.kind) {
      case OpKind::kConv:
      case OpKind::kQConv:
        if (op.kernel.empty()) {  // taken from W's dims at run time; shown when W is constant
          for (const BoundTensor& c : r.constants) {
            if (c.tensor == op.inputs[1] && c.dims.size() > 2)
              attrs.push_back("kernel=" + Ints(std::vector<int64_t>(c.dims.begin() + 2, c.dims.end())));
          }
        }
        window();
        if (op.group != 1) attrs.push_back("group=" + std::to_string(op.group));
        break;
      case OpKind::kMatMul:
      case OpKind::kQMatMul:
        if (op.trans_a) attrs.push_back("trans_a");
        if (op.trans_b) attrs.push_back("trans_b");
        if (op.alpha != 1.0f) attrs.push_back("alpha=" + Float(op.alpha));
        break;
      case OpKind::kPool: {
        static const char* const kPool[] = {"max", "avg (pads counted)", "avg"};
        attrs.push_back(std::string(op.global ? "global " : "") + kPool[static_cast<int>(op.pool)]);
        if (!op.global) window();
        if (op.ceil_mode) attrs.push_back("ceil_mode");
        break;
      }
      case OpKind::kEltwise: {
        std::string p = EltwiseParams(op.eltwise, op.alpha, op.beta);
        if (!p.empty()) attrs.push_back(p.substr(1));
        break;
      }
      case OpKind::kSoftmax:
        attrs.push_back("axis=" + std::to_string(op.axis));
        if (op.log_softmax) attrs.push_back("log");
        break;
      case OpKind::kLayerNorm:
        attrs.push_back("axis=" + std::to_string(op.axis));
        attrs.push_back("epsilon=" + Float(op.epsilon));
        break;
      case OpKind::kBatchNorm:
        attrs.push_back("epsilon=" + Float(op.epsilon));
        break;
      case OpKind::kConcat:
      case OpKind::kFlatten:
        attrs.push_back("axis=" + std::to_string(op.axis));
        break;
      case OpKind::kBinary:
        break;
      case OpKind::kChannels:
        if (op.group != 1) attrs.push_back("shuffle groups=" + std::to_string(op.group));
        if (op.pads.size() == 2)
          attrs.push_back("channels [" + std::to_string(op.pads[0]) + ", " +
                          std::to_string(op.pads[0] + op.pads[1]) + ")");
        break;
      case OpKind::kResize:
        attrs.push_back("nearest factors=" + Ints(op.strides));
        break;
      case OpKind::kDepthToSpace:
        attrs.push_back("blocksize=" + Ints(op.strides) + (op.axis == 1 ? " CRD" : " DCR"));
        break;
    }
    std::string posts;
    for (const PostOp& p : op.post_ops) {
      posts += posts.empty() ? "" : ", ";
      switch (p.kind) {
        case PostOpKind::kEltwise:
          posts += std::string(EltwiseAlgName(p.eltwise)) + EltwiseParams(p.eltwise, p.alpha, p.beta);
          break;
        case PostOpKind::kSum:
          posts += "sum(" + name[p.tensor] + ")";
          break;
        case PostOpKind::kBinary:
          posts += std::string(BinaryAlgName(p.binary)) + "(" + name[p.tensor] + ")";
          break;
      }
    }
    if (!posts.empty()) attrs.push_back("post-ops: " + posts);
    for (size_t j = 0; j < attrs.size(); ++j) line += (j ? "; " : "  ") + attrs[j];
    out += line + "\n";
  }
  const RegionTuning& t = r.tuning;
  if (t.probed) out += "tuned: F(4x4) from ops[" + std::to_string(t.f4_from) + "]\n";
  for (const TunedShape& s : t.shapes) {
    int count[5] = {0, 0, 0, 0, 0};
    for (const TunedTile& tile : s.tiles) ++count[tile.tile];
    std::string dims;
    for (const std::vector<int64_t>& d : s.inputs) dims += (dims.empty() ? "" : ", ") + Ints(d);
    out += "tuned at " + dims + ", " + std::to_string(s.threads) + " threads: " +
           std::to_string(s.tiles.size()) + " Conv tiles (F4 " + std::to_string(count[4]) +
           ", F2 " + std::to_string(count[2]) + ", oneDNN " + std::to_string(count[0]) + ")\n";
  }
  if (!t.layouts.empty())
    out += "tuned: " + std::to_string(t.layouts.size()) + " MatMul weight layouts\n";
  return out;
}

}  // namespace kiln::onednn
