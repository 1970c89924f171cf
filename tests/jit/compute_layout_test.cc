// Tests for jit/compute_layout: transpose, gather, slice, pad, concat and pooling vs plain C++.
#define BOOST_TEST_MODULE compute_layout_test
#include <algorithm>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>

#include "jit/compute.h"
#include "tests/jit/test_util.h"

namespace kiln::jit {
namespace {

using testing::Call;
using testing::CompileOrFail;
using testing::TestBuffer;
namespace data = boost::unit_test::data;
using Shape = std::vector<int64_t>;

Shape Unflatten(int64_t flat, const Shape& shape) {
  Shape index(shape.size());
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

KernelFn CompileOk(const StatusOr<Kernel>& kernel) {
  BOOST_REQUIRE_MESSAGE(kernel.ok(), kernel.status().ToString());
  return CompileOrFail(*kernel);
}

struct TransposeCase {
  Shape shape;
  std::vector<int> perm;
};

std::ostream& operator<<(std::ostream& os, const TransposeCase& c) {
  for (int p : c.perm) os << p;
  return os;
}

const std::vector<TransposeCase> kTransposeCases = {
    {{3, 5}, {1, 0}},       {{2, 3, 17}, {0, 2, 1}},
    {{2, 3, 4}, {2, 0, 1}}, {{2, 3, 4, 5}, {3, 1, 0, 2}},
    {{1, 64}, {1, 0}},      {{0, 3}, {1, 0}},
};

BOOST_DATA_TEST_CASE(transpose_permutes_dims, data::make(kTransposeCases), c) {
  KernelFn fn = CompileOk(TransposeKernel("transpose", DType::kI16, c.perm));
  BOOST_REQUIRE(fn);
  Shape out_shape;
  for (int p : c.perm) out_shape.push_back(c.shape[p]);
  TestBuffer in(DType::kI16, c.shape), out(DType::kI16, out_shape);
  for (int64_t e = 0; e < in.size(); ++e) in.SetI(e, e);
  Call(fn, {&in, &out});
  for (int64_t e = 0; e < out.size(); ++e) {
    Shape oi = Unflatten(e, out_shape), ii(c.shape.size());
    for (size_t k = 0; k < c.perm.size(); ++k) ii[c.perm[k]] = oi[k];
    BOOST_TEST(out.IntAt(e) == in.GetInt(in.Offset(ii)), "e=" << e);
  }
}

BOOST_DATA_TEST_CASE(gather_along_each_axis_with_negative_and_clamped_indices,
                     data::make({0, 1, 2}) * data::make({DType::kI32, DType::kI64}), axis,
                     index_dtype) {
  const Shape data_shape = {5, 4, 3}, index_shape = {2, 3};
  KernelFn fn = CompileOk(GatherKernel("gather", DType::kF32, 3, index_dtype, 2, axis));
  BOOST_REQUIRE(fn);
  Shape out_shape(data_shape.begin(), data_shape.begin() + axis);
  out_shape.insert(out_shape.end(), index_shape.begin(), index_shape.end());
  out_shape.insert(out_shape.end(), data_shape.begin() + axis + 1, data_shape.end());
  TestBuffer values(DType::kF32, data_shape), indices(index_dtype, index_shape),
      out(DType::kF32, out_shape);
  for (int64_t e = 0; e < values.size(); ++e) values.Set(e, e);
  const std::vector<int64_t> picks = {0, -1, 2, 1, 99, -99};  // 99 / -99 clamp to the ends
  for (int64_t e = 0; e < 6; ++e) indices.SetI(e, picks[e]);
  Call(fn, {&values, &indices, &out});
  int64_t n = data_shape[axis];
  for (int64_t e = 0; e < out.size(); ++e) {
    Shape oi = Unflatten(e, out_shape);
    int64_t pick = indices.GetInt(indices.Offset({oi[axis], oi[axis + 1]}));
    if (pick < 0) pick += n;
    pick = std::clamp<int64_t>(pick, 0, n - 1);
    Shape src(oi.begin(), oi.begin() + axis);
    src.push_back(pick);
    src.insert(src.end(), oi.begin() + axis + 2, oi.end());
    BOOST_TEST(out.At(e) == values.GetDouble(values.Offset(src)), "e=" << e);
  }
}

BOOST_AUTO_TEST_CASE(slice_with_positive_and_negative_steps) {
  KernelFn fn = CompileOrFail(SliceKernel("slice", DType::kU8, 2));
  BOOST_REQUIRE(fn);
  TestBuffer in(DType::kU8, {6, 10}), out(DType::kU8, {3, 4});
  for (int64_t e = 0; e < 60; ++e) in.SetI(e, e);
  // rows 1, 3, 5; columns 9, 7, 5, 3
  Call(fn, {&in, &out}, {1, 2, 9, -2});
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t c = 0; c < 4; ++c)
      BOOST_TEST(out.IntAt(r * 4 + c) == (1 + 2 * r) * 10 + 9 - 2 * c);
  }
}

BOOST_DATA_TEST_CASE(pad_modes, data::make({PadMode::kConstant, PadMode::kEdge, PadMode::kReflect}),
                     mode) {
  KernelFn fn = CompileOrFail(PadKernel("pad", DType::kF64, 2, mode));
  BOOST_REQUIRE(fn);
  TestBuffer in(DType::kF64, {3, 4}), value(DType::kF64, {}), out(DType::kF64, {6, 9});
  for (int64_t e = 0; e < 12; ++e) in.Set(e, e);
  value.Set(0, -1.5);
  Call(fn, {&in, &value, &out}, {1, 2});  // pads: 1 row before (2 after), 2 cols before (3 after)
  auto source = [&](int64_t i, int64_t n) -> int64_t {
    if (mode == PadMode::kEdge) return std::clamp<int64_t>(i, 0, n - 1);
    if (mode == PadMode::kReflect) return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i);
    return i;
  };
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t c = 0; c < 9; ++c) {
      int64_t sr = source(r - 1, 3), sc = source(c - 2, 4);
      bool inside = sr >= 0 && sr < 3 && sc >= 0 && sc < 4;
      double want = inside ? in.At(sr * 4 + sc) : -1.5;
      BOOST_TEST(out.At(r * 9 + c) == want, "r=" << r << " c=" << c);
    }
  }
}

