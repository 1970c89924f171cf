// Lowerings of the reduce family (compiler/lower/reduce.cc): every reduction over many axis
// sets (last axis reduced, last axis kept, all, none of a rank-0 input), keepdims, empty
// reductions, axes as attribute / constant input / run-time input, dtypes, ArgMax/ArgMin —
// checked against a plain C++ reference.
#define BOOST_TEST_MODULE reduce_test
#include <algorithm>
#include <boost/test/data/monomorphic.hpp>
#include <boost/test/data/test_case.hpp>
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include "compiler/lower/lower.h"
#include "tests/compiler/lower/op_test_util.h"

namespace kiln::compiler {
namespace {

using testing::Compare;
using testing::F32;
using testing::I64;
using testing::MakeTensor;
using testing::Model;
using testing::RandomTensor;

namespace data = boost::unit_test::data;

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

const LoweringTable& Table() {
  static const LoweringTable* table = [] {
    auto* t = new LoweringTable;
    AddReduceLowerings(*t);
    return t;
  }();
  return *table;
}

std::string Type(const char* elem, const std::vector<int64_t>& dims) {
  if (dims.empty()) return elem;
  std::string s = std::string(elem) + "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::vector<TensorDataRef> Run(const std::string& model, const std::vector<TensorDataRef>& in) {
  StatusOr<std::vector<TensorDataRef>> out = testing::RunModel(model, in, Table());
  BOOST_REQUIRE_MESSAGE(out.ok(), out.status().message() + "\nmodel:\n" + model);
  return *out;
}

void Expect(const TensorData& actual, const TensorDataRef& expected, double rtol = 1e-5,
            double atol = 1e-5) {
  std::string diff = Compare(actual, *expected, rtol, atol);
  BOOST_TEST(diff.empty(), diff);
}

// The ONNX definition of each reduction over the list of reduced values.
double Finish(const std::string& op, const std::vector<double>& v) {
  double sum = 0, abs_sum = 0, sq = 0, prod = 1, mx = -kInf, mn = kInf;
  for (double x : v) {
    sum += x;
    abs_sum += std::fabs(x);
    sq += x * x;
    prod *= x;
    mx = std::isnan(x) || std::isnan(mx) ? kNaN : std::max(mx, x);
    mn = std::isnan(x) || std::isnan(mn) ? kNaN : std::min(mn, x);
  }
  if (op == "ReduceSum") return sum;
  if (op == "ReduceMean") return sum / static_cast<double>(v.size());
  if (op == "ReduceMax") return mx;
  if (op == "ReduceMin") return mn;
  if (op == "ReduceProd") return prod;
  if (op == "ReduceL1") return abs_sum;
  if (op == "ReduceL2") return std::sqrt(sq);
  if (op == "ReduceLogSum") return std::log(sum);
  if (op == "ReduceSumSquare") return sq;
  double e = 0;
  for (double x : v) e += std::exp(x);
  return std::log(e);  // ReduceLogSumExp
}

// Reduces x over `axes` (normalized) with `op`; `f` finishes each output's value list.
TensorDataRef ReduceRef(const TensorData& x, const std::set<int>& axes, bool keepdims,
                        const std::function<double(const std::vector<double>&)>& f, DType dtype) {
  const std::vector<int64_t>& dims = x.dims();
  std::vector<int64_t> out_dims;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (!axes.count(d)) {
      out_dims.push_back(dims[d]);
    } else if (keepdims) {
      out_dims.push_back(1);
    }
  }
  int64_t n_out = 1;
  for (int64_t d : out_dims) n_out *= d;
  std::vector<std::vector<double>> lists(n_out);
  std::vector<double> v = x.ToDoubles();
  std::vector<int64_t> idx(dims.size(), 0);
  for (size_t k = 0; k < v.size(); ++k) {
    int64_t rest = static_cast<int64_t>(k);
    for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
      idx[d] = rest % dims[d];
      rest /= dims[d];
    }
    int64_t o = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (!axes.count(d)) o = o * dims[d] + idx[d];
    }
    lists[o].push_back(v[k]);
  }
  std::vector<double> out;
  for (const auto& l : lists) out.push_back(f(l));
  return MakeTensor(dtype, out_dims, out);
}

