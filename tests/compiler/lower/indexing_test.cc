// Known-answer tests of the indexing lowerings (compiler/lower/indexing.cc): gathers, scatters,
// OneHot, NonZero, TopK, CumSum, Trilu, Compress, ReverseSequence, each against a plain C++
// reference, out-of-range indices (an error naming the node, index and bound), run-time values
// that change output shapes, and symbolic dims run at two sizes.
#define BOOST_TEST_MODULE indexing_test
#include <algorithm>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "compiler/lower/lower.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler {
namespace {

using testing::Compare;
using testing::Count;
using testing::F32;
using testing::Generate;
using testing::I64;
using testing::MakeTensor;
using testing::Model;
using testing::Nd;
using testing::RandomTensor;
using testing::Ravel;
using testing::ToNd;
using testing::Unravel;

const LoweringTable& Table() {
  static const LoweringTable* table = [] {
    auto* t = new LoweringTable();
    AddIndexingLowerings(*t);
    return t;
  }();
  return *table;
}

// `inits`: initializers in ONNX text syntax ("int64[1] k = {2}"); this family has no Constant.
std::vector<TensorDataRef> Run(const std::string& text, const std::vector<TensorDataRef>& in) {
  StatusOr<std::vector<TensorDataRef>> r = testing::RunModel(text, in, Table());
  BOOST_REQUIRE_MESSAGE(r.ok(), r.status().message() + "\nmodel:\n" + text);
  return *r;
}


void Expect(const TensorDataRef& got, DType dtype, const Nd& want, double tol = 0) {
  TensorDataRef e = MakeTensor(dtype, want.dims, want.v);
  std::string m = Compare(*got, *e, 0, tol);
  BOOST_CHECK_MESSAGE(m.empty(), m);
}

std::string Dims(const std::vector<int64_t>& d) {
  std::string s;
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s;
}

// Negative indices count from the end; anything else out of range is an error
// (out_of_range_indices_are_errors), so the references only see valid ones.
int64_t WrapIndex(double raw, int64_t n) {
  auto i = static_cast<int64_t>(raw);
  if (i < 0) i += n;
  BOOST_REQUIRE(i >= 0 && i < n);
  return i;
}

// ---- Gather, GatherElements, GatherND --------------------------------------------------------

Nd GatherRef(const Nd& x, const Nd& idx, int axis) {
  std::vector<int64_t> dims(x.dims.begin(), x.dims.begin() + axis);
  dims.insert(dims.end(), idx.dims.begin(), idx.dims.end());
  dims.insert(dims.end(), x.dims.begin() + axis + 1, x.dims.end());
  int q = static_cast<int>(idx.dims.size());
  return Generate(dims, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> at(o.begin() + axis, o.begin() + axis + q);
    std::vector<int64_t> src(o.begin(), o.begin() + axis);
    src.push_back(WrapIndex(idx.at(at), x.dims[axis]));
    src.insert(src.end(), o.begin() + axis + q, o.end());
    return x.at(src);
  });
}

BOOST_AUTO_TEST_CASE(gather_axes_index_types) {
  TensorDataRef x = RandomTensor(DType::kF32, {5, 4, 3}, -1, 1, 1);
  Nd xr = ToNd(x);
  for (int axis : {0, 1, 2, -1}) {
    int a = axis < 0 ? axis + 3 : axis;
    int64_t n = xr.dims[a];
    for (DType it : {DType::kI64, DType::kI32}) {
      const char* tn = it == DType::kI64 ? "int64" : "int32";
      // Negative and positive indices, both ends of the range.
      TensorDataRef idx =
          MakeTensor(it, {2, 3}, {0, double(-n), double(n - 1), -1, 1, double(1 - n)});
      std::vector<TensorDataRef> out =
          Run(Model(13, "float[5,4,3] x, " + std::string(tn) + "[2,3] i", "y",
                    "y = Gather<axis = " + std::to_string(axis) + ">(x, i)"),
              {x, idx});
      Expect(out[0], DType::kF32, GatherRef(xr, ToNd(idx), a));
    }
  }
  // Scalar index; int64 data.
  TensorDataRef xi = RandomTensor(DType::kI64, {6, 2}, -50, 50, 2);
  Expect(Run(Model(13, "int64[6,2] x, int64 i", "y", "y = Gather(x, i)"), {xi, I64({}, {-2})})[0],
         DType::kI64, GatherRef(ToNd(xi), {{}, {-2}}, 0));
  // Symbolic dims at two sizes (an embedding lookup).
  std::string text = Model(13, "float[V, 8] w, int64[B, S] i", "y", "y = Gather(w, i)");
  for (auto [b, s] : {std::pair<int64_t, int64_t>{1, 5}, {3, 2}}) {
    TensorDataRef w = RandomTensor(DType::kF32, {11, 8}, -1, 1, 3);
    TensorDataRef i = RandomTensor(DType::kI64, {b, s}, -11, 11, 4);
    Expect(Run(text, {w, i})[0], DType::kF32, GatherRef(ToNd(w), ToNd(i), 0));
  }
}

BOOST_AUTO_TEST_CASE(gather_elements) {
  TensorDataRef x = RandomTensor(DType::kF32, {4, 5}, -1, 1, 5);
  Nd xr = ToNd(x);
  for (int axis : {0, 1, -1, -2}) {
    int a = axis < 0 ? axis + 2 : axis;
    int64_t n = xr.dims[a];
    TensorDataRef idx = RandomTensor(DType::kI64, {3, 5}, -n, n, 6 + axis);  // some negative
    Nd ir = ToNd(idx);
    Nd want = Generate(ir.dims, [&](std::vector<int64_t> o) {
      o[a] = WrapIndex(ir.at(o), xr.dims[a]);
      return xr.at(o);
    });
    Expect(Run(Model(13, "float[4,5] x, int64[3,5] i", "y",
                     "y = GatherElements<axis = " + std::to_string(axis) + ">(x, i)"),
               {x, idx})[0],
           DType::kF32, want);
  }
}

