// Compute builders for data movement and windows: transpose, gather, slice, pad, concat, pool.
#include <limits>

#include "jit/compute.h"

namespace kiln::jit {
namespace {

Expr Clamp(Expr i, Expr n) { return Max(Min(std::move(i), n - 1), IntImm(0)); }

Expr InBounds(const Expr& i, const Expr& n) { return And(Ge(i, IntImm(0)), Lt(i, n)); }

Status CheckAxis(int axis, int rank, const std::string& what) {
  if (axis >= 0 && axis < rank) return Status::Ok();
  return InvalidArgument(what + " axis " + std::to_string(axis) + " out of range for rank " +
                         std::to_string(rank));
}

}  // namespace

StatusOr<Kernel> TransposeKernel(std::string name, DType dtype, const std::vector<int>& perm) {
  int rank = static_cast<int>(perm.size());
  std::vector<bool> seen(rank, false);
  for (int p : perm) {
    RETURN_IF_ERROR(CheckAxis(p, rank, "transpose " + name + ":"));
    if (seen[p])
      return InvalidArgument("transpose " + name + ": axis " + std::to_string(p) + " repeats");
    seen[p] = true;
  }
  Buffer in = Buffer::Param("in", dtype, rank), out = Buffer::Param("out", dtype, rank);
  Stmt body = ComputeInto(out, [&](const std::vector<Expr>& index) {
    std::vector<Expr> src(rank);
    for (int k = 0; k < rank; ++k) src[perm[k]] = index[k];
    return Load(in, src);
  });
  return Kernel{std::move(name), {in, out}, {}, body};
}

StatusOr<Kernel> GatherKernel(std::string name, DType dtype, int rank, DType index_dtype,
                              int index_rank, int axis) {
  RETURN_IF_ERROR(CheckAxis(axis, rank, "gather " + name + ":"));
  if (index_rank < 0 || index_rank > kMaxRank)
    return InvalidArgument("gather " + name + ": bad index rank");
  Buffer data = Buffer::Param("data", dtype, rank);
  Buffer indices = Buffer::Param("indices", index_dtype, index_rank);
  Buffer out = Buffer::Param("out", dtype, index_rank + rank - 1);
  Stmt body = ComputeInto(out, [&](const std::vector<Expr>& index) {
    std::vector<Expr> at(index.begin() + axis, index.begin() + axis + index_rank);
    Expr n = DimOf(data, axis);
    Expr i = Cast(DType::kI64, Load(indices, at));
    i = Clamp(Select(Lt(i, IntImm(0)), i + n, i), n);
    std::vector<Expr> src(index.begin(), index.begin() + axis);
    src.push_back(i);
    src.insert(src.end(), index.begin() + axis + index_rank, index.end());
    return Load(data, src);
  });
  return Kernel{std::move(name), {data, indices, out}, {}, body};
}

Kernel SliceKernel(std::string name, DType dtype, int rank) {
  Buffer in = Buffer::Param("in", dtype, rank), out = Buffer::Param("out", dtype, rank);
  std::vector<Var> dims;
  for (int d = 0; d < rank; ++d) {
    dims.emplace_back("start" + std::to_string(d));
    dims.emplace_back("step" + std::to_string(d));
  }
  Stmt body = ComputeInto(out, [&](const std::vector<Expr>& index) {
    std::vector<Expr> src;
    for (int d = 0; d < rank; ++d) src.push_back(dims[2 * d] + index[d] * dims[2 * d + 1]);
    return Load(in, src);
  });
  return {std::move(name), {in, out}, dims, body};
}

Kernel PadKernel(std::string name, DType dtype, int rank, PadMode mode) {
  Buffer in = Buffer::Param("in", dtype, rank), value = Buffer::Param("value", dtype, 0);
  Buffer out = Buffer::Param("out", dtype, rank);
  std::vector<Var> pads;
  for (int d = 0; d < rank; ++d) pads.emplace_back("pad_begin" + std::to_string(d));
  Stmt pad = ComputeInto(out, [&](const std::vector<Expr>& index) {
    std::vector<Expr> src;
    Expr inside = IntImm(1, DType::kBool);
    for (int d = 0; d < rank; ++d) {
      Expr n = DimOf(in, d), i = index[d] - pads[d];
      if (mode == PadMode::kConstant) inside = And(inside, InBounds(i, n));
      if (mode == PadMode::kReflect) {
        i = Select(Lt(i, IntImm(0)), -i, i);
        i = Select(Ge(i, n), (n - 1) * 2 - i, i);
      }
      src.push_back(Clamp(i, n));  // loads stay in bounds even where `inside` is false
    }
    Expr x = Load(in, src);
    return mode == PadMode::kConstant ? Select(inside, x, Load(value, {})) : x;
  });
  // An empty input has nothing to load from: every output element is `value`.
  Expr empty = IntImm(0, DType::kBool);
  for (int d = 0; d < rank; ++d) empty = Or(empty, Eq(DimOf(in, d), IntImm(0)));
  Stmt fill = ComputeInto(out, [&](const std::vector<Expr>&) { return Load(value, {}); });
  return {std::move(name), {in, value, out}, pads, If(empty, fill, pad)};
}

StatusOr<Kernel> ConcatKernel(std::string name, DType dtype, int rank, int inputs, int axis) {
  RETURN_IF_ERROR(CheckAxis(axis, rank, "concat " + name + ":"));
  if (inputs < 1) return InvalidArgument("concat " + name + ": needs at least one input");
  Kernel kernel{std::move(name), {}, {}, Stmt()};
  for (int k = 0; k < inputs; ++k) {
    kernel.buffers.push_back(Buffer::Param("in" + std::to_string(k), dtype, rank));
  }
  Buffer out = Buffer::Param("out", dtype, rank);
  // One copy nest per input, each writing its slab of the output at a running offset.
  std::vector<Stmt> copies;
  Expr offset = IntImm(0);
  for (int k = 0; k < inputs; ++k) {
    const Buffer& in = kernel.buffers[k];
    Expr shift = offset;
    std::vector<Var> vars;
    std::vector<Expr> src, dst;
    for (int d = 0; d < rank; ++d) {
      vars.emplace_back("i" + std::to_string(d));
      src.push_back(vars.back());
      dst.push_back(d == axis ? vars.back() + shift : Expr(vars.back()));
    }
    Stmt copy = Store(out, dst, Load(in, src));
    for (int d = rank - 1; d >= 0; --d) {
      ForKind kind = d == rank - 1 ? ForKind::kVectorized
                     : d == 0      ? ForKind::kParallel
                                   : ForKind::kSerial;
      copy = For(vars[d], DimOf(in, d), kind, copy);  // loops run over the input's shape
    }
    copies.push_back(copy);
    offset = offset + DimOf(in, axis);
  }
  kernel.buffers.push_back(out);
  kernel.body = Seq(copies);
  return kernel;
}

StatusOr<Kernel> PoolKernel(std::string name, DType dtype, const PoolSpec& spec) {
  int spatial = static_cast<int>(spec.kernel.size());
  if (spatial < 1 || spatial + 2 > kMaxRank) return InvalidArgument("pool " + name + ": no window");
  for (int d = 0; d < spatial; ++d) {
    bool ok = spec.kernel[d] >= 1 &&
              (d >= static_cast<int>(spec.strides.size()) || spec.strides[d] >= 1) &&
              (d >= static_cast<int>(spec.dilations.size()) || spec.dilations[d] >= 1);
    if (!ok) return InvalidArgument("pool " + name + ": window, stride and dilation must be >= 1");
  }
  Buffer in = Buffer::Param("in", dtype, 2 + spatial),
         out = Buffer::Param("out", dtype, 2 + spatial);
  auto param = [](const std::vector<int64_t>& v, int d, int64_t fallback) {
    return d < static_cast<int>(v.size()) ? v[d] : fallback;
  };
  Stmt body = ComputeInto(out, [&](const std::vector<Expr>& index) {
    std::vector<IterVar> window;
    std::vector<Expr> src = {index[0], index[1]};
    Expr inside = IntImm(1, DType::kBool);
    int64_t window_size = 1;
    for (int d = 0; d < spatial; ++d) {
      Var k("k" + std::to_string(d));
      window.push_back({k, IntImm(spec.kernel[d])});
      window_size *= spec.kernel[d];
      Expr n = DimOf(in, 2 + d);
      Expr p = index[2 + d] * param(spec.strides, d, 1) - param(spec.pads_begin, d, 0) +
               k * param(spec.dilations, d, 1);
      inside = And(inside, InBounds(p, n));
      src.push_back(Clamp(p, n));
    }
    Expr x = Widen(Load(in, src));
    if (spec.max) {
      return ReduceMax(window,
                       Select(inside, x, ConstLike(x, -std::numeric_limits<double>::infinity())));
    }
    Expr sum = Sum(window, Select(inside, x, ConstLike(x, 0)));
    if (spec.count_include_pad) return sum / static_cast<double>(window_size);
    return sum / Sum(window, Select(inside, ConstLike(x, 1), ConstLike(x, 0)));
  });
  return Kernel{std::move(name), {in, out}, {}, body};
}

}  // namespace kiln::jit