struct AxesCase {
  std::vector<int64_t> dims;
  std::vector<int64_t> axes;  // empty: attribute absent (reduce all)
  int keepdims;
};

std::ostream& operator<<(std::ostream& os, const AxesCase& c) {
  os << "dims";
  for (int64_t d : c.dims) os << " " << d;
  os << " axes";
  for (int64_t a : c.axes) os << " " << a;
  return os << " keepdims " << c.keepdims;
}

const AxesCase kAxesCases[] = {
    {{3, 4, 5}, {2}, 1},       {{3, 4, 5}, {-1}, 0},      {{3, 4, 5}, {1}, 1},
    {{3, 4, 5}, {0}, 0},       {{3, 4, 5}, {0, 2}, 1},    {{3, 4, 5}, {1, 2}, 0},
    {{3, 4, 5}, {}, 1},        {{3, 4, 5}, {}, 0},        {{3, 4, 5}, {0, 1}, 0},
    {{2, 300}, {0}, 0},        {{7, 33}, {1}, 1},         {{5}, {0}, 0},
    {{2, 0, 3}, {1}, 1},       {{2, 0, 3}, {2}, 0},       {{1, 1, 9}, {0, 1}, 1},
    {{2, 3, 2, 5}, {1, 3}, 0}, {{2, 3, 2, 5}, {0, 2}, 1},
};

const char* kReductions[] = {"ReduceSum",       "ReduceMean",     "ReduceMax", "ReduceMin",
                             "ReduceProd",      "ReduceL1",       "ReduceL2",  "ReduceLogSum",
                             "ReduceLogSumExp", "ReduceSumSquare"};

std::string AxesAttr(const AxesCase& c) {
  std::string s = "<keepdims = " + std::to_string(c.keepdims);
  if (!c.axes.empty()) {
    s += ", axes = [";
    for (size_t i = 0; i < c.axes.size(); ++i) s += (i ? ", " : "") + std::to_string(c.axes[i]);
    s += "]";
  }
  return s + ">";
}

std::set<int> Normalized(const AxesCase& c) {
  std::set<int> axes;
  int rank = static_cast<int>(c.dims.size());
  for (int64_t a : c.axes) axes.insert(static_cast<int>(a < 0 ? a + rank : a));
  if (c.axes.empty()) {
    for (int d = 0; d < rank; ++d) axes.insert(d);
  }
  return axes;
}

// Every reduction over every axis case, axes as attribute (ReduceSum at opset 11).
BOOST_DATA_TEST_CASE(reductions_f32_match_reference, data::make(kReductions), op_name) {
  std::string op = op_name;
  uint64_t seed = 1;
  for (const AxesCase& c : kAxesCases) {
    bool positive = op == "ReduceLogSum";
    TensorDataRef x = RandomTensor(DType::kF32, c.dims, positive ? 0.1 : -2, 2, seed++);
    int opset = op == "ReduceSum" ? 11 : 17;
    std::string model = Model(opset, "(" + Type("float", c.dims) + " x) => (y)",
                              "y = " + op + " " + AxesAttr(c) + " (x)");
    BOOST_TEST_CONTEXT(c) {
      Expect(*Run(model, {x})[0],
             ReduceRef(
                 *x, Normalized(c), c.keepdims,
                 [&](const std::vector<double>& v) { return Finish(op, v); }, DType::kF32));
    }
  }
}