BOOST_AUTO_TEST_CASE(gather_nd) {
  TensorDataRef x = RandomTensor(DType::kF32, {3, 4, 5}, -1, 1, 7);
  Nd xr = ToNd(x);
  struct Case {
    int batch;
    std::vector<int64_t> idims;
  } cases[] = {{0, {2, 1}}, {0, {2, 2, 2}}, {0, {4, 3}}, {1, {3, 1}}, {1, {3, 2, 2}}};
  for (const Case& c : cases) {
    TensorDataRef idx = RandomTensor(DType::kI64, c.idims, -3, 3, 8);  // in range of every dim
    Nd ir = ToNd(idx);
    int m = static_cast<int>(c.idims.size());
    int q = static_cast<int>(c.idims.back());
    std::vector<int64_t> dims(c.idims.begin(), c.idims.end() - 1);
    dims.insert(dims.end(), xr.dims.begin() + c.batch + q, xr.dims.end());
    Nd want = Generate(dims, [&](const std::vector<int64_t>& o) {
      std::vector<int64_t> src(o.begin(), o.begin() + c.batch);
      std::vector<int64_t> at(o.begin(), o.begin() + (m - 1));
      at.push_back(0);
      for (int k = 0; k < q; ++k) {
        at.back() = k;
        src.push_back(WrapIndex(ir.at(at), xr.dims[c.batch + k]));
      }
      src.insert(src.end(), o.begin() + (m - 1), o.end());
      return xr.at(src);
    });
    Expect(Run(Model(13, "float[3,4,5] x, int64[" + Dims(c.idims) + "] i", "y",
                     "y = GatherND<batch_dims = " + std::to_string(c.batch) + ">(x, i)"),
               {x, idx})[0],
           DType::kF32, want);
  }
}

// An index out of range even after counting negative ones from the end fails the node with
// ONNX Runtime's message: the index as given and the inclusive range it had to be in.
void ExpectIndexError(const std::string& text, const std::vector<TensorDataRef>& in,
                      const std::string& op, int64_t idx, int64_t bound) {
  StatusOr<std::vector<TensorDataRef>> r = testing::RunModel(text, in, Table());
  BOOST_REQUIRE_MESSAGE(!r.ok(), op + " with index " + std::to_string(idx) + " succeeded");
  BOOST_TEST(r.status().code() == StatusCode::kInvalidArgument);
  std::string want = "(" + op + "): indices element out of data bounds, idx=" +
                     std::to_string(idx) + " must be within the inclusive range [" +
                     std::to_string(-bound) + "," + std::to_string(bound - 1) + "]";
  BOOST_TEST(r.status().message().find(want) != std::string::npos,
             r.status().message() << "\nwanted: " << want);
}

BOOST_AUTO_TEST_CASE(out_of_range_indices_are_errors) {
  TensorDataRef x = RandomTensor(DType::kF32, {5, 4}, -1, 1, 80);
  std::string gather = Model(13, "float[5,4] x, int64[2] i", "y", "y = Gather(x, i)");
  ExpectIndexError(gather, {x, I64({2}, {0, 100000})}, "Gather", 100000, 5);
  ExpectIndexError(gather, {x, I64({2}, {-6, 0})}, "Gather", -6, 5);
  ExpectIndexError(gather, {x, I64({2}, {5, 0})}, "Gather", 5, 5);
  ExpectIndexError(gather, {x, I64({2}, {int64_t{1} << 62, 0})}, "Gather", int64_t{1} << 62, 5);
  ExpectIndexError(Model(13, "float[5,4] x, int32[3] i", "y", "y = Gather<axis = 1>(x, i)"),
                   {x, MakeTensor(DType::kI32, {3}, {0, 3, -5})}, "Gather", -5, 4);
  // Symbolic dims (the bound comes from the run-time dim) and an embedding-sized table.
  ExpectIndexError(Model(13, "float[V, 4] x, int64[B, S] i", "y", "y = Gather(x, i)"),
                   {RandomTensor(DType::kF32, {64, 4}, -1, 1, 81),
                    I64({2, 3}, {1, 2, 3, 4, 64, 5})},
                   "Gather", 64, 64);
  ExpectIndexError(Model(13, "float[5,4] x, int64[2,4] i", "y", "y = GatherElements(x, i)"),
                   {x, I64({2, 4}, {0, 1, 2, 3, 4, 5, 0, 1})}, "GatherElements", 5, 5);
  ExpectIndexError(Model(13, "float[5,4] x, int64[2,2] i", "y", "y = GatherND(x, i)"),
                   {x, I64({2, 2}, {0, 1, 2, -5})}, "GatherND", -5, 4);
  ExpectIndexError(Model(16, "float[5,4] x, int64[1,2] i, float[1,2] u", "y",
                         "y = ScatterElements<axis = 1>(x, i, u)"),
                   {x, I64({1, 2}, {3, 4}), F32({1, 2}, {1, 2})}, "ScatterElements", 4, 4);
  ExpectIndexError(Model(10, "float[5,4] x, int64[1,2] i, float[1,2] u", "y",
                         "y = Scatter<axis = 0>(x, i, u)"),
                   {x, I64({1, 2}, {-7, 0}), F32({1, 2}, {1, 2})}, "Scatter", -7, 5);
  ExpectIndexError(Model(16, "float[5,4] x, int64[2,1] i, float[2,4] u", "y",
                         "y = ScatterND(x, i, u)"),
                   {x, I64({2, 1}, {1, 9}), RandomTensor(DType::kF32, {2, 4}, -1, 1, 82)},
                   "ScatterND", 9, 5);
  // In range, the same models run.
  BOOST_TEST(testing::RunModel(gather, {x, I64({2}, {-5, 4})}, Table()).ok());
}

// ---- Scatter ---------------------------------------------------------------------------------

double Combine(const std::string& r, double old, double u) {
  if (r == "add") return old + u;
  if (r == "mul") return old * u;
  return u;
}

