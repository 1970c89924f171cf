// Resize's opset 18 attributes (antialias, axes, keep_aspect_ratio_policy) and Col2Im
// (compiler/lower/nn_resize.cc), run through the JIT and checked against C++ transcriptions of
// the ONNX reference implementation (onnx/reference/ops/op_resize.py, op_col2im.py).
#define BOOST_TEST_MODULE nn_resize_test
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "compiler/lower/lower.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::Compare;
using testing::Floats;
using testing::Generate;
using testing::Ints;
using testing::MakeTensor;
using testing::Model;
using testing::Nd;
using testing::RandomTensor;
using testing::Shape;
using testing::ToNd;

const LoweringTable& Table() { return testing::TableOf<AddNnLowerings>(); }

std::vector<TensorDataRef> Run(const std::string& model, const std::vector<TensorDataRef>& in) {
  StatusOr<std::vector<TensorDataRef>> out = testing::RunModel(model, in, Table());
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message() + "\nmodel:\n" + model);
  return *out;
}

// f32 interpolation: a few roundings of values no larger than the input's magnitude (2).
void Expect(const TensorData& actual, const Nd& expected, double tol = 1e-5) {
  std::string diff = Compare(actual, *MakeTensor(DType::kF32, expected.dims, expected.v), tol, tol);
  BOOST_TEST(diff.empty(), diff);
}

// ---- Resize: the ONNX reference's antialiased interpolation, one dim at a time ---------------

struct AntialiasRef {
  std::string mode = "linear", coord = "half_pixel";
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = true;  // false: the plain filter (support 1 or 2 at every scale)

  static double Keys(double x, double a) {
    x = std::fabs(x);
    if (x <= 1) return (a + 2) * x * x * x - (a + 3) * x * x + 1;
    if (x < 2) return a * x * x * x - 5 * a * x * x + 8 * a * x - 4 * a;
    return 0;
  }

  // (index clamped into [0, in), weight) of output position o; `out` is scale * in.
  std::vector<std::pair<int64_t, double>> Taps(int64_t o, int64_t in, double scale) const {
    double out = scale * in, x;
    if (coord == "asymmetric") {
      x = o / scale;
    } else if (coord == "align_corners") {
      x = out == 1 ? 0 : o * (in - 1.0) / (out - 1.0);
    } else if (coord == "pytorch_half_pixel") {
      x = out > 1 ? (o + 0.5) / scale - 0.5 : 0;  // as the spec's text says (op_resize.py: -0.5)
    } else {
      x = (o + 0.5) / scale - 0.5;
    }
    // ratio in (0, 1]: the reference prefers the pixel left of x.
    double base = std::floor(x), ratio = x - base;
    if (ratio == 0) {
      ratio = 1;
      base -= 1;
    }
    double s = antialias ? std::min(scale, 1.0) : 1.0;
    int64_t start = mode == "linear" ? static_cast<int64_t>(std::floor(-1 / s)) + 1
                                     : static_cast<int64_t>(std::floor(-2 / s)) + 1;
    int64_t end = mode == "linear" ? start + 2 - 2 * start : 2 - start;
    std::vector<std::pair<int64_t, double>> taps;
    double total = 0;
    for (int64_t k = start; k < end; ++k) {
      double arg = (k - ratio) * s;
      double w = mode == "linear" ? std::max(0.0, 1 - std::fabs(arg)) : Keys(arg, cubic_a);
      int64_t j = static_cast<int64_t>(base) + k;
      if (exclude_outside && (j < 0 || j >= in)) w = 0;
      total += w;
      taps.push_back({std::min<int64_t>(std::max<int64_t>(j, 0), in - 1), w});
    }
    for (auto& tap : taps) tap.second /= total;
    return taps;
  }