// Empty reductions give ONNX's identities: 0, 1, -inf / +inf, NaN for the mean, log(0) = -inf.
BOOST_AUTO_TEST_CASE(empty_reductions) {
  TensorDataRef x = F32({2, 0}, {});
  const std::pair<const char*, double> kExpected[] = {
      {"ReduceSum", 0},      {"ReduceMean", kNaN},    {"ReduceMax", -kInf},
      {"ReduceMin", kInf},   {"ReduceProd", 1},       {"ReduceL1", 0},
      {"ReduceL2", 0},       {"ReduceLogSum", -kInf}, {"ReduceLogSumExp", -kInf},
      {"ReduceSumSquare", 0}};
  for (const auto& [op, value] : kExpected) {
    std::string model = Model(13, "(float[2, 0] x) => (y)",
                              std::string("y = ") + op + " <axes = [1], keepdims = 0> (x)");
    if (std::string(op) == "ReduceSum") {
      model = Model(11, "(float[2, 0] x) => (y)", "y = ReduceSum <axes = [1], keepdims = 0> (x)");
    }
    Expect(*Run(model, {x})[0], F32({2}, {value, value}));
  }
  TensorDataRef i = I64({0, 3}, {});
  Expect(*Run(Model(13, "(int64[0, 3] x) => (y)", "y = ReduceMax <axes = [0]> (x)"), {i})[0],
         I64({1, 3}, std::vector<double>(3, -9223372036854775808.0)));
}

BOOST_AUTO_TEST_CASE(special_values) {
  TensorDataRef x = F32({3, 3}, {1, kNaN, 2, kInf, 1, 2, -kInf, -kInf, -kInf});
  auto run = [&](const std::string& op, int axis) {
    return Run(Model(13, "(float[3, 3] x) => (y)",
                     "y = " + op + " <axes = [" + std::to_string(axis) + "], keepdims = 0> (x)"),
               {x})[0];
  };
  Expect(*run("ReduceMax", 1), F32({3}, {kNaN, kInf, -kInf}));
  Expect(*run("ReduceMin", 1), F32({3}, {kNaN, 1, -kInf}));
  Expect(*run("ReduceMax", 0), F32({3}, {kInf, kNaN, 2}));  // the tiled path propagates NaN too
  Expect(*run("ReduceLogSumExp", 1), F32({3}, {kNaN, kInf, -kInf}));
  Expect(*run("ReduceLogSumExp", 0), F32({3}, {kInf, kNaN, std::log(std::exp(2.0) * 2)}));
  // LogSumExp stays finite where exp overflows.
  TensorDataRef big = F32({1, 3}, {1000, 1000, 999});
  Expect(
      *Run(Model(13, "(float[1, 3] x) => (y)", "y = ReduceLogSumExp <axes = [1]> (x)"), {big})[0],
      F32({1, 1}, {1000 + std::log(2 + std::exp(-1.0))}));
  Expect(*Run(Model(13, "(float[3, 1] x) => (y)", "y = ReduceLogSumExp <axes = [0]> (x)"),
              {MakeTensor(DType::kF32, {3, 1}, {1000, 1000, 999})})[0],
         F32({1, 1}, {1000 + std::log(2 + std::exp(-1.0))}));
}

BOOST_AUTO_TEST_CASE(integer_and_half_dtypes) {
  struct DtypeCase {
    DType dtype;
    const char* name;
    double lo, hi, tol;
  };
  const DtypeCase kDtypes[] = {
      {DType::kI64, "int64", -10, 10, 0},    {DType::kI32, "int32", -10, 10, 0},
      {DType::kU8, "uint8", 0, 4, 0},        {DType::kF64, "double", -2, 2, 1e-12},
      {DType::kF16, "float16", -2, 2, 3e-3}, {DType::kBF16, "bfloat16", -2, 2, 2e-2}};
  for (const DtypeCase& t : kDtypes) {
    for (const char* op : {"ReduceSum", "ReduceMax", "ReduceMin", "ReduceMean", "ReduceL1",
                           "ReduceL2", "ReduceProd", "ReduceSumSquare", "ReduceLogSumExp"}) {
      for (int axis : {0, 1}) {
        BOOST_TEST_CONTEXT(t.name << " " << op << " axis " << axis) {
          TensorDataRef x = RandomTensor(t.dtype, {4, 6}, t.lo, t.hi, axis + 3);
          std::string model = Model(
              std::string(op) == "ReduceSum" ? 11 : 13, "(" + Type(t.name, {4, 6}) + " x) => (y)",
              std::string("y = ") + op + " <axes = [" + std::to_string(axis) + "]> (x)");
          bool is_int = IsInteger(t.dtype);
          auto f = [&](const std::vector<double>& v) {
            double r = Finish(op, v);
            if (is_int) {
              // Integer outputs: the mean truncates, float-valued results truncate, and the
              // integer accumulators wrap like the output type.
              r = std::trunc(r);
              if (t.dtype == DType::kU8) r = std::fmod(r, 256.0);
            }
            return r;
          };
          double tol = std::string(op) == "ReduceProd" ? 3 * t.tol : t.tol;
          Expect(*Run(model, {x})[0], ReduceRef(*x, {axis}, true, f, t.dtype), tol, tol);
        }
      }
    }
  }
}

