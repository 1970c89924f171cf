// Compute builders: loop nests over outputs, broadcasting elementwise kernels, reductions.
#include "jit/compute.h"

#include <algorithm>
#include <limits>
#include <set>

namespace kiln::jit {
namespace {

DType AccumulatorType(DType t) { return t == DType::kF16 || t == DType::kBF16 ? DType::kF32 : t; }

// Calls `body(index)` inside a loop nest over `shape_of`'s dims. Rank >= 2 flattens all but the
// innermost dim into one parallel loop (so a leading dim of 1 does not serialize the kernel) and
// vectorizes the innermost; rank 1 is one parallel loop (its chunks vectorize).
Stmt LoopNest(const Buffer& shape_of, const std::function<Stmt(const std::vector<Expr>&)>& body) {
  int rank = shape_of->rank;
  if (rank == 0) return body({});
  std::vector<Var> vars;
  std::vector<Expr> index;
  for (int d = 0; d < rank; ++d) {
    vars.emplace_back("i" + std::to_string(d));
    index.push_back(vars.back());
  }
  if (rank == 1) return For(vars[0], DimOf(shape_of, 0), ForKind::kParallel, body(index));
  Stmt inner = For(vars[rank - 1], DimOf(shape_of, rank - 1), ForKind::kVectorized, body(index));
  if (rank == 2) return For(vars[0], DimOf(shape_of, 0), ForKind::kParallel, inner);
  // Decompose the flat outer index: i_{r-2} = o % d_{r-2}, o' = o / d_{r-2}, ...
  Var outer("outer");
  Expr rest = outer;
  std::vector<std::pair<Var, Expr>> lets;
  Expr count = DimOf(shape_of, 0);
  for (int d = 1; d <= rank - 2; ++d) count = count * DimOf(shape_of, d);
  for (int d = rank - 2; d >= 1; --d) {
    lets.push_back({vars[d], FloorMod(rest, DimOf(shape_of, d))});
    rest = FloorDiv(rest, DimOf(shape_of, d));
  }
  lets.push_back({vars[0], rest});
  for (auto it = lets.begin(); it != lets.end(); ++it) inner = Let(it->first, it->second, inner);
  return For(outer, count, ForKind::kParallel, inner);
}

Expr InitValue(Reduction r, DType t) {
  switch (r) {
    case Reduction::kProd:
      return Const(t, 1);
    case Reduction::kMax:
      return Lowest(t);
    case Reduction::kMin:
      return Highest(t);
    default:
      return Const(t, 0);
  }
}

Expr CombineValues(Reduction r, Expr acc, Expr x) {
  switch (r) {
    case Reduction::kProd:
      return Mul(std::move(acc), std::move(x));
    case Reduction::kMax:
      return Max(std::move(acc), std::move(x));
    case Reduction::kMin:
      return Min(std::move(acc), std::move(x));
    default:
      return Add(std::move(acc), std::move(x));
  }
}

ReduceOp ToReduceOp(Reduction r) {
  switch (r) {
    case Reduction::kProd:
      return ReduceOp::kProd;
    case Reduction::kMax:
      return ReduceOp::kMax;
    case Reduction::kMin:
      return ReduceOp::kMin;
    case Reduction::kArgMax:
      return ReduceOp::kArgMax;
    case Reduction::kArgMin:
      return ReduceOp::kArgMin;
    default:
      return ReduceOp::kSum;
  }
}

// Reduced-element count of `in` over `axes`, as `t`.
Expr CountOf(const Buffer& in, const std::vector<int>& axes, DType t) {
  Expr count = IntImm(1);
  for (int a : axes) count = count * DimOf(in, a);
  return Cast(t, count);
}

// Maps the output index to the input index of the non-reduced dims (reduced dims left null).
std::vector<Expr> KeptIndex(const std::vector<Expr>& out_index, int rank,
                            const std::set<int>& reduced, bool keepdims) {
  std::vector<Expr> in_index(rank);
  size_t k = 0;
  for (int d = 0; d < rank; ++d) {
    if (!reduced.count(d)) in_index[d] = out_index[keepdims ? d : k++];
  }
  return in_index;
}

}  // namespace

Stmt ComputeInto(const Buffer& out, const IndexFn& f) {
  return LoopNest(out, [&](const std::vector<Expr>& index) {
    return Store(out, index, Cast(out->dtype, f(index)));
  });
}

Expr BroadcastLoad(const Buffer& in, const std::vector<Expr>& out_index,
                   const std::vector<BroadcastDim>& hint) {
  int offset = static_cast<int>(out_index.size()) - in->rank;
  std::vector<Expr> index;
  for (int d = 0; d < in->rank; ++d) {
    const Expr& i = out_index[offset + d];
    BroadcastDim h = d < static_cast<int>(hint.size()) ? hint[d] : BroadcastDim::kUnknown;
    if (h == BroadcastDim::kSame) {
      index.push_back(i);
    } else if (h == BroadcastDim::kOne) {
      index.push_back(IntImm(0));
    } else {
      index.push_back(Select(Eq(DimOf(in, d), IntImm(1)), IntImm(0), i));
    }
  }
  return Load(in, index);
}

Kernel Elementwise(std::string name, const std::vector<Operand>& inputs, DType out,
                   const std::function<Expr(const std::vector<Expr>&)>& f) {
  int rank = 0;
  Kernel kernel{std::move(name), {}, {}, Stmt()};
  for (size_t k = 0; k < inputs.size(); ++k) {
    rank = std::max(rank, inputs[k].rank);
    kernel.buffers.push_back(
        Buffer::Param("in" + std::to_string(k), inputs[k].dtype, inputs[k].rank));
  }
  Buffer out_buffer = Buffer::Param("out", out, rank);
  // Inputs whose innermost dim is decided at run time get a loop nest per case.
  std::vector<size_t> versioned;
  std::vector<std::vector<BroadcastDim>> hints;
  for (size_t k = 0; k < inputs.size(); ++k) {
    std::vector<BroadcastDim> h = inputs[k].broadcast;
    h.resize(inputs[k].rank, BroadcastDim::kUnknown);
    if (!h.empty() && h.back() == BroadcastDim::kUnknown && versioned.size() < 2) {
      versioned.push_back(k);
    }
    hints.push_back(std::move(h));
  }
  std::function<Stmt(size_t)> version = [&](size_t level) -> Stmt {
    if (level == versioned.size()) {
      return ComputeInto(out_buffer, [&](const std::vector<Expr>& index) {
        std::vector<Expr> values;
        for (size_t k = 0; k < inputs.size(); ++k) {
          values.push_back(Widen(BroadcastLoad(kernel.buffers[k], index, hints[k])));
        }
        return f(values);
      });
    }
    size_t k = versioned[level];
    const Buffer& in = kernel.buffers[k];
    hints[k].back() = BroadcastDim::kOne;
    Stmt repeated = version(level + 1);
    hints[k].back() = BroadcastDim::kSame;
    Stmt matching = version(level + 1);
    hints[k].back() = BroadcastDim::kUnknown;
    return If(Eq(DimOf(in, in->rank - 1), IntImm(1)), repeated, matching);
  };
  kernel.body = version(0);
  kernel.buffers.push_back(out_buffer);
  return kernel;
}

Kernel ElementwiseUnary(std::string name, DType in, DType out, int rank,
                        const std::function<Expr(Expr)>& f) {
  Operand operand{in, rank, std::vector<BroadcastDim>(rank, BroadcastDim::kSame)};
  return Elementwise(std::move(name), {operand}, out,
                     [&](const std::vector<Expr>& v) { return f(v[0]); });
}

Kernel ElementwiseBinary(std::string name, Operand a, Operand b, DType out,
                         const std::function<Expr(Expr, Expr)>& f) {
  return Elementwise(std::move(name), {std::move(a), std::move(b)}, out,
                     [&](const std::vector<Expr>& v) { return f(v[0], v[1]); });
}

namespace {

// Innermost dim kept: accumulate whole rows of the output in a local tile so the reduction loops
// stream the input contiguously and vectorize over the kept innermost dim.
class TiledRowReduce {
 public:
  TiledRowReduce(const Buffer& in, const Buffer& out, Reduction r, const std::set<int>& reduced,
                 bool keepdims)
      : in_(in), out_(out), r_(r), reduced_(reduced), keepdims_(keepdims) {
    for (int d : reduced) reduce_vars_.emplace_back("r" + std::to_string(d));
    for (int d = 0; d + 1 < out->rank; ++d) out_vars_.emplace_back("o" + std::to_string(d));
  }