BOOST_AUTO_TEST_CASE(pad_of_an_empty_input_fills_the_value) {
  KernelFn fn = CompileOrFail(PadKernel("pad", DType::kI32, 1, PadMode::kEdge));
  BOOST_REQUIRE(fn);
  TestBuffer in(DType::kI32, {0}), value(DType::kI32, {}), out(DType::kI32, {5});
  value.SetI(0, 42);
  Call(fn, {&in, &value, &out}, {2});
  for (int64_t e = 0; e < 5; ++e) BOOST_TEST(out.IntAt(e) == 42);
}

BOOST_DATA_TEST_CASE(concat_along_each_axis, data::make({0, 1}), axis) {
  KernelFn fn = CompileOk(ConcatKernel("concat", DType::kBF16, 2, 3, axis));
  BOOST_REQUIRE(fn);
  std::vector<Shape> shapes = axis == 0 ? std::vector<Shape>{{2, 5}, {0, 5}, {3, 5}}
                                        : std::vector<Shape>{{4, 1}, {4, 7}, {4, 17}};
  std::vector<TestBuffer> ins;
  Shape out_shape = shapes[0];
  out_shape[axis] = 0;
  for (size_t k = 0; k < 3; ++k) {
    ins.emplace_back(DType::kBF16, shapes[k]);
    for (int64_t e = 0; e < ins[k].size(); ++e) ins[k].Set(e, 100.0 * k + e);
    out_shape[axis] += shapes[k][axis];
  }
  TestBuffer out(DType::kBF16, out_shape);
  Call(fn, {&ins[0], &ins[1], &ins[2], &out});
  for (int64_t e = 0; e < out.size(); ++e) {
    Shape oi = Unflatten(e, out_shape);
    size_t k = 0;
    while (oi[axis] >= shapes[k][axis]) oi[axis] -= shapes[k++][axis];
    BOOST_TEST(out.At(e) == ins[k].GetDouble(ins[k].Offset(oi)), "e=" << e);
  }
}

struct PoolCase {
  bool max;
  bool count_include_pad;
};

std::ostream& operator<<(std::ostream& os, const PoolCase& c) {
  return os << (c.max ? "max" : "avg") << (c.count_include_pad ? "_incl" : "");
}

BOOST_DATA_TEST_CASE(pool_2d_with_stride_pad_and_dilation,
                     data::make(std::vector<PoolCase>{
                         {true, false}, {false, false}, {false, true}}),
                     c) {
  PoolSpec spec;
  spec.max = c.max;
  spec.count_include_pad = c.count_include_pad;
  spec.kernel = {3, 2};
  spec.strides = {2, 1};
  spec.dilations = {1, 2};
  spec.pads_begin = {1, 1};
  KernelFn fn = CompileOk(PoolKernel("pool", DType::kF32, spec));
  BOOST_REQUIRE(fn);
  const Shape in_shape = {2, 3, 7, 6}, out_shape = {2, 3, 4, 5};
  TestBuffer in(DType::kF32, in_shape), out(DType::kF32, out_shape);
  for (int64_t e = 0; e < in.size(); ++e) in.Set(e, std::sin(0.37 * e) * 10);
  Call(fn, {&in, &out});
  for (int64_t e = 0; e < out.size(); ++e) {
    Shape o = Unflatten(e, out_shape);
    double best = -INFINITY, sum = 0;
    int count = 0;
    for (int64_t kh = 0; kh < 3; ++kh) {
      for (int64_t kw = 0; kw < 2; ++kw) {
        int64_t h = o[2] * 2 - 1 + kh, w = o[3] - 1 + 2 * kw;
        if (h < 0 || h >= 7 || w < 0 || w >= 6) continue;
        double x = in.GetDouble(in.Offset({o[0], o[1], h, w}));
        best = std::max(best, x);
        sum += x;
        ++count;
      }
    }
    double want = c.max ? best : sum / (c.count_include_pad ? 6 : count);
    BOOST_TEST(std::fabs(out.At(e) - want) <= 1e-5 * (1 + std::fabs(want)), "e=" << e);
  }
}

}  // namespace
}  // namespace kiln::jit