BOOST_AUTO_TEST_CASE(scatter_elements_reductions) {
  TensorDataRef x = RandomTensor(DType::kF32, {4, 5}, -2, 2, 9);
  Nd xr = ToNd(x);
  for (std::string r : {"none", "add", "mul"}) {
    for (int axis : {0, 1, -1}) {
      int a = axis < 0 ? axis + 2 : axis;
      // Duplicates and negative entries included.
      int64_t n = xr.dims[a];
      TensorDataRef idx = RandomTensor(DType::kI64, {3, 4}, -n, n, 10 + a);
      TensorDataRef upd = RandomTensor(DType::kF32, {3, 4}, -2, 2, 11);
      Nd ir = ToNd(idx), ur = ToNd(upd), want = xr;
      for (int64_t f = 0; f < Count(ir.dims); ++f) {
        std::vector<int64_t> o = Unravel(f, ir.dims);
        o[a] = WrapIndex(ir.v[f], xr.dims[a]);
        double& dst = want.v[Ravel(o, xr.dims)];
        dst = Combine(r, dst, ur.v[f]);
      }
      std::vector<TensorDataRef> out =
          Run(Model(16, "float[4,5] x, int64[3,4] i, float[3,4] u", "y",
                    "y = ScatterElements<axis = " + std::to_string(axis) + ", reduction = \"" + r +
                        "\">(x, i, u)"),
              {x, idx, upd});
      Expect(out[0], DType::kF32, want, 1e-5);
    }
  }
  // Scatter (opset 9-10) is ScatterElements without reduction.
  TensorDataRef idx = I64({1, 2}, {3, -1});
  TensorDataRef upd = F32({1, 2}, {10, 20});
  Nd want = xr;
  want.v[Ravel({3, 0}, xr.dims)] = 10;
  want.v[Ravel({3, 1}, xr.dims)] = 20;
  Expect(Run(Model(10, "float[4,5] x, int64[1,2] i, float[1,2] u", "y",
                   "y = Scatter<axis = 0>(x, i, u)"),
             {x, idx, upd})[0],
         DType::kF32, want);
}

BOOST_AUTO_TEST_CASE(scatter_nd_reductions) {
  TensorDataRef x = RandomTensor(DType::kF32, {4, 3, 2}, -2, 2, 12);
  Nd xr = ToNd(x);
  struct Case {
    std::vector<int64_t> idims;
    std::vector<double> idx;
  } cases[] = {{{3, 1}, {1, -1, 1}},                    // rows, with a duplicate
               {{2, 2, 2}, {0, 1, 3, -3, 0, 1, -4, 0}},  // pairs
               {{2, 3}, {1, 2, 1, -4, 0, -2}}};         // full elements
  for (std::string r : {"none", "add", "mul"}) {
    for (const Case& c : cases) {
      int q = static_cast<int>(c.idims.back());
      std::vector<int64_t> tuples(c.idims.begin(), c.idims.end() - 1);
      std::vector<int64_t> udims = tuples;
      udims.insert(udims.end(), xr.dims.begin() + q, xr.dims.end());
      TensorDataRef idx = I64(c.idims, c.idx);
      TensorDataRef upd = RandomTensor(DType::kF32, udims, -2, 2, 13);
      Nd ur = ToNd(upd), want = xr;
      int64_t slab = Count(std::vector<int64_t>(xr.dims.begin() + q, xr.dims.end()));
      for (int64_t t = 0; t < Count(tuples); ++t) {
        std::vector<int64_t> at;
        for (int k = 0; k < q; ++k) at.push_back(WrapIndex(c.idx[t * q + k], xr.dims[k]));
        at.resize(xr.dims.size(), 0);
        int64_t base = Ravel(at, xr.dims);
        for (int64_t e = 0; e < slab; ++e)
          want.v[base + e] = Combine(r, want.v[base + e], ur.v[t * slab + e]);
      }
      std::vector<TensorDataRef> out = Run(
          Model(16, "float[4,3,2] x, int64[" + Dims(c.idims) + "] i, float[" + Dims(udims) + "] u",
                "y", "y = ScatterND<reduction = \"" + r + "\">(x, i, u)"),
          {x, idx, upd});
      Expect(out[0], DType::kF32, want, 1e-5);
    }
  }
}

// ---- OneHot ----------------------------------------------------------------------------------

Nd OneHotRef(const Nd& idx, int64_t depth, int axis, double off, double on) {
  std::vector<int64_t> dims = idx.dims;
  dims.insert(dims.begin() + axis, depth);
  return Generate(dims, [&](std::vector<int64_t> o) {
    int64_t j = o[axis];
    o.erase(o.begin() + axis);
    auto i = static_cast<int64_t>(idx.at(o));
    if (i < 0) i += depth;
    return i == j ? on : off;
  });
}

BOOST_AUTO_TEST_CASE(one_hot_axes_and_runtime_depth) {
  TensorDataRef idx = I64({2, 3}, {0, 2, -1, 4, -5, 9});  // 9 and -5 out of range for depth 4
  Nd ir = ToNd(idx);
  for (int axis : {-1, 0, 1, 2}) {
    std::vector<TensorDataRef> out = Run(
        Model(11, "int64[2,3] i", "y", "y = OneHot<axis = " + std::to_string(axis) + ">(i, d, v)",
              "int64 d = {4}, float[2] v = {-1, 3}"),
        {idx});
    Expect(out[0], DType::kF32, OneHotRef(ir, 4, axis < 0 ? axis + 3 : axis, -1, 3));
  }
  // Depth at run time (a shape function): two depths in one test; float indices and depth.
  std::string text =
      Model(11, "float[2,3] i, float[1] d, int64[2] v", "y", "y = OneHot<axis = 1>(i, d, v)");
  TensorDataRef fi = F32({2, 3}, {0, 1.7, -1, 2, 5, -3});
  for (int64_t depth : {3, 6}) {
    Expect(Run(text, {fi, F32({1}, {double(depth)}), I64({2}, {0, 1})})[0], DType::kI64,
           OneHotRef(ToNd(fi), depth, 1, 0, 1));
  }
  BOOST_TEST(!testing::RunModel(text, {fi, F32({1}, {0}), I64({2}, {0, 1})}, Table()).ok());
}

// ---- NonZero, Compress -----------------------------------------------------------------------

Nd NonZeroRef(const Nd& x) {
  std::vector<std::vector<int64_t>> hits;
  for (int64_t f = 0; f < Count(x.dims); ++f)
    if (x.v[f] != 0) hits.push_back(Unravel(f, x.dims));
  auto rank = static_cast<int64_t>(x.dims.size());
  auto n = static_cast<int64_t>(hits.size());
  return Generate({rank, n},
                  [&](const std::vector<int64_t>& o) { return double(hits[o[1]][o[0]]); });
}