  Nd Run(const Nd& x, const std::vector<int64_t>& out, const std::vector<double>& scales) const {
    const size_t rank = x.dims.size();
    return Generate(out, [&](const std::vector<int64_t>& o) {
      std::vector<std::vector<std::pair<int64_t, double>>> taps(rank);
      for (size_t d = 0; d < rank; ++d) {
        taps[d] = scales[d] == 1 && out[d] == x.dims[d]
                      ? std::vector<std::pair<int64_t, double>>{{o[d], 1.0}}
                      : Taps(o[d], x.dims[d], scales[d]);
      }
      double sum = 0;
      std::vector<int64_t> idx(rank);
      std::function<void(size_t, double)> rec = [&](size_t d, double w) {
        if (d == rank) {
          sum += w * x.at(idx);
          return;
        }
        for (const auto& [i, tw] : taps[d]) {
          idx[d] = i;
          rec(d + 1, w * tw);
        }
      };
      rec(0, 1);
      return sum;
    });
  }
};

std::string Attrs(const AntialiasRef& r, const std::string& extra = "") {
  return "mode = \"" + r.mode + "\", coordinate_transformation_mode = \"" + r.coord +
         "\", antialias = 1" + (r.exclude_outside ? ", exclude_outside = 1" : "") + extra;
}

// f32 scales as ONNX stores them.
std::vector<double> F32(const std::vector<double>& v) {
  std::vector<double> r;
  for (double x : v) r.push_back(static_cast<float>(x));
  return r;
}