// ReduceSum from opset 13 takes axes as an input: constant, run-time (keepdims=1), empty with
// and without noop_with_empty_axes, or omitted.
BOOST_AUTO_TEST_CASE(reduce_sum_axes_input) {
  TensorDataRef x = RandomTensor(DType::kF32, {2, 3, 4}, -1, 1, 5);
  auto sum = [](const std::vector<double>& v) { return Finish("ReduceSum", v); };
  Expect(*Run(Model(13, "(float[2, 3, 4] x) => (y) <int64[2] a = {0, -1}>",
                    "y = ReduceSum <keepdims = 0> (x, a)"),
              {x})[0],
         ReduceRef(*x, {0, 2}, false, sum, DType::kF32));
  std::string runtime = Model(13, "(float[2, 3, 4] x, int64[K] a) => (y)", "y = ReduceSum(x, a)");
  Expect(*Run(runtime, {x, I64({1}, {1})})[0], ReduceRef(*x, {1}, true, sum, DType::kF32));
  Expect(*Run(runtime, {x, I64({2}, {-1, 0})})[0], ReduceRef(*x, {0, 2}, true, sum, DType::kF32));
  Expect(*Run(runtime, {x, I64({0}, {})})[0], ReduceRef(*x, {0, 1, 2}, true, sum, DType::kF32));
  std::string noop = Model(13, "(float[2, 3, 4] x, int64[K] a) => (y)",
                           "y = ReduceSum <noop_with_empty_axes = 1> (x, a)");
  Expect(*Run(noop, {x, I64({0}, {})})[0], x, 0, 0);
  Expect(*Run(noop, {x, I64({1}, {2})})[0], ReduceRef(*x, {2}, true, sum, DType::kF32));
  Expect(*Run(Model(13, "(float[2, 3, 4] x) => (y) <int64[0] a = {}>",
                    "y = ReduceSum <noop_with_empty_axes = 1> (x, a)"),
              {x})[0],
         x, 0, 0);
  Expect(*Run(Model(13, "(float[2, 3, 4] x) => (y)", "y = ReduceSum <keepdims = 0> (x)"), {x})[0],
         ReduceRef(*x, {0, 1, 2}, false, sum, DType::kF32));
  // Omitted axes with noop_with_empty_axes reduce nothing, as empty axes do (ONNX: "when axes
  // is empty"; an omitted optional input is empty), for every Reduce* from opset 18. What is
  // left is each element mapped alone: the input itself, |x| for L1 and L2 (ReduceL2's function
  // body is Sqrt(ReduceSumSquare(x))), x * x for SumSquare.
  std::vector<double> xs = testing::ToNd(x).v, abs = xs, square = xs;
  for (size_t i = 0; i < xs.size(); ++i) {
    abs[i] = std::fabs(xs[i]);
    square[i] = static_cast<double>(static_cast<float>(xs[i] * xs[i]));
  }
  const std::pair<const char*, const std::vector<double>*> kNoops[] = {
      {"ReduceSum", &xs}, {"ReduceMax", &xs}, {"ReduceMean", &xs},         {"ReduceLogSumExp", &xs},
      {"ReduceL1", &abs}, {"ReduceL2", &abs}, {"ReduceSumSquare", &square}};
  for (const auto& [op, want] : kNoops) {
    int opset = std::string(op) == "ReduceSum" ? 13 : 18;
    Expect(*Run(Model(opset, "(float[2, 3, 4] x) => (y)",
                      std::string("y = ") + op + " <noop_with_empty_axes = 1, keepdims = 0> (x)"),
                {x})[0],
           testing::F32({2, 3, 4}, *want), 1e-6, 1e-6);
  }
  // keepdims=0 with axes only known at run time: the axes' length fixes the output rank, their
  // values which dims go (same model, different axes).
  std::string drop1 = Model(13, "(float[2, 3, 4] x, int64[1] a) => (y)",
                            "y = ReduceSum <keepdims = 0> (x, a)");
  Expect(*Run(drop1, {x, I64({1}, {1})})[0], ReduceRef(*x, {1}, false, sum, DType::kF32));
  Expect(*Run(drop1, {x, I64({1}, {-1})})[0], ReduceRef(*x, {2}, false, sum, DType::kF32));
  Expect(*Run(drop1, {x, I64({1}, {0})})[0], ReduceRef(*x, {0}, false, sum, DType::kF32));
  std::string drop2 = Model(13, "(float[2, 3, 4] x, int64[2] a) => (y)",
                            "y = ReduceSum <keepdims = 0> (x, a)");
  Expect(*Run(drop2, {x, I64({2}, {2, 0})})[0], ReduceRef(*x, {0, 2}, false, sum, DType::kF32));
  // A repeated axis leaves fewer dims than the rank says: an error, not a wrong shape.
  BOOST_TEST(!testing::RunModel(drop2, {x, I64({2}, {1, 1})}, Table()).ok());
}