BOOST_AUTO_TEST_CASE(non_zero_two_inputs) {
  std::string text = Model(13, "float[3,4] x", "y", "y = NonZero(x)");
  TensorDataRef a = F32({3, 4}, {0, 1, 0, 0, 2, 0, 0, 3, 0, 0, 0, -1});
  TensorDataRef b = RandomTensor(DType::kF32, {3, 4}, -1, 2, 14);  // floor: many zeros
  TensorDataRef z = F32({3, 4}, std::vector<double>(12, 0));
  for (const TensorDataRef& x : {a, b, z})
    Expect(Run(text, {x})[0], DType::kI64, NonZeroRef(ToNd(x)));
  // Other dtypes and ranks.
  TensorDataRef bo = MakeTensor(DType::kBool, {2, 2, 3}, {1, 0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 1});
  Expect(Run(Model(13, "bool[2,2,3] x", "y", "y = NonZero(x)"), {bo})[0], DType::kI64,
         NonZeroRef(ToNd(bo)));
  std::string sym = Model(13, "int64[N] x", "y", "y = NonZero(x)");
  for (int64_t n : {5, 17}) {
    TensorDataRef xi = RandomTensor(DType::kI64, {n}, -1, 2, 15 + n);
    Expect(Run(sym, {xi})[0], DType::kI64, NonZeroRef(ToNd(xi)));
  }
}

BOOST_AUTO_TEST_CASE(compress_axis_and_flat) {
  TensorDataRef x = RandomTensor(DType::kF32, {3, 4}, -1, 1, 16);
  Nd xr = ToNd(x);
  std::string with_axis = Model(13, "float[3,4] x, bool[C] c", "y", "y = Compress<axis = 1>(x, c)");
  std::string flat = Model(13, "float[3,4] x, bool[C] c", "y", "y = Compress(x, c)");
  for (std::vector<double> c : {std::vector<double>{1, 0, 1, 1},
                                {0, 1},
                                {0, 0, 0, 0},
                                std::vector<double>{1, 0, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1}}) {
    TensorDataRef ct = MakeTensor(DType::kBool, {int64_t(c.size())}, c);
    // Along axis 1 (the condition may be shorter than the dim; longer entries are ignored).
    if (c.size() <= 4) {
      std::vector<int64_t> keep;
      for (size_t j = 0; j < c.size(); ++j)
        if (c[j]) keep.push_back(int64_t(j));
      Nd want = Generate({3, int64_t(keep.size())}, [&](const std::vector<int64_t>& o) {
        return xr.at({o[0], keep[o[1]]});
      });
      Expect(Run(with_axis, {x, ct})[0], DType::kF32, want);
    }
    std::vector<double> want;
    for (size_t j = 0; j < c.size() && j < 12; ++j)
      if (c[j]) want.push_back(xr.v[j]);
    Expect(Run(flat, {x, ct})[0], DType::kF32, {{int64_t(want.size())}, want});
  }
}

// ---- TopK ------------------------------------------------------------------------------------

// Sorted top k along axis: ties by lower index first.
std::pair<Nd, Nd> TopKRef(const Nd& x, int axis, int64_t k, bool largest) {
  std::vector<int64_t> dims = x.dims;
  dims[axis] = k;
  Nd values{dims, std::vector<double>(Count(dims))}, indices = values;
  std::vector<int64_t> rows = x.dims;
  rows[axis] = 1;
  for (int64_t r = 0; r < Count(rows); ++r) {
    std::vector<int64_t> base = Unravel(r, rows);
    std::vector<int64_t> order(x.dims[axis]);
    std::iota(order.begin(), order.end(), 0);
    auto val = [&](int64_t i) {
      std::vector<int64_t> at = base;
      at[axis] = i;
      return x.at(at);
    };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return largest ? val(a) > val(b) : val(a) < val(b);
    });
    for (int64_t j = 0; j < k; ++j) {
      std::vector<int64_t> at = base;
      at[axis] = j;
      values.v[Ravel(at, dims)] = val(order[j]);
      indices.v[Ravel(at, dims)] = double(order[j]);
    }
  }
  return {values, indices};
}

BOOST_AUTO_TEST_CASE(top_k_attributes_and_runtime_k) {
  // Few distinct values: many ties.
  TensorDataRef x = RandomTensor(DType::kF32, {3, 7, 5}, -3, 3, 17);
  Nd xr = ToNd(x);
  for (int axis : {-1, 0, 1}) {
    int a = axis < 0 ? axis + 3 : axis;
    for (int largest : {1, 0}) {
      for (int64_t k : {int64_t{1}, xr.dims[a] / 2, xr.dims[a]}) {
        std::vector<TensorDataRef> out =
            Run(Model(11, "float[3,7,5] x", "v, i",
                      "v, i = TopK<axis = " + std::to_string(axis) +
                          ", largest = " + std::to_string(largest) + ", sorted = 1>(x, k)",
                      "int64[1] k = {" + std::to_string(k) + "}"),
                {x});
        auto [v, i] = TopKRef(xr, a, k, largest);
        Expect(out[0], DType::kF32, v);
        Expect(out[1], DType::kI64, i);
      }
    }
  }
  // k at run time (a shape function): several k in one test; int64 data.
  std::string text = Model(11, "int64[4,9] x, int64[1] k", "v, i", "v, i = TopK(x, k)");
  TensorDataRef xi = RandomTensor(DType::kI64, {4, 9}, -5, 5, 18);
  for (int64_t k : {0, 3, 9}) {
    std::vector<TensorDataRef> out = Run(text, {xi, I64({1}, {double(k)})});
    auto [v, i] = TopKRef(ToNd(xi), 1, k, true);
    Expect(out[0], DType::kI64, v);
    Expect(out[1], DType::kI64, i);
  }
  BOOST_TEST(!testing::RunModel(text, {xi, I64({1}, {10})}, Table()).ok());
  // Opset 1: k is an attribute.
  std::vector<TensorDataRef> out =
      Run(Model(9, "float[3,7,5] x", "v, i", "v, i = TopK<k = 2, axis = 1>(x)"), {x});
  auto [v, i] = TopKRef(xr, 1, 2, true);
  Expect(out[0], DType::kF32, v);
  Expect(out[1], DType::kI64, i);
}

// Long rows and a small k (a kNN's TopK): most elements are passed over after one comparison
// with the last kept value, which must keep the lower index first among ties at the boundary.
BOOST_AUTO_TEST_CASE(top_k_long_rows_small_k) {
  for (auto [lo, hi] : {std::pair<double, double>{-4, 4}, {-1e3, 1e3}}) {  // ties; few ties
    TensorDataRef x = RandomTensor(DType::kF32, {6, 300}, lo, hi, 23);
    for (int largest : {1, 0}) {
      for (int64_t k : {1, 10}) {
        std::vector<TensorDataRef> out =
            Run(Model(11, "float[6,300] x", "v, i",
                      "v, i = TopK<largest = " + std::to_string(largest) + ">(x, k)",
                      "int64[1] k = {" + std::to_string(k) + "}"),
                {x});
        auto [v, i] = TopKRef(ToNd(x), 1, k, largest);
        Expect(out[0], DType::kF32, v);
        Expect(out[1], DType::kI64, i);
      }
    }
  }
}