BOOST_AUTO_TEST_CASE(AntialiasDownscalesWithAWiderFilter) {
  struct Case {
    std::vector<int64_t> dims;
    std::vector<double> scales;
  };
  const Case cases[] = {{{1, 2, 9, 11}, {1, 1, 0.5, 0.6}},
                        {{1, 1, 10, 7}, {1, 1, 0.3, 1.75}},  // down one dim, up the other
                        {{2, 13}, {1, 0.2}}};
  for (const char* mode : {"linear", "cubic"}) {
    for (const char* coord : {"half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"}) {
      for (bool exclude : {false, true}) {
        AntialiasRef ref;
        ref.mode = mode;
        ref.coord = coord;
        ref.exclude_outside = exclude;
        for (const Case& c : cases) {
          BOOST_TEST_MESSAGE(mode << " " << coord << " exclude " << exclude << " "
                                  << Shape(c.dims));
          std::vector<double> scales = F32(c.scales);
          std::vector<int64_t> out;
          for (size_t d = 0; d < c.dims.size(); ++d)
            out.push_back(static_cast<int64_t>(std::floor(c.dims[d] * scales[d])));
          std::string rank = std::to_string(c.dims.size());
          std::string model =
              Model(18, "(float" + Shape(c.dims) + " x, float[" + rank + "] s) => (y)",
                    "y = Resize <" + Attrs(ref) + "> (x, , s)");
          TensorDataRef x = RandomTensor(DType::kF32, c.dims, -2, 2, 7);
          Nd expected = ref.Run(ToNd(*x), out, scales);
          // Scales as a run-time input (window length computed in the kernel) and as a
          // constant (a constant trip count).
          std::vector<TensorDataRef> runtime = Run(
              model, {x, MakeTensor(DType::kF32, {static_cast<int64_t>(scales.size())}, c.scales)});
          Expect(*runtime[0], expected);
          std::string fixed = Model(18,
                                    "(float" + Shape(c.dims) + " x) => (y) <float[" + rank +
                                        "] s = {" + Floats(c.scales) + "}>",
                                    "y = Resize <" + Attrs(ref) + "> (x, , s)");
          Expect(*Run(fixed, {x})[0], expected);
        }
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(AntialiasWithConstantScalesAndAxes) {
  AntialiasRef ref;
  ref.mode = "cubic";
  TensorDataRef x = RandomTensor(DType::kF32, {1, 9, 10, 3}, -2, 2, 8);
  // NHWC: axes name H and W; scales has one value per axis.
  std::vector<TensorDataRef> out =
      Run(Model(18, "(float[1, 9, 10, 3] x) => (y) <float[2] s = {0.45, 0.6}>",
                "y = Resize <" + Attrs(ref, ", axes = [1, -2]") + "> (x, , s)"),
          {x});
  Expect(*out[0], ref.Run(ToNd(*x), {1, 4, 6, 3}, F32({1, 0.45, 0.6, 1})));
}

BOOST_AUTO_TEST_CASE(AxesResizeOnlyTheNamedDims) {
  AntialiasRef linear;
  linear.antialias = false;
  TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 5, 6}, -2, 2, 9);
  std::vector<TensorDataRef> out = Run(
      Model(18, "(float[2, 3, 5, 6] x) => (y, z) <float[2] s = {2.0, 1.5}, int64[2] n = {7, 4}>",
            "y = Resize <mode = \"linear\", axes = [3, 2]> (x, , s)\n"
            " z = Resize <mode = \"linear\", axes = [2, 3]> (x, , , n)"),
      {x});
  Expect(*out[0], linear.Run(ToNd(*x), {2, 3, 7, 12}, {1, 1, 1.5, 2}));
  Expect(*out[1], linear.Run(ToNd(*x), {2, 3, 7, 4}, {1, 1, 7.0 / 5, 4.0 / 6}));
}

// Bilinear resizes of H and W run from per-chunk tap tables (nn_resize.cc, TabledLinearBody):
// outputs taller than one block of rows (64) and wider than one table (1024 columns), with
// partial last blocks, sizes known at compile time or only at run time, and uint8 (rounded).
BOOST_AUTO_TEST_CASE(LinearUpsamplingAcrossTapTables) {
  AntialiasRef linear;
  linear.antialias = false;
  const std::vector<int64_t> in = {1, 2, 3, 9}, out = {1, 2, 131, 1030};
  const std::vector<double> scales = {1, 1, 131.0 / 3, 1030.0 / 9};
  TensorDataRef x = RandomTensor(DType::kF32, in, -2, 2, 12);
  for (const char* coord : {"half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"}) {
    BOOST_TEST_MESSAGE(coord);
    linear.coord = coord;
    std::string attrs = "mode = \"linear\", coordinate_transformation_mode = \"" +
                        std::string(coord) + "\"";
    Nd expected = linear.Run(ToNd(*x), out, scales);
    std::string fixed = Model(13, "(float[1, 2, 3, 9] x) => (y) <int64[4] n = {1, 2, 131, 1030}>",
                              "y = Resize <" + attrs + "> (x, , , n)");
    Expect(*Run(fixed, {x})[0], expected);
    std::string dynamic = Model(13, "(float[N, C, H, W] x, int64[4] n) => (y)",
                                "y = Resize <" + attrs + "> (x, , , n)");
    Expect(*Run(dynamic, {x, MakeTensor(DType::kI64, {4}, {1, 2, 131, 1030})})[0], expected);
  }
  // uint8 rounds the interpolated value (half to even) and keeps it in range.
  linear.coord = "half_pixel";
  TensorDataRef q = RandomTensor(DType::kU8, {2, 1, 4, 3}, 0, 256, 13);
  Nd ref = linear.Run(ToNd(*q), {2, 1, 70, 5}, {1, 1, 70.0 / 4, 5.0 / 3});
  for (double& v : ref.v) v = std::nearbyint(v);
  std::vector<TensorDataRef> got =
      Run(Model(13, "(uint8[2, 1, 4, 3] q) => (y) <int64[4] n = {2, 1, 70, 5}>",
                "y = Resize <mode = \"linear\"> (q, , , n)"),
          {q});
  std::string diff = Compare(*got[0], *MakeTensor(DType::kU8, ref.dims, ref.v), 0, 0);
  BOOST_TEST(diff.empty(), diff);
}

BOOST_AUTO_TEST_CASE(KeepAspectRatioPolicies) {
  AntialiasRef linear;
  linear.antialias = false;
  TensorDataRef x = RandomTensor(DType::kF32, {1, 2, 6, 9}, -2, 2, 10);
  // not_larger: min(4/6, 4/9) = 4/9 -> [round(2.67), 4]; not_smaller: max(4/6, 5/9) = 2/3 ->
  // [4, 6]. With no axes the policy takes every dim: min(1, 1, 10/6, 27/9) = 1.
  std::string model = Model(
      18,
      "(float[1, 2, 6, 9] x) => (a, b, c) <int64[2] n = {4, 4}, int64[2] m = {4, 5}, "
      "int64[4] all = {1, 2, 10, 27}>",
      "a = Resize <mode = \"linear\", axes = [2, 3], keep_aspect_ratio_policy = \"not_larger\"> "
      "(x, , , n)\n"
      " b = Resize <mode = \"linear\", axes = [2, 3], keep_aspect_ratio_policy = \"not_smaller\">"
      " (x, , , m)\n"
      " c = Resize <mode = \"linear\", keep_aspect_ratio_policy = \"not_larger\"> (x, , , all)");
  std::vector<TensorDataRef> out = Run(model, {x});
  Expect(*out[0], linear.Run(ToNd(*x), {1, 2, 3, 4}, {1, 1, 4.0 / 9, 4.0 / 9}));
  Expect(*out[1], linear.Run(ToNd(*x), {1, 2, 4, 6}, {1, 1, 4.0 / 6, 4.0 / 6}));
  Expect(*out[2], ToNd(*x), 0);
  // Sizes at run time and a symbolic dim: the shape function applies the policy.
  std::string dynamic = Model(
      18, "(float[1, 2, H, 9] x, int64[2] n) => (y)",
      "y = Resize <mode = \"linear\", axes = [2, 3], keep_aspect_ratio_policy = \"not_smaller\", "
      "antialias = 1> (x, , , n)");
  for (int64_t h : {6, 11}) {
    TensorDataRef xh = RandomTensor(DType::kF32, {1, 2, h, 9}, -2, 2, 11);
    double scale = std::max(3.0 / h, 4.0 / 9);
    std::vector<int64_t> shape = {1, 2, static_cast<int64_t>(std::floor(scale * h + 0.5)),
                                  static_cast<int64_t>(std::floor(scale * 9 + 0.5))};
    std::vector<TensorDataRef> y = Run(dynamic, {xh, MakeTensor(DType::kI64, {2}, {3, 4})});
    AntialiasRef antialiased;
    Expect(*y[0], antialiased.Run(ToNd(*xh), shape, {1, 1, scale, scale}));
  }
}

BOOST_AUTO_TEST_CASE(BadResizeAttributesAreErrors) {
  struct Case {
    std::string attrs, message;
  };
  const Case cases[] = {
      {"antialias = 1", "applies to modes linear and cubic only"},
      {"keep_aspect_ratio_policy = \"fit\"", "unknown value 'fit'"},
      {"axes = [2, -2]", "repeats a dim"},
      {"axes = [4]", "out of range"},
  };
  for (const Case& c : cases) {
    StatusOr<std::vector<TensorDataRef>> r =
        testing::RunModel(Model(18, "(float[1,1,4,4] x) => (y) <float[2] s = {2.0, 2.0}>",
                                "y = Resize <" + c.attrs + "> (x, , s)"),
                          {RandomTensor(DType::kF32, {1, 1, 4, 4}, -1, 1, 3)}, Table());
    BOOST_REQUIRE(!r.ok());
    BOOST_TEST(r.status().code() == StatusCode::kInvalidFormat);
    BOOST_TEST(r.status().message().find(c.message) != std::string::npos, r.status().message());
  }
}

// ---- Col2Im ----------------------------------------------------------------------------------

// The reference scatters every column into the image, adding where blocks overlap.
Nd Col2ImRef(const Nd& x, const std::vector<int64_t>& image, const std::vector<int64_t>& block,
             const std::vector<int64_t>& dil, const std::vector<int64_t>& pads,
             const std::vector<int64_t>& strides) {
  const size_t s = image.size();
  int64_t block_size = 1;
  std::vector<int64_t> positions(s);
  for (size_t d = 0; d < s; ++d) {
    block_size *= block[d];
    positions[d] =
        (image[d] + pads[d] + pads[d + s] - dil[d] * (block[d] - 1) - 1) / strides[d] + 1;
  }
  std::vector<int64_t> dims = {x.dims[0], x.dims[1] / block_size};
  dims.insert(dims.end(), image.begin(), image.end());
  Nd y = Generate(dims, [](const std::vector<int64_t>&) { return 0.0; });
  for (int64_t n = 0; n < x.dims[0]; ++n) {
    for (int64_t row = 0; row < x.dims[1]; ++row) {
      for (int64_t col = 0; col < x.dims[2]; ++col) {
        std::vector<int64_t> k = testing::Unravel(row % block_size, block);
        std::vector<int64_t> l = testing::Unravel(col, positions);
        std::vector<int64_t> at = {n, row / block_size};
        bool inside = true;
        for (size_t d = 0; d < s; ++d) {
          int64_t p = l[d] * strides[d] - pads[d] + k[d] * dil[d];
          inside = inside && p >= 0 && p < image[d];
          at.push_back(p);
        }
        if (inside) y[at] += x.at({n, row, col});
      }
    }
  }
  return y;
}

BOOST_AUTO_TEST_CASE(Col2ImSumsOverlappingBlocks) {
  struct Case {
    std::vector<int64_t> x, image, block, dil, pads, strides;
  };
  const Case cases[] = {
      {{1, 5, 5}, {5, 5}, {1, 5}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      {{2, 27, 6}, {4, 5}, {3, 3}, {1, 1}, {0, 0, 0, 0}, {1, 1}},
      {{2, 12, 9}, {6, 7}, {2, 3}, {2, 1}, {1, 0, 1, 2}, {2, 3}},
      {{1, 8, 24}, {3, 4, 5}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {1, 1, 1}},
      {{3, 6, 3}, {9}, {3}, {2}, {1, 2}, {3}},  // 1-D
  };
  for (const Case& c : cases) {
    BOOST_TEST_MESSAGE("Col2Im " << Shape(c.x) << " image " << Shape(c.image));
    std::string s = std::to_string(c.image.size());
    std::string attrs = "dilations = [" + Ints(c.dil) + "], pads = [" + Ints(c.pads) +
                        "], strides = [" + Ints(c.strides) + "]";
    TensorDataRef x = RandomTensor(DType::kF32, c.x, -2, 2, 20);
    Nd expected = Col2ImRef(ToNd(*x), c.image, c.block, c.dil, c.pads, c.strides);
    // Constant image and block shapes, then both only known at run time.
    std::string fixed =
        Model(18,
              "(float" + Shape(c.x) + " x) => (y) <int64[" + s + "] i = {" + Ints(c.image) +
                  "}, int64[" + s + "] b = {" + Ints(c.block) + "}>",
              "y = Col2Im <" + attrs + "> (x, i, b)");
    Expect(*Run(fixed, {x})[0], expected);
    std::string dynamic =
        Model(18, "(float[N, C, L] x, int64[" + s + "] i, int64[" + s + "] b) => (y)",
              "y = Col2Im <" + attrs + "> (x, i, b)");
    auto ints = [](const std::vector<int64_t>& v) {
      return MakeTensor(DType::kI64, {static_cast<int64_t>(v.size())},
                        std::vector<double>(v.begin(), v.end()));
    };
    Expect(*Run(dynamic, {x, ints(c.image), ints(c.block)})[0], expected);
  }
}

BOOST_AUTO_TEST_CASE(Col2ImRejectsInconsistentShapes) {
  // 4 x 5 with 3 x 3 blocks has 6 positions, not 7.
  StatusOr<std::vector<TensorDataRef>> r = testing::RunModel(
      Model(18, "(float[1, 9, 7] x) => (y) <int64[2] i = {4, 5}, int64[2] b = {3, 3}>",
            "y = Col2Im(x, i, b)"),
      {RandomTensor(DType::kF32, {1, 9, 7}, -1, 1, 21)}, Table());
  BOOST_REQUIRE(!r.ok());
  BOOST_TEST(r.status().message().find("block count") != std::string::npos, r.status().message());
  // Known only at run time: the shape function refuses the allocation.
  r = testing::RunModel(
      Model(18, "(float[1, 9, 7] x, int64[2] i) => (y) <int64[2] b = {3, 3}>",
            "y = Col2Im(x, i, b)"),
      {RandomTensor(DType::kF32, {1, 9, 7}, -1, 1, 22), MakeTensor(DType::kI64, {2}, {4, 5})},
      Table());
  BOOST_REQUIRE(!r.ok());
}

}  // namespace
}  // namespace kiln::compiler