// BERT's layer norm: ReduceMean over the last axis of a symbolic batch, at two sizes.
BOOST_AUTO_TEST_CASE(symbolic_dims) {
  std::string model =
      Model(13, "(float[N, S, 19] x) => (y, z)",
            "y = ReduceMean <axes = [-1]> (x)\n z = ReduceMax <axes = [0], keepdims = 0> (x)");
  auto mean = [](const std::vector<double>& v) { return Finish("ReduceMean", v); };
  auto max = [](const std::vector<double>& v) { return Finish("ReduceMax", v); };
  for (auto [n, s] : {std::pair<int64_t, int64_t>{1, 5}, {3, 2}}) {
    TensorDataRef x = RandomTensor(DType::kF32, {n, s, 19}, -3, 3, n);
    std::vector<TensorDataRef> out = Run(model, {x});
    Expect(*out[0], ReduceRef(*x, {2}, true, mean, DType::kF32));
    Expect(*out[1], ReduceRef(*x, {0}, false, max, DType::kF32));
  }
}

// A scalar input reduces over nothing: each op's value of its one element.
BOOST_AUTO_TEST_CASE(rank_zero_input) {
  TensorDataRef x = F32({}, {-2.5});
  for (const char* op : kReductions) {
    std::string model = Model(std::string(op) == "ReduceSum" ? 11 : 13, "(float x) => (y)",
                              std::string("y = ") + op + "(x)");
    double expected = std::string(op) == "ReduceLogSum" ? kNaN : Finish(op, {-2.5});
    Expect(*Run(model, {x})[0], F32({}, {expected}));
  }
}

// ---- ArgMax / ArgMin -------------------------------------------------------------------------

TensorDataRef ArgRef(const TensorData& x, int axis, bool keepdims, bool is_max, bool last) {
  return ReduceRef(
      x, {axis}, keepdims,
      [&](const std::vector<double>& v) {
        int64_t best = 0;
        for (size_t i = 1; i < v.size(); ++i) {
          bool better = is_max ? v[i] > v[best] : v[i] < v[best];
          if (better || (last && v[i] == v[best])) best = static_cast<int64_t>(i);
        }
        return static_cast<double>(best);
      },
      DType::kI64);
}