// A kNN's TopK over [batch 1, points, points]: the rows of every dim before the axis share the
// team (parallel over the batch dim alone, a batch of 1 ran on one thread).
BOOST_AUTO_TEST_CASE(top_k_rows_of_a_batch_of_one_split_across_threads) {
  StatusOr<Graph> g = testing::InferText(
      Model(11, "float[1,64,300] x", "v, i", "v, i = TopK(x, k)", "int64[1] k = {10}"));
  BOOST_REQUIRE_MESSAGE(g.ok(), g.status().ToString());
  NodeId top_k = kNoNode;
  for (NodeId n = 0; n < g->num_nodes(); ++n) {
    if (g->node(n).op_type == "TopK") top_k = n;
  }
  BOOST_REQUIRE(top_k != kNoNode);
  StatusOr<LoweredNode> lowered = LowerNode(*g, top_k, false, Table());
  BOOST_REQUIRE_MESSAGE(lowered.ok(), lowered.status().ToString());
  BOOST_REQUIRE(lowered->kernel.has_value());
  // The one parallel loop runs over all 1 * 64 rows, not over the batch dim of 1.
  const std::string text = jit::ToText(*lowered->kernel);
  const size_t at = text.find("parallel for");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, text);
  const std::string line = text.substr(at, text.find('\n', at) - at);
  BOOST_TEST(line.find("64") != std::string::npos, line);
  BOOST_TEST(text.find("parallel for", at + 1) == std::string::npos, text);
}

// NaN orders above every number (torch.topk, NumPy's sort): NaNs lead the largest, in index
// order, and are left out of the smallest while numbers remain.
BOOST_AUTO_TEST_CASE(top_k_nan_is_largest) {
  double nan = std::nan("");
  TensorDataRef x = F32({2, 6}, {3, nan, 5, 1, nan, 4, nan, 2, nan, nan, 7, -1});
  auto top = [&](int largest, int64_t k) {
    return Run(Model(11, "float[2,6] x", "v, i",
                     "v, i = TopK<largest = " + std::to_string(largest) + ">(x, k)",
                     "int64[1] k = {" + std::to_string(k) + "}"),
               {x});
  };
  std::vector<TensorDataRef> out = top(1, 3);
  Expect(out[0], DType::kF32, Nd{{2, 3}, {nan, nan, 5, nan, nan, nan}});
  Expect(out[1], DType::kI64, Nd{{2, 3}, {1, 4, 2, 0, 2, 3}});
  out = top(0, 4);
  Expect(out[0], DType::kF32, Nd{{2, 4}, {1, 3, 4, 5, -1, 2, 7, nan}});
  Expect(out[1], DType::kI64, Nd{{2, 4}, {3, 0, 5, 2, 5, 1, 4, 0}});
}

// ---- CumSum, Trilu, ReverseSequence ----------------------------------------------------------

Nd CumSumRef(const Nd& x, int axis, bool exclusive, bool reverse) {
  return Generate(x.dims, [&](const std::vector<int64_t>& o) {
    double s = 0;
    int64_t n = x.dims[axis];
    for (int64_t j = 0; j < n; ++j) {
      bool take = reverse ? (exclusive ? j > o[axis] : j >= o[axis])
                          : (exclusive ? j < o[axis] : j <= o[axis]);
      if (!take) continue;
      std::vector<int64_t> at = o;
      at[axis] = j;
      s += x.at(at);
    }
    return s;
  });
}

BOOST_AUTO_TEST_CASE(cum_sum_attributes_and_runtime_axis) {
  TensorDataRef x = RandomTensor(DType::kF32, {3, 4, 5}, -1, 1, 19);
  Nd xr = ToNd(x);
  for (int axis : {0, 1, 2, -1}) {
    for (int exclusive : {0, 1}) {
      for (int reverse : {0, 1}) {
        std::string body = "y = CumSum<exclusive = " + std::to_string(exclusive) +
                           ", reverse = " + std::to_string(reverse) + ">(x, a)";
        Expect(
            Run(Model(14, "float[3,4,5] x", "y", body, "int64 a = {" + std::to_string(axis) + "}"),
                {x})[0],
            DType::kF32, CumSumRef(xr, axis < 0 ? axis + 3 : axis, exclusive, reverse), 1e-5);
      }
    }
  }
  // Axis at run time; int32 data.
  std::string text = Model(14, "int32[3,4,5] x, int32 a", "y", "y = CumSum<reverse = 1>(x, a)");
  TensorDataRef xi = RandomTensor(DType::kI32, {3, 4, 5}, -10, 10, 20);
  for (int axis : {1, -3}) {
    Expect(Run(text, {xi, MakeTensor(DType::kI32, {}, {double(axis)})})[0], DType::kI32,
           CumSumRef(ToNd(xi), axis < 0 ? axis + 3 : axis, false, true));
  }
}

BOOST_AUTO_TEST_CASE(trilu_upper_lower_k) {
  TensorDataRef x = RandomTensor(DType::kF32, {2, 4, 6}, -1, 1, 21);
  Nd xr = ToNd(x);
  for (int upper : {1, 0}) {
    for (int64_t k : {0, 2, -1, -7, 9}) {
      Nd want = Generate(xr.dims, [&](const std::vector<int64_t>& o) {
        int64_t d = o[2] - o[1];
        bool keep = upper ? d >= k : d <= k;
        return keep ? xr.at(o) : 0.0;
      });
      Expect(Run(Model(14, "float[2,4,6] x", "y",
                       "y = Trilu<upper = " + std::to_string(upper) + ">(x, k)",
                       "int64 k = {" + std::to_string(k) + "}"),
                 {x})[0],
             DType::kF32, want);
      // k at run time.
      Expect(Run(Model(14, "float[2,4,6] x, int64 k", "y",
                       "y = Trilu<upper = " + std::to_string(upper) + ">(x, k)"),
                 {x, I64({}, {double(k)})})[0],
             DType::kF32, want);
    }
  }
  // No k input.
  TensorDataRef sq = RandomTensor(DType::kI64, {5, 5}, -9, 9, 22);
  Nd sr = ToNd(sq);
  Expect(Run(Model(14, "int64[5,5] x", "y", "y = Trilu(x)"), {sq})[0], DType::kI64,
         Generate({5, 5},
                  [&](const std::vector<int64_t>& o) { return o[1] >= o[0] ? sr.at(o) : 0.0; }));
}