  // for out rows (all dims but the last; the first parallel) / for tiles of the last dim.
  Stmt Build() const {
    Var t("tile");
    Expr n = DimOf(in_, in_->rank - 1);
    Stmt body = For(t, FloorDiv(n + (kTile - 1), IntImm(kTile)), ForKind::kSerial, Tile(t, n));
    for (int d = out_->rank - 2; d >= 0; --d) {
      body =
          For(out_vars_[d], DimOf(out_, d), d == 0 ? ForKind::kParallel : ForKind::kSerial, body);
    }
    return body;
  }

 private:
  static constexpr int64_t kTile = 256;

  std::vector<Expr> OutIndex(const Expr& last) const {
    std::vector<Expr> index(out_vars_.begin(), out_vars_.end());
    index.push_back(last);
    return index;
  }

  std::vector<Expr> InIndex(const Expr& last) const {
    std::vector<Expr> index = KeptIndex(OutIndex(last), in_->rank, reduced_, keepdims_);
    size_t k = 0;
    for (int d : reduced_) index[d] = reduce_vars_[k++];
    return index;
  }

  // acc[l] = init; for reduced dims: acc[l] = combine(acc[l], in[...]); out[...] = acc[l].
  Stmt Tile(const Var& t, const Expr& n) const {
    DType acc_type = AccumulatorType(in_->dtype);
    Buffer acc = Buffer::Local("acc", acc_type, {kTile});
    Var base("base"), len("len"), l("l"), l2("l2"), l3("l3");
    Stmt accumulate = For(
        l2, len, ForKind::kVectorized,
        Store(acc, {l2}, CombineValues(r_, Load(acc, {l2}), Widen(Load(in_, InIndex(base + l2))))));
    size_t k = reduce_vars_.size();
    for (auto it = reduced_.rbegin(); it != reduced_.rend(); ++it) {
      accumulate = For(reduce_vars_[--k], DimOf(in_, *it), ForKind::kSerial, accumulate);
    }
    Expr result = Load(acc, {l3});
    if (r_ == Reduction::kMean) {
      result = result / CountOf(in_, std::vector<int>(reduced_.begin(), reduced_.end()), acc_type);
    }
    Stmt init = For(l, len, ForKind::kVectorized, Store(acc, {l}, InitValue(r_, acc_type)));
    Stmt write = For(l3, len, ForKind::kVectorized,
                     Store(out_, OutIndex(base + l3), Cast(out_->dtype, result)));
    return Let(
        base, t * kTile,
        Let(len, Min(IntImm(kTile), n - base), Allocate(acc, Seq({init, accumulate, write}))));
  }