BOOST_AUTO_TEST_CASE(arg_max_and_min) {
  for (const char* op : {"ArgMax", "ArgMin"}) {
    bool is_max = std::string(op) == "ArgMax";
    for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{3, 4, 5}, {1, 37}}) {
      int rank = static_cast<int>(dims.size());
      // Few distinct values so ties are common.
      TensorDataRef x = RandomTensor(DType::kF32, dims, 0, 3, rank);
      for (int axis = -rank; axis < rank; ++axis) {
        for (int keepdims : {0, 1}) {
          for (int last : {0, 1}) {
            std::string model =
                Model(13, "(" + Type("float", dims) + " x) => (y)",
                      std::string("y = ") + op + " <axis = " + std::to_string(axis) +
                          ", keepdims = " + std::to_string(keepdims) +
                          ", select_last_index = " + std::to_string(last) + "> (x)");
            BOOST_TEST_CONTEXT(op << " axis " << axis << " keepdims " << keepdims << " last "
                                  << last) {
              Expect(*Run(model, {x})[0],
                     ArgRef(*x, axis < 0 ? axis + rank : axis, keepdims, is_max, last), 0, 0);
            }
          }
        }
      }
    }
  }
  // Default axis 0, integer and f16 inputs.
  TensorDataRef i = MakeTensor(DType::kI32, {3, 2}, {1, 9, 7, 9, 7, -1});
  Expect(*Run(Model(11, "(int32[3, 2] x) => (y)", "y = ArgMax(x)"), {i})[0], I64({1, 2}, {1, 0}));
  Expect(
      *Run(Model(13, "(int32[3, 2] x) => (y)", "y = ArgMin <select_last_index = 1> (x)"), {i})[0],
      I64({1, 2}, {0, 2}));
  // NaN is the extreme of both (numpy): the first NaN, or the last with select_last_index.
  TensorDataRef nan = F32({2, 4}, {1, kNaN, 3, kNaN, -kInf, 2, kInf, 2});
  for (const char* op : {"ArgMax", "ArgMin"}) {
    bool is_max = std::string(op) == "ArgMax";
    Expect(*Run(Model(13, "(float[2, 4] x) => (y)", std::string("y = ") + op + " <axis = 1> (x)"),
                {nan})[0],
           I64({2, 1}, {1, is_max ? 2.0 : 0.0}));
    Expect(*Run(Model(13, "(float[2, 4] x) => (y)",
                      std::string("y = ") + op + " <axis = 1, select_last_index = 1> (x)"),
                {nan})[0],
           I64({2, 1}, {3, is_max ? 2.0 : 0.0}));
  }
  TensorDataRef h = MakeTensor(DType::kF16, {2, 3}, {0.5, 2, -1, 3, 3, 0});
  Expect(*Run(Model(13, "(float16[2, 3] x) => (y)", "y = ArgMax <axis = 1, keepdims = 0> (x)"),
              {h})[0],
         I64({2}, {1, 0}));
}

BOOST_AUTO_TEST_CASE(every_registered_reduce_op_has_a_lowering) {
  for (const char* op : kReductions) {
    for (int opset : {7, 11, 13, 17}) BOOST_TEST(Table().Find(op, opset) != nullptr, op);
  }
  for (const char* op : {"ArgMax", "ArgMin"}) BOOST_TEST(Table().Find(op, 17) != nullptr, op);
}

BOOST_AUTO_TEST_CASE(bad_axes_are_errors) {
  StatusOr<std::vector<TensorDataRef>> r =
      testing::RunModel(Model(13, "(float[2, 3] x) => (y)", "y = ArgMax <axis = 2> (x)"),
                        {RandomTensor(DType::kF32, {2, 3}, 0, 1, 1)}, Table());
  BOOST_TEST(!r.ok());
  BOOST_TEST(r.status().message().find("axis") != std::string::npos, r.status().message());
}

}  // namespace
}  // namespace kiln::compiler