BOOST_AUTO_TEST_CASE(reverse_sequence) {
  TensorDataRef x = RandomTensor(DType::kF32, {4, 3, 2}, -1, 1, 23);
  Nd xr = ToNd(x);
  // batch_axis 1, time_axis 0 (the defaults): lengths per batch (3), one the whole time axis.
  TensorDataRef lens = I64({3}, {4, 1, 3});
  Nd want = Generate(xr.dims, [&](std::vector<int64_t> o) {
    auto len = int64_t(ToNd(lens).v[o[1]]);
    if (o[0] < len) o[0] = len - 1 - o[0];
    return xr.at(o);
  });
  Expect(
      Run(Model(13, "float[4,3,2] x, int64[3] l", "y", "y = ReverseSequence(x, l)"), {x, lens})[0],
      DType::kF32, want);
  // batch_axis 0, time_axis 1.
  TensorDataRef lens2 = I64({4}, {0, 2, 3, 1});
  Nd want2 = Generate(xr.dims, [&](std::vector<int64_t> o) {
    auto len = int64_t(ToNd(lens2).v[o[0]]);
    if (o[1] < len) o[1] = len - 1 - o[1];
    return xr.at(o);
  });
  Expect(Run(Model(13, "float[4,3,2] x, int64[4] l", "y",
                   "y = ReverseSequence<batch_axis = 0, time_axis = 1>(x, l)"),
             {x, lens2})[0],
         DType::kF32, want2);
}

// A sequence length outside [0, time dim] is an error naming the node, the batch index, the
// value and the bound, as in ONNX Runtime ("Invalid sequence length"), where it used to be
// clamped: at run time, with the time dim static or symbolic, and for int32 lengths.
void ExpectSequenceLengthError(const std::string& text, const std::vector<TensorDataRef>& in,
                               int64_t batch, int64_t len, int64_t time) {
  StatusOr<std::vector<TensorDataRef>> r = testing::RunModel(text, in, Table());
  BOOST_REQUIRE_MESSAGE(!r.ok(), "sequence length " + std::to_string(len) + " succeeded");
  BOOST_TEST(r.status().code() == StatusCode::kInvalidArgument);
  std::string want = "(ReverseSequence): sequence_lens[" + std::to_string(batch) +
                     "] = " + std::to_string(len) + " is outside the inclusive range [0," +
                     std::to_string(time) + "]";
  BOOST_TEST(r.status().message().find(want) != std::string::npos,
             r.status().message() << "\nwanted: " << want);
}

BOOST_AUTO_TEST_CASE(reverse_sequence_lengths_out_of_range_are_errors) {
  TensorDataRef x = RandomTensor(DType::kF32, {4, 3, 2}, -1, 1, 24);
  std::string text = Model(13, "float[4,3,2] x, int64[3] l", "y", "y = ReverseSequence(x, l)");
  ExpectSequenceLengthError(text, {x, I64({3}, {4, 1, 9})}, 2, 9, 4);
  ExpectSequenceLengthError(text, {x, I64({3}, {0, -1, 2})}, 1, -1, 4);
  ExpectSequenceLengthError(text, {x, I64({3}, {int64_t{1} << 62, 1, 2})}, 0, int64_t{1} << 62, 4);
  ExpectSequenceLengthError(Model(13, "float[B,T,2] x, int32[B] l", "y",
                                  "y = ReverseSequence<batch_axis = 0, time_axis = 1>(x, l)"),
                            {x, MakeTensor(DType::kI32, {4}, {0, 2, 4, 1})}, 2, 4, 3);
  // The bounds themselves are lengths: 0 and the whole time axis run.
  BOOST_TEST(testing::RunModel(text, {x, I64({3}, {0, 4, 4})}, Table()).ok());
}

// sequence_lens with other than one entry per batch: an error naming the node and both sizes,
// as ONNX Runtime rejects it (it used to copy the input unchanged). Run here through the
// evaluator with symbolic dims, which checks the fact the shape rule records.
BOOST_AUTO_TEST_CASE(reverse_sequence_lengths_per_batch_entry) {
  TensorDataRef x = RandomTensor(DType::kF32, {4, 3, 2}, -1, 1, 25);
  std::string text = Model(13, "float[T,B,2] x, int64[L] l", "y", "y = ReverseSequence(x, l)");
  for (int64_t count : {2, 4}) {
    StatusOr<std::vector<TensorDataRef>> r =
        testing::RunModel(text, {x, I64({count}, std::vector<double>(count, 1))}, Table());
    BOOST_REQUIRE_MESSAGE(!r.ok(), std::to_string(count) + " lengths for a batch of 3 ran");
    BOOST_TEST(r.status().code() == StatusCode::kInvalidArgument);
    std::string want = "(ReverseSequence): L is " + std::to_string(count) + ", B is 3";
    BOOST_TEST(r.status().message().find(want) != std::string::npos,
               r.status().message() << "\nwanted: " << want);
  }
  BOOST_TEST(testing::RunModel(text, {x, I64({3}, {1, 2, 3})}, Table()).ok());
}