  Buffer in_, out_;
  Reduction r_;
  std::set<int> reduced_;
  bool keepdims_;
  std::vector<Var> reduce_vars_, out_vars_;
};

}  // namespace

StatusOr<Kernel> ReduceKernel(std::string name, Reduction reduction, DType dtype, int rank,
                              std::vector<int> axes, bool keepdims) {
  for (int a : axes) {
    if (a < 0 || a >= rank) {
      return InvalidArgument("reduce " + name + ": axis " + std::to_string(a) +
                             " out of range for rank " + std::to_string(rank));
    }
  }
  std::set<int> reduced(axes.begin(), axes.end());
  bool arg = reduction == Reduction::kArgMax || reduction == Reduction::kArgMin;
  int out_rank = keepdims ? rank : rank - static_cast<int>(reduced.size());
  Buffer in = Buffer::Param("in", dtype, rank);
  Buffer out = Buffer::Param("out", arg ? DType::kI64 : dtype, out_rank);
  Kernel kernel{std::move(name), {in, out}, {}, Stmt()};
  bool last_kept = rank > 0 && !reduced.count(rank - 1) && !reduced.empty();
  if (last_kept && !arg) {
    kernel.body = TiledRowReduce(in, out, reduction, reduced, keepdims).Build();
    return kernel;
  }
  kernel.body = ComputeInto(out, [&](const std::vector<Expr>& out_index) {
    std::vector<Expr> index = KeptIndex(out_index, rank, reduced, keepdims);
    std::vector<IterVar> iter;
    for (int d : reduced) {
      Var v("r" + std::to_string(d));
      iter.push_back({v, DimOf(in, d)});
      index[d] = v;
    }
    Expr value = Reduce(ToReduceOp(reduction), iter, Load(in, index));
    if (reduction == Reduction::kMean) {
      value = value / CountOf(in, std::vector<int>(reduced.begin(), reduced.end()), value.dtype());
    }
    return value;
  });
  return kernel;
}

}  // namespace kiln::jit