// ---- Unique ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(unique_sorted_and_unsorted) {
  std::string text = Model(11, "float[N] x", "y, i, v, c", "y, i, v, c = Unique<sorted = 1>(x)");
  std::string unsorted =
      Model(11, "int64[2, M] x", "y, i, v, c", "y, i, v, c = Unique<sorted = 0>(x)");
  for (int64_t n : {7, 16}) {
    TensorDataRef x = RandomTensor(DType::kF32, {n}, -3, 3, 30 + n);  // many repeats
    std::vector<double> xs = x->ToDoubles();
    // Reference: distinct values, first index, inverse, counts.
    std::vector<double> vals = xs;
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    auto u = static_cast<int64_t>(vals.size());
    std::vector<double> first(u, -1), inv(n), counts(u, 0);
    for (int64_t f = 0; f < n; ++f) {
      auto p = std::lower_bound(vals.begin(), vals.end(), xs[f]) - vals.begin();
      if (first[p] < 0) first[p] = double(f);
      inv[f] = double(p);
      counts[p] += 1;
    }
    std::vector<TensorDataRef> out = Run(text, {x});
    Expect(out[0], DType::kF32, {{u}, vals});
    Expect(out[1], DType::kI64, {{u}, first});
    Expect(out[2], DType::kI64, {{n}, inv});
    Expect(out[3], DType::kI64, {{u}, counts});
  }
  for (int64_t m : {3, 5}) {
    TensorDataRef x = RandomTensor(DType::kI64, {2, m}, -2, 2, 40 + m);
    std::vector<double> xs = x->ToDoubles(), vals, first, inv, counts;
    for (size_t f = 0; f < xs.size(); ++f) {
      auto it = std::find(vals.begin(), vals.end(), xs[f]);
      if (it == vals.end()) {
        vals.push_back(xs[f]);
        first.push_back(double(f));
        counts.push_back(0);
        it = vals.end() - 1;
      }
      auto p = it - vals.begin();
      counts[p] += 1;
      inv.push_back(double(p));
    }
    auto u = static_cast<int64_t>(vals.size());
    std::vector<TensorDataRef> out = Run(unsorted, {x});
    Expect(out[0], DType::kI64, {{u}, vals});
    Expect(out[1], DType::kI64, {{u}, first});
    Expect(out[2], DType::kI64, {{2 * m}, inv});
    Expect(out[3], DType::kI64, {{u}, counts});
  }
  // Only the values output.
  Expect(Run(Model(11, "int64[6] x", "y", "y = Unique(x)"), {I64({6}, {3, 1, 3, -2, 1, 0})})[0],
         DType::kI64, {{4}, {-2, 0, 1, 3}});
}

BOOST_AUTO_TEST_CASE(unique_with_axis) {
  // Slices along the axis, sorted lexicographically.
  for (int axis : {0, 1, -1}) {
    Nd x{{3, 4, 2}, {}};
    // Few distinct values so slices repeat.
    TensorDataRef xt = RandomTensor(DType::kI64, {3, 4, 2}, 0, 2, 80 + axis);
    x = ToNd(xt);
    int a = axis < 0 ? axis + 3 : axis;
    int64_t n = x.dims[a];
    auto slice = [&](int64_t k) {
      std::vector<double> v;
      for (int64_t f = 0; f < Count(x.dims); ++f) {
        std::vector<int64_t> idx = Unravel(f, x.dims);
        if (idx[a] == k) v.push_back(x.v[f]);
      }
      return v;
    };
    std::vector<std::vector<double>> slices, vals;
    for (int64_t k = 0; k < n; ++k) slices.push_back(slice(k));
    vals = slices;
    std::sort(vals.begin(), vals.end());
    vals.erase(std::unique(vals.begin(), vals.end()), vals.end());
    auto u = static_cast<int64_t>(vals.size());
    std::vector<double> first(u, -1), inv(n), counts(u, 0);
    for (int64_t k = 0; k < n; ++k) {
      auto p = std::lower_bound(vals.begin(), vals.end(), slices[k]) - vals.begin();
      if (first[p] < 0) first[p] = double(k);
      inv[k] = double(p);
      counts[p] += 1;
    }
    std::vector<int64_t> ydims = x.dims;
    ydims[a] = u;
    Nd y = Generate(ydims, [&](const std::vector<int64_t>& o) {
      std::vector<int64_t> src = o;
      src[a] = int64_t(first[o[a]]);
      return x.at(src);
    });
    std::vector<TensorDataRef> out =
        Run(Model(11, "int64[3,4,2] x", "y, i, v, c",
                  "y, i, v, c = Unique<axis = " + std::to_string(axis) + ">(x)"),
            {xt});
    Expect(out[0], DType::kI64, y);
    Expect(out[1], DType::kI64, {{u}, first});
    Expect(out[2], DType::kI64, {{n}, inv});
    Expect(out[3], DType::kI64, {{u}, counts});
  }
}

// ---- NonMaxSuppression -----------------------------------------------------------------------

// Greedy per-class NMS (ONNX Runtime's rules): score > threshold, best first (ties: lower
// index), drop boxes with IoU > iou_threshold against a kept one, at most max per class.
std::vector<double> NmsRef(const Nd& boxes, const Nd& scores, int64_t max_out, double iou_thr,
                           bool has_score_thr, double score_thr, bool center) {
  int64_t nb = boxes.dims[0], n = boxes.dims[1], nc = scores.dims[1];
  auto corners = [&](int64_t b, int64_t i) {
    std::vector<double> c(4);
    for (int k = 0; k < 4; ++k) c[k] = boxes.at({b, i, k});
    if (center)
      return std::vector<double>{c[1] - c[3] / 2, c[0] - c[2] / 2, c[1] + c[3] / 2,
                                 c[0] + c[2] / 2};
    return std::vector<double>{std::min(c[0], c[2]), std::min(c[1], c[3]), std::max(c[0], c[2]),
                               std::max(c[1], c[3])};
  };
  std::vector<double> out;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t c = 0; c < nc; ++c) {
      std::vector<int64_t> order;
      for (int64_t i = 0; i < n; ++i)
        if (!has_score_thr || float(scores.at({b, c, i})) > float(score_thr)) order.push_back(i);
      std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
        return scores.at({b, c, x}) > scores.at({b, c, y});
      });
      std::vector<int64_t> kept;
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        bool drop = false;
        for (int64_t k : kept) {
          std::vector<double> p = corners(b, k), q = corners(b, i);
          double ap = (p[3] - p[1]) * (p[2] - p[0]), aq = (q[3] - q[1]) * (q[2] - q[0]);
          if (ap <= 0 || aq <= 0) continue;
          double inter = std::max(0.0, std::min(p[3], q[3]) - std::max(p[1], q[1])) *
                         std::max(0.0, std::min(p[2], q[2]) - std::max(p[0], q[0]));
          if (inter / (ap + aq - inter) > iou_thr) drop = true;
        }
        if (drop) continue;
        kept.push_back(i);
        out.insert(out.end(), {double(b), double(c), double(i)});
      }
    }
  }
  return out;
}

BOOST_AUTO_TEST_CASE(non_max_suppression) {
  // The ONNX spec example (suppress by IoU): selects boxes 3, 0, 5.
  TensorDataRef boxes = F32({1, 6, 4}, {0, 0,  1, 1,  0, 0.1,  1, 1.1,  0, -0.1, 1, 0.9,
                                        0, 10, 1, 11, 0, 10.1, 1, 11.1, 0, 100,  1, 101});
  TensorDataRef scores = F32({1, 1, 6}, {0.9, 0.75, 0.6, 0.95, 0.5, 0.3});
  std::string text =
      Model(11, "float[1,6,4] b, float[1,1,6] s, int64[1] m, float[1] iou, float[1] st", "y",
            "y = NonMaxSuppression(b, s, m, iou, st)");
  Expect(Run(text, {boxes, scores, I64({1}, {3}), F32({1}, {0.5}), F32({1}, {0})})[0], DType::kI64,
         {{3, 3}, {0, 0, 3, 0, 0, 0, 0, 0, 5}});
  // Different limits and thresholds change the output length in one test.
  for (auto [m, iou, st] : {std::tuple<int64_t, double, double>{2, 0.5, 0},
                            {10, 0.5, 0.4},
                            {10, 0.0, 0},
                            {10, 1.0, 0},
                            {0, 0.5, 0}}) {
    Expect(Run(text, {boxes, scores, I64({1}, {double(m)}), F32({1}, {iou}), F32({1}, {st})})[0],
           DType::kI64,
           {{int64_t(NmsRef(ToNd(boxes), ToNd(scores), m, iou, true, st, false).size() /
                     3),
             3},
            NmsRef(ToNd(boxes), ToNd(scores), m, iou, true, st, false)});
  }
  // Random boxes, two batches, three classes; corner order flipped at random; center format;
  // without the score threshold input.
  TensorDataRef rb = RandomTensor(DType::kF32, {2, 9, 4}, 0, 4, 50);
  TensorDataRef rs = RandomTensor(DType::kF32, {2, 3, 9}, 0, 1, 51);
  for (int center : {0, 1}) {
    std::string t2 = Model(
        11, "float[2,9,4] b, float[2,3,9] s, int64 m, float iou", "y",
        "y = NonMaxSuppression<center_point_box = " + std::to_string(center) + ">(b, s, m, iou)");
    std::vector<double> want = NmsRef(ToNd(rb), ToNd(rs), 4, 0.3, false, 0, center);
    Expect(Run(t2, {rb, rs, I64({}, {4}), F32({}, {0.3})})[0], DType::kI64,
           {{int64_t(want.size() / 3), 3}, want});
  }
}

// Shapes the shape rules leave unchecked never make a kernel leave its buffers: the documented
// fallbacks (no update applied, error from the shape function).
BOOST_AUTO_TEST_CASE(unchecked_shape_mismatches_stay_in_bounds) {
  TensorDataRef x = RandomTensor(DType::kF32, {4, 3}, -1, 1, 60);
  Expect(Run(Model(13, "float[4,3] x, int64[2,3] i, float[2,2] u", "y",
                   "y = ScatterElements(x, i, u)"),
             {x, I64({2, 3}, {0, 1, 2, 3, 0, 1}), F32({2, 2}, {9, 9, 9, 9})})[0],
         DType::kF32, ToNd(x));
  Expect(Run(Model(13, "float[4,3] x, int64[2,1] i, float[2,2] u", "y", "y = ScatterND(x, i, u)"),
             {x, I64({2, 1}, {0, 1}), F32({2, 2}, {9, 9, 9, 9})})[0],
         DType::kF32, ToNd(x));
  // ReverseSequence's sequence_lens is checked now: too few lengths for the batch used to copy
  // the input; it is an error naming both sizes (reverse_sequence_lengths_per_batch_entry).
  StatusOr<std::vector<TensorDataRef>> rs = testing::RunModel(
      Model(13, "float[4,3] x, int64[2] l", "y", "y = ReverseSequence(x, l)"),
      {x, I64({2}, {3, 3})}, Table());
  BOOST_REQUIRE(!rs.ok());
  BOOST_TEST(rs.status().message().find("sequence_lens has 2 entries but the batch dim (axis 1 "
                                        "of 'x') is 3") != std::string::npos,
             rs.status().message());
  BOOST_TEST(!testing::RunModel(Model(11, "float[1,6,4] b, float[1,1,5] s, int64 m", "y",
                                      "y = NonMaxSuppression(b, s, m)"),
                                {RandomTensor(DType::kF32, {1, 6, 4}, 0, 1, 61),
                                 RandomTensor(DType::kF32, {1, 1, 5}, 0, 1, 62), I64({}, {3})},
                                Table())
                  .ok());
  // GatherElements with indices wider than data on a non-axis dim: clamped there too.
  TensorDataRef idx = I64({2, 5}, {0, 1, 2, 3, -1, 3, 2, 1, 0, -4});
  Nd xr = ToNd(x), ir = ToNd(idx);
  Expect(Run(Model(13, "float[4,3] x, int64[2,5] i", "y", "y = GatherElements(x, i)"), {x, idx})[0],
         DType::kF32, Generate({2, 5}, [&](const std::vector<int64_t>& o) {
           return xr.at({WrapIndex(ir.at(o), 4), std::min<int64_t>(o[1], 2)});
         }));
}

// A small model chaining the ops over a symbolic dim, run at two sizes; f16 and bool data.
BOOST_AUTO_TEST_CASE(symbolic_model_two_sizes_and_dtypes) {
  std::string text = Model(14, "float16[N, 6] x, int64[N] i, bool[N, 6] m", "v, c, g",
                           "v, k = TopK<axis = 1>(x, two)\n"
                           " c = CumSum(k, ax)\n"
                           " g = Gather<axis = 0>(m, i)",
                           "int64[1] two = {2}, int64 ax = {0}");
  for (int64_t n : {1, 6}) {
    TensorDataRef x = RandomTensor(DType::kF16, {n, 6}, -4, 4, 70 + n);
    TensorDataRef i = RandomTensor(DType::kI64, {n}, -n, n, 71);
    TensorDataRef m = RandomTensor(DType::kBool, {n, 6}, 0, 2, 72);
    std::vector<TensorDataRef> out = Run(text, {x, i, m});
    auto [v, k] = TopKRef(ToNd(x), 1, 2, true);
    Expect(out[0], DType::kF16, v);
    Expect(out[1], DType::kI64, CumSumRef(k, 0, false, false));
    Expect(out[2], DType::kBool, GatherRef(ToNd(m), ToNd(i), 0));
  }
}

}  // namespace
}  // namespace kiln::compiler
