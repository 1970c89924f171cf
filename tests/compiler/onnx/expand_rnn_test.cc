// LSTM, GRU and RNN as kiln expands them at import, compiled and run end to end against
// straightforward loops written from the ONNX definitions: the cases the backend node tests do
// not reach (reverse and bidirectional, sequence_lens, clip, peepholes with initial states,
// layout 1, linear_before_reset, activations with alpha/beta).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#define BOOST_TEST_MODULE expand_rnn_test
#include <boost/test/unit_test.hpp>

#include "base/deadline.h"
#include "compiler/compile.h"
#include "tests/compiler/e2e_util.h"
#include "tests/compiler/lower/op_test_util.h"
#include "tests/compiler/onnx/run_text.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler::testing {
namespace {

using Act = std::function<double(double)>;

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

std::vector<TensorDataRef> Run(const std::string& text, const std::vector<TensorDataRef>& inputs) {
  return CompileAndRunText(text, inputs);
}

// f32 kernels against a double reference: each step is a dot product of (input + hidden) terms
// and a few transcendental ops, each within a few ulps; errors carried through 5 steps of a
// contracting recurrence stay well below 1e-5 for values of magnitude <= 1.
void Check(const TensorDataRef& got, const Nd& want, const std::string& what) {
  std::vector<double> v = want.v;
  std::string diff = Compare(*got, *MakeTensor(DType::kF32, want.dims, v), 1e-5, 1e-5);
  BOOST_TEST(diff.empty(), what << ": " << diff);
}

struct Dims {
  int64_t seq, batch, input, hidden, dirs;
};

// One recurrent layer computed the plain way. `cell(d, t, b, x, h, c) -> (h', c')` computes a
// step for direction d; lens[b] bounds each batch entry; reverse directions run from the end.
struct Reference {
  Nd y, y_h, y_c;
};

Reference Recur(const Dims& n, const std::vector<int64_t>& lens, const std::vector<bool>& reverse,
                const Nd& h0, const Nd& c0,
                const std::function<void(int64_t d, int64_t t, int64_t b, std::vector<double>& h,
                                         std::vector<double>& c)>& cell) {
  Reference r;
  r.y = Generate({n.seq, n.dirs, n.batch, n.hidden}, [](auto&) { return 0.0; });
  r.y_h = Generate({n.dirs, n.batch, n.hidden}, [](auto&) { return 0.0; });
  r.y_c = r.y_h;
  for (int64_t d = 0; d < n.dirs; ++d) {
    for (int64_t b = 0; b < n.batch; ++b) {
      std::vector<double> h(n.hidden), c(n.hidden);
      for (int64_t j = 0; j < n.hidden; ++j) h[j] = h0.at({d, b, j}), c[j] = c0.at({d, b, j});
      for (int64_t s = 0; s < n.seq; ++s) {
        int64_t t = reverse[d] ? n.seq - 1 - s : s;
        if (t >= lens[b]) continue;
        cell(d, t, b, h, c);
        for (int64_t j = 0; j < n.hidden; ++j) r.y[{t, d, b, j}] = h[j];
      }
      for (int64_t j = 0; j < n.hidden; ++j) r.y_h[{d, b, j}] = h[j], r.y_c[{d, b, j}] = c[j];
    }
  }
  return r;
}

// sum_i x[t, b, i] * w[d, row, i] + sum_j h[j] * r[d, row, j]
double Dot(const Nd& x, const Nd& w, const Nd& r, int64_t d, int64_t t, int64_t b, int64_t row,
           const std::vector<double>& h) {
  double s = 0;
  for (int64_t i = 0; i < x.dims[2]; ++i) s += x.at({t, b, i}) * w.at({d, row, i});
  for (size_t j = 0; j < h.size(); ++j) s += h[j] * r.at({d, row, static_cast<int64_t>(j)});
  return s;
}

BOOST_AUTO_TEST_CASE(bidirectional_lstm_with_lengths_peepholes_clip_and_initial_states) {
  Dims n{5, 3, 3, 4, 2};
  const int64_t H = n.hidden;
  auto X = RandomTensor(DType::kF32, {n.seq, n.batch, n.input}, -1, 1, 1);
  auto W = RandomTensor(DType::kF32, {2, 4 * H, n.input}, -0.6, 0.6, 2);
  auto R = RandomTensor(DType::kF32, {2, 4 * H, H}, -0.6, 0.6, 3);
  auto B = RandomTensor(DType::kF32, {2, 8 * H}, -0.5, 0.5, 4);
  auto L = MakeTensor(DType::kI32, {n.batch}, {5, 2, 4});
  auto H0 = RandomTensor(DType::kF32, {2, n.batch, H}, -1, 1, 5);
  auto C0 = RandomTensor(DType::kF32, {2, n.batch, H}, -1, 1, 6);
  auto P = RandomTensor(DType::kF32, {2, 3 * H}, -0.5, 0.5, 7);
  std::string text = Model(
      14,
      "(float[5,3,3] X, float[2,16,3] W, float[2,16,4] R, float[2,32] B, int32[3] L, "
      "float[2,3,4] H0, float[2,3,4] C0, float[2,12] P) => (float[5,2,3,4] Y, float[2,3,4] Yh, "
      "float[2,3,4] Yc)",
      "Y, Yh, Yc = LSTM <hidden_size = 4, direction = \"bidirectional\", clip = 1.5> "
      "(X, W, R, B, L, H0, C0, P)");
  std::vector<TensorDataRef> got = Run(text, {X, W, R, B, L, H0, C0, P});

  Nd x = ToNd(X), w = ToNd(W), r = ToNd(R), b = ToNd(B), p = ToNd(P);
  auto clip = [](double v) { return std::max(-1.5, std::min(1.5, v)); };
  Reference want = Recur(n, {5, 2, 4}, {false, true}, ToNd(H0), ToNd(C0),
                         [&](int64_t d, int64_t t, int64_t bi, std::vector<double>& h,
                             std::vector<double>& c) {
    std::vector<double> h2(H), c2(H);
    for (int64_t j = 0; j < H; ++j) {
      auto gate = [&](int k) {
        return Dot(x, w, r, d, t, bi, k * H + j, h) + b.at({d, k * H + j}) +
               b.at({d, 4 * H + k * H + j});
      };
      double i = Sigmoid(clip(gate(0) + p.at({d, j}) * c[j]));
      double f = Sigmoid(clip(gate(2) + p.at({d, 2 * H + j}) * c[j]));
      double cand = std::tanh(clip(gate(3)));
      c2[j] = f * c[j] + i * cand;
      double o = Sigmoid(clip(gate(1) + p.at({d, H + j}) * c2[j]));
      h2[j] = o * std::tanh(c2[j]);
    }
    h = h2, c = c2;
  });
  Check(got[0], want.y, "Y");
  Check(got[1], want.y_h, "Y_h");
  Check(got[2], want.y_c, "Y_c");
}

// GRU in both reset modes, reverse, batch-major (layout 1), with lengths.
void CheckGru(bool linear_before_reset) {
  BOOST_TEST_CONTEXT("linear_before_reset = " << linear_before_reset) {
    Dims n{4, 2, 3, 5, 1};
    const int64_t H = n.hidden;
    auto X = RandomTensor(DType::kF32, {n.batch, n.seq, n.input}, -1, 1, 11);
    auto W = RandomTensor(DType::kF32, {1, 3 * H, n.input}, -0.6, 0.6, 12);
    auto R = RandomTensor(DType::kF32, {1, 3 * H, H}, -0.6, 0.6, 13);
    auto B = RandomTensor(DType::kF32, {1, 6 * H}, -0.5, 0.5, 14);
    auto L = MakeTensor(DType::kI32, {n.batch}, {3, 4});
    auto H0 = RandomTensor(DType::kF32, {n.batch, 1, H}, -1, 1, 15);
    std::string text = Model(
        14,
        "(float[2,4,3] X, float[1,15,3] W, float[1,15,5] R, float[1,30] B, int32[2] L, "
        "float[2,1,5] H0) => (float[2,4,1,5] Y, float[2,1,5] Yh)",
        "Y, Yh = GRU <hidden_size = 5, direction = \"reverse\", layout = 1, "
        "linear_before_reset = " + std::to_string(linear_before_reset ? 1 : 0) +
            "> (X, W, R, B, L, H0)");
    std::vector<TensorDataRef> got = Run(text, {X, W, R, B, L, H0});

    // The reference works time-major; transpose the batch-major tensors in and out.
    Nd xb = ToNd(X), h0b = ToNd(H0);
    Nd x = Generate({n.seq, n.batch, n.input}, [&](auto& i) { return xb.at({i[1], i[0], i[2]}); });
    Nd h0 = Generate({1, n.batch, H}, [&](auto& i) { return h0b.at({i[1], 0, i[2]}); });
    Nd w = ToNd(W), r = ToNd(R), b = ToNd(B);
    Reference want = Recur(n, {3, 4}, {true}, h0, h0,
                           [&](int64_t d, int64_t t, int64_t bi, std::vector<double>& h,
                               std::vector<double>&) {
      std::vector<double> h2(H);
      auto xw = [&](int k, int64_t j) {
        double s = b.at({d, k * H + j});
        for (int64_t i = 0; i < n.input; ++i) s += x.at({t, bi, i}) * w.at({d, k * H + j, i});
        return s;
      };
      auto hr = [&](int k, int64_t j, const std::vector<double>& hv) {
        double s = 0;
        for (int64_t i = 0; i < H; ++i) s += hv[i] * r.at({d, k * H + j, i});
        return s;
      };
      std::vector<double> z(H), rg(H), rh(H);
      for (int64_t j = 0; j < H; ++j) {
        z[j] = Sigmoid(xw(0, j) + hr(0, j, h) + b.at({d, 3 * H + j}));
        rg[j] = Sigmoid(xw(1, j) + hr(1, j, h) + b.at({d, 4 * H + j}));
      }
      for (int64_t j = 0; j < H; ++j) rh[j] = rg[j] * h[j];
      for (int64_t j = 0; j < H; ++j) {
        double rec = linear_before_reset ? rg[j] * (hr(2, j, h) + b.at({d, 5 * H + j}))
                                         : hr(2, j, rh) + b.at({d, 5 * H + j});
        double cand = std::tanh(xw(2, j) + rec);
        h2[j] = (1 - z[j]) * cand + z[j] * h[j];
      }
      h = h2;
    });
    Nd y = Generate({n.batch, n.seq, 1, H}, [&](auto& i) { return want.y.at({i[1], 0, i[0], i[3]}); });
    Nd yh = Generate({n.batch, 1, H}, [&](auto& i) { return want.y_h.at({0, i[0], i[2]}); });
    Check(got[0], y, "Y");
    Check(got[1], yh, "Y_h");
  }
}

BOOST_AUTO_TEST_CASE(reverse_batch_major_gru_in_both_reset_modes) {
  CheckGru(false);
  CheckGru(true);
}

// Each direction has its own activation; alpha/beta go to the activations that take them.
BOOST_AUTO_TEST_CASE(bidirectional_rnn_with_activation_parameters) {
  Dims n{3, 2, 2, 3, 2};
  const int64_t H = n.hidden;
  auto X = RandomTensor(DType::kF32, {n.seq, n.batch, n.input}, -1, 1, 21);
  auto W = RandomTensor(DType::kF32, {2, H, n.input}, -0.8, 0.8, 22);
  auto R = RandomTensor(DType::kF32, {2, H, H}, -0.8, 0.8, 23);
  std::string text = Model(
      14, "(float[3,2,2] X, float[2,3,2] W, float[2,3,3] R) => (float[3,2,2,3] Y, float[2,2,3] Yh)",
      "Y, Yh = RNN <hidden_size = 3, direction = \"bidirectional\", "
      "activations = [\"Relu\", \"HardSigmoid\"], activation_alpha = [0.3], "
      "activation_beta = [0.6]> (X, W, R)");
  std::vector<TensorDataRef> got = Run(text, {X, W, R});
  Nd x = ToNd(X), w = ToNd(W), r = ToNd(R);
  Nd zeros = Generate({2, n.batch, H}, [](auto&) { return 0.0; });
  std::vector<Act> act = {[](double v) { return std::max(0.0, v); },
                          [](double v) { return std::max(0.0, std::min(1.0, 0.3 * v + 0.6)); }};
  Reference want = Recur(n, {3, 3}, {false, true}, zeros, zeros,
                         [&](int64_t d, int64_t t, int64_t bi, std::vector<double>& h,
                             std::vector<double>&) {
    std::vector<double> h2(H);
    for (int64_t j = 0; j < H; ++j) h2[j] = act[d](Dot(x, w, r, d, t, bi, j, h));
    h = h2;
  });
  Check(got[0], want.y, "Y");
  Check(got[1], want.y_h, "Y_h");
}

// Weights given as initializers, as exported models have them: values with six decimals, so
// the text the model is written in holds them exactly (up to f32 rounding).
std::vector<double> Weights(int64_t count, int seed) {
  std::vector<double> v(count);
  for (int64_t i = 0; i < count; ++i) v[i] = 0.001 * ((i * 37 + seed * 11) % 601 - 300);
  return v;
}

// The loop bodies of `listing` (kiln inspect's text), one string each.
std::vector<std::string> Bodies(const std::string& listing) {
  std::vector<std::string> bodies;
  for (size_t at = listing.find("\nfunc @"); at != std::string::npos;) {
    size_t end = listing.find("\nfunc @", at + 1);
    std::string f = listing.substr(at, end == std::string::npos ? end : end - at);
    if (f.substr(0, f.find('(')).find("/body") != std::string::npos) bodies.push_back(f);
    at = end;
  }
  return bodies;
}

size_t Occurrences(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// A step of the loop a GRU without linear_before_reset becomes: the recurrent product reads R
// packed at compile time (a constant of the file; no unpacked MatMul and no packing at run
// time), and the gates come out of one Split per gate vector instead of a Reshape and a Gather
// kernel per gate. The LSTM has no loop: one kernel.
// Opset 18, where Split needs num_outputs; values against the unrolled float64 recurrence.
BOOST_AUTO_TEST_CASE(a_step_reads_packed_weights_and_splits_its_gates_once) {
  Dims n{4, 2, 3, 8, 1};
  const int64_t H = n.hidden;
  auto X = RandomTensor(DType::kF32, {n.seq, n.batch, n.input}, -1, 1, 31);
  Nd x = ToNd(X);
  for (bool lstm : {true, false}) {
    BOOST_TEST_CONTEXT((lstm ? "LSTM" : "GRU")) {
      const int gates = lstm ? 4 : 3;
      Nd w{{1, gates * H, n.input}, Weights(gates * H * n.input, 1)};
      Nd r{{1, gates * H, H}, Weights(gates * H * H, 2)};
      Nd b{{1, 2 * gates * H}, Weights(2 * gates * H, 3)};
      std::string op = lstm ? "Y, Yh, Yc = LSTM <hidden_size = 8> (X, W, R, B)"
                            : "Y, Yh = GRU <hidden_size = 8> (X, W, R, B)";
      std::string inits = "float" + Shape(w.dims) + " W = {" + Floats(w.v) + "}, float" +
                          Shape(r.dims) + " R = {" + Floats(r.v) + "}, float" + Shape(b.dims) +
                          " B = {" + Floats(b.v) + "}";
      std::string outs = "float[4,1,2,8] Y, float[1,2,8] Yh";
      if (lstm) outs += ", float[1,2,8] Yc";
      std::string listing;
      std::vector<TensorDataRef> got =
          CompileAndRunText(Model(18, "float[4,2,3] X", outs, op, inits), {X}, &listing);

      std::vector<std::string> bodies = Bodies(listing);
      BOOST_TEST(Occurrences(listing, "'MatMul") == 0u, listing);
      if (lstm) {
        // A default LSTM is one kiln::RecurrentSequence kernel, no loop (R packed from the
        // initializer at compile time).
        BOOST_TEST(bodies.empty(), listing);
        BOOST_TEST(Occurrences(listing, "'RecurrentSequence") == 1u, listing);
      } else {
        BOOST_TEST_REQUIRE(bodies.size() == 1u, listing);
        const std::string& body = bodies[0];
        // GRU (linear_before_reset = 0): h R_zr^T and (r * h) R_h^T.
        BOOST_TEST(Occurrences(body, "'PackedMatMul") == 2u, body);
        BOOST_TEST(Occurrences(body, "'Split") == 2u, body);
        BOOST_TEST(Occurrences(body, "reshape_tensor") == 0u, body);
      }

      Nd zeros = Generate({1, n.batch, H}, [](auto&) { return 0.0; });
      std::vector<double> no_c(H, 0.0);
      Reference want = Recur(n, {n.seq, n.seq}, {false}, zeros, zeros,
                             [&](int64_t, int64_t t, int64_t bi, std::vector<double>& h,
                                 std::vector<double>& c) {
        // x W_k^T + Wb_k (+ h R_k^T + Rb_k) for row j of gate k; `hv` replaces h.
        auto xw = [&](int k, int64_t j) {
          double s = b.at({0, k * H + j});
          for (int64_t i = 0; i < n.input; ++i) s += x.at({t, bi, i}) * w.at({0, k * H + j, i});
          return s;
        };
        auto hr = [&](int k, int64_t j, const std::vector<double>& hv) {
          double s = b.at({0, (gates + k) * H + j});
          for (int64_t i = 0; i < H; ++i) s += hv[i] * r.at({0, k * H + j, i});
          return s;
        };
        std::vector<double> h2(H), c2(H);
        if (lstm) {
          for (int64_t j = 0; j < H; ++j) {
            auto g = [&](int k) { return xw(k, j) + hr(k, j, h); };
            c2[j] = Sigmoid(g(2)) * c[j] + Sigmoid(g(0)) * std::tanh(g(3));
            h2[j] = Sigmoid(g(1)) * std::tanh(c2[j]);
          }
          c = c2;
        } else {
          std::vector<double> z(H), rh(H);
          for (int64_t j = 0; j < H; ++j) {
            z[j] = Sigmoid(xw(0, j) + hr(0, j, h));
            rh[j] = Sigmoid(xw(1, j) + hr(1, j, h)) * h[j];
          }
          for (int64_t j = 0; j < H; ++j) {
            double cand = std::tanh(xw(2, j) + hr(2, j, rh));
            h2[j] = (1 - z[j]) * cand + z[j] * h[j];
          }
        }
        h = h2;
      });
      Check(got[0], want.y, "Y");
      Check(got[1], want.y_h, "Y_h");
      if (lstm) Check(got[2], want.y_c, "Y_c");
    }
  }
}

// A layer kiln::RecurrentSequence runs: which cell, direction, layout, hidden size (20 and 7
// leave a partial panel of 16 units, 32 fills two), bias, initial states and clip.
struct Layer {
  std::string op;  // "LSTM", "GRU" (linear_before_reset = 1), "RNN"
  std::string direction;
  int64_t layout, hidden;
  bool bias, states;
  double clip;  // 0: none
  int64_t batch = 3, seq = 5;
};

std::string Describe(const Layer& c) {
  return c.op + " " + c.direction + " layout " + std::to_string(c.layout) + " hidden " +
         std::to_string(c.hidden) + (c.bias ? " B" : "") + (c.states ? " H0/C0" : "") +
         (c.clip > 0 ? " clip" : "") + " batch " + std::to_string(c.batch) + " seq " +
         std::to_string(c.seq);
}

// Compiles `c` as an ONNX model, checks that it became one RecurrentSequence kernel and no
// loop body, and compares Y, Y_h (and Y_c) with the float64 recurrence.
void CheckLayer(const Layer& c) {
  const bool lstm = c.op == "LSTM", gru = c.op == "GRU";
  const int64_t G = lstm ? 4 : gru ? 3 : 1, D = c.direction == "bidirectional" ? 2 : 1;
  const int64_t H = c.hidden;
  Dims n{c.seq, c.batch, 4, H, D};
  auto major = [&](std::vector<int64_t> time_major) {  // [seq|dirs, batch, ...] -> layout
    if (c.layout == 1) std::swap(time_major[0], time_major[1]);
    return time_major;
  };
  auto X = RandomTensor(DType::kF32, major({n.seq, n.batch, n.input}), -1, 1, 41);
  auto W = RandomTensor(DType::kF32, {D, G * H, n.input}, -0.5, 0.5, 42);
  auto R = RandomTensor(DType::kF32, {D, G * H, H}, -0.3, 0.3, 43);
  auto B = RandomTensor(DType::kF32, {D, 2 * G * H}, -0.5, 0.5, 44);
  auto H0 = RandomTensor(DType::kF32, major({D, n.batch, H}), -1, 1, 45);
  auto C0 = RandomTensor(DType::kF32, major({D, n.batch, H}), -1, 1, 46);
  std::string ins = "float" + Shape(X->dims()) + " X, float" + Shape(W->dims()) + " W, float" +
                    Shape(R->dims()) + " R";
  std::string args = "X, W, R";
  std::vector<TensorDataRef> values = {X, W, R};
  if (c.bias || c.states) args += c.bias ? ", B" : ", ";
  if (c.bias) ins += ", float" + Shape(B->dims()) + " B", values.push_back(B);
  if (c.states) {
    ins += ", float" + Shape(H0->dims()) + " H0", args += ", , H0", values.push_back(H0);
    if (lstm) ins += ", float" + Shape(C0->dims()) + " C0", args += ", C0", values.push_back(C0);
  }
  std::vector<int64_t> y_dims = {n.seq, D, n.batch, H}, s_dims = major({D, n.batch, H});
  if (c.layout == 1) y_dims = {n.batch, n.seq, D, H};
  std::string outs = "float" + Shape(y_dims) + " Y, float" + Shape(s_dims) + " Yh";
  if (lstm) outs += ", float" + Shape(s_dims) + " Yc";
  std::string attrs = "hidden_size = " + std::to_string(H) + ", direction = \"" + c.direction +
                      "\", layout = " + std::to_string(c.layout);
  if (gru) attrs += ", linear_before_reset = 1";
  if (c.clip > 0) attrs += ", clip = " + std::to_string(c.clip);
  std::string node = (lstm ? "Y, Yh, Yc = " : "Y, Yh = ") + c.op + " <" + attrs + "> (" + args + ")";
  std::string listing;
  std::vector<TensorDataRef> got =
      CompileAndRunText(Model(14, "(" + ins + ") => (" + outs + ")", node), values, &listing);
  BOOST_TEST(Bodies(listing).empty(), listing);
  BOOST_TEST(Occurrences(listing, "'RecurrentSequence") == 1u, listing);

  // The reference is time-major.
  auto time_major = [&](const TensorDataRef& t) {
    Nd v = ToNd(*t);
    if (c.layout == 0) return v;
    std::vector<int64_t> dims = v.dims;
    std::swap(dims[0], dims[1]);
    return Generate(dims, [&](auto& i) {
      std::vector<int64_t> j = i;
      std::swap(j[0], j[1]);
      return v.at(j);
    });
  };
  Nd x = time_major(X), w = ToNd(*W), r = ToNd(*R);
  Nd b = c.bias ? ToNd(*B) : Generate({D, 2 * G * H}, [](auto&) { return 0.0; });
  Nd zeros = Generate({D, n.batch, H}, [](auto&) { return 0.0; });
  Nd h0 = c.states ? time_major(H0) : zeros, c0 = c.states && lstm ? time_major(C0) : zeros;
  auto clip = [&](double v) { return c.clip > 0 ? std::max(-c.clip, std::min(c.clip, v)) : v; };
  std::vector<bool> reverse = {c.direction == "reverse", true};
  Reference want = Recur(n, std::vector<int64_t>(n.batch, n.seq), reverse, h0, c0,
                         [&](int64_t d, int64_t t, int64_t bi, std::vector<double>& h,
                             std::vector<double>& cs) {
    auto in = [&](int64_t k, int64_t j) {  // x W_k^T + Wb_k
      double v = b.at({d, k * H + j});
      for (int64_t i = 0; i < n.input; ++i) v += x.at({t, bi, i}) * w.at({d, k * H + j, i});
      return v;
    };
    auto rec = [&](int64_t k, int64_t j) {  // h R_k^T + Rb_k
      double v = b.at({d, (G + k) * H + j});
      for (int64_t i = 0; i < H; ++i) v += h[i] * r.at({d, k * H + j, i});
      return v;
    };
    std::vector<double> h2(H), c2(H);
    for (int64_t j = 0; j < H; ++j) {
      if (lstm) {
        auto g = [&](int k) { return clip(in(k, j) + rec(k, j)); };
        c2[j] = Sigmoid(g(2)) * cs[j] + Sigmoid(g(0)) * std::tanh(g(3));
        h2[j] = Sigmoid(g(1)) * std::tanh(c2[j]);
      } else if (gru) {
        double z = Sigmoid(clip(in(0, j) + rec(0, j))), rg = Sigmoid(clip(in(1, j) + rec(1, j)));
        double cand = std::tanh(clip(in(2, j) + rg * rec(2, j)));
        h2[j] = (1 - z) * cand + z * h[j];
      } else {
        h2[j] = std::tanh(clip(in(0, j) + rec(0, j)));
      }
    }
    h = h2;
    if (lstm) cs = c2;
  });
  auto layout = [&](const Nd& v) {  // back to the model's layout
    if (c.layout == 0) return v;
    if (v.dims.size() == 4) {
      return Generate(y_dims, [&](auto& i) { return v.at({i[1], i[2], i[0], i[3]}); });
    }
    return Generate(s_dims, [&](auto& i) { return v.at({i[1], i[0], i[2]}); });
  };
  Check(got[0], layout(want.y), "Y");
  Check(got[1], layout(want.y_h), "Y_h");
  if (lstm) Check(got[2], layout(want.y_c), "Y_c");
}

// Layers with the default activations and no sequence_lens or peepholes run every step in one
// kernel (kiln::RecurrentSequence), both directions of a bidirectional one included.
BOOST_AUTO_TEST_CASE(whole_layers_run_as_one_kernel) {
  const Layer layers[] = {
      {"LSTM", "bidirectional", 0, 20, true, true, 2.0},
      {"LSTM", "forward", 1, 16, false, false, 0},
      {"LSTM", "reverse", 0, 7, true, false, 0},
      {"GRU", "reverse", 0, 20, true, true, 0},
      {"GRU", "bidirectional", 1, 32, true, true, 1.5},
      {"GRU", "forward", 0, 5, false, false, 0},
      {"RNN", "bidirectional", 0, 20, true, true, 0},
      {"RNN", "forward", 1, 3, true, false, 0.5},
  };
  for (const Layer& c : layers) {
    BOOST_TEST_CONTEXT(Describe(c)) { CheckLayer(c); }
  }
}

// One sequence (unidirectional, batch 1) with hidden x gates x hidden >= 2^16 multiply-adds per
// step runs on a team (OMP_NUM_THREADS=2 in BUILD): each thread owns a range of 16-unit panels,
// with a barrier per step. Whole and partial last panels (136 = 8 x 16 + 8, 260 = 16 x 16 + 4),
// both directions of time, initial states and clip, and one step (where the copy of the last h
// into Y_h must wait for every thread to have read Y_h). Batch 2 of the same size stays on the
// per-row path.
BOOST_AUTO_TEST_CASE(one_sequence_splits_its_panels_over_a_team) {
  const Layer layers[] = {
      {"LSTM", "forward", 0, 136, true, true, 0, 1, 5},
      {"LSTM", "reverse", 1, 128, true, true, 3.0, 1, 4},
      {"GRU", "reverse", 0, 160, true, true, 0, 1, 5},
      {"GRU", "forward", 1, 160, false, false, 0, 2, 3},
      {"RNN", "forward", 0, 260, true, true, 0, 1, 1},
  };
  for (const Layer& c : layers) {
    BOOST_TEST_CONTEXT(Describe(c)) { CheckLayer(c); }
  }
}

// Clocks for the deadline test (ScopedDeadlineClockForTesting): each read "takes" 1 ms.
std::atomic<int64_t> ticks_ms{0};
Clock::time_point TickingNow() {
  return Clock::time_point(std::chrono::milliseconds(ticks_ms.fetch_add(1) + 1));
}

// A run whose deadline passes in the middle of a team's sequence: the barrier that notices it
// stops every thread of the team at the same step (none waits for a team-mate that skipped the
// rest), the VM reports DeadlineExceeded, and the kernel read the clock about once per step
// until then, not for all 400 steps. The same run without a deadline completes.
BOOST_AUTO_TEST_CASE(a_deadline_mid_sequence_stops_the_team) {
  const int64_t seq = 400, hidden = 128;
  std::string text =
      "<ir_version: 8, opset_import: [\"\" : 14, \"kiln\" : 1]>\ng (float[400,1,512] XW, "
      "float[1,8,128,4,16] RP) => (float[400,1,1,128] Y, float[1,1,128] Yh, float[1,1,128] Yc) "
      "{\nY, Yh, Yc = kiln.RecurrentSequence <kind = 0, hidden_size = 128> (XW, RP)\n}";
  std::shared_ptr<const Executable> exe = CompileAndLoadText(text);
  auto xw = RandomTensor(DType::kF32, {seq, 1, 4 * hidden}, -1, 1, 51);
  auto rp = RandomTensor(DType::kF32, {1, 8, hidden, 4, 16}, -0.1, 0.1, 52);
  std::vector<Tensor> in = {ToTensor(*xw), ToTensor(*rp)};
  auto ctx = Context::Create(exe);
  BOOST_TEST_REQUIRE(ctx.ok(), ctx.status().ToString());
  auto full = (*ctx)->Invoke(exe->entry_function(), in);  // compiles the kernel, too
  BOOST_TEST_REQUIRE(full.ok(), full.status().ToString());

  ScopedDeadlineClockForTesting clock(&TickingNow);
  const int64_t start = ticks_ms.load();
  InvokeOptions run;
  run.deadline = Clock::time_point(std::chrono::milliseconds(start + 40));
  auto out = (*ctx)->Invoke(exe->entry_function(), in, run);
  BOOST_TEST((out.status().code() == StatusCode::kDeadlineExceeded), out.status().ToString());
  const int64_t reads = ticks_ms.load() - start;
  BOOST_TEST(reads >= 40);
  BOOST_TEST(reads < 100);  // the kernel stopped reading the clock (and stepping) once stopped
}

// kiln::RecurrentSequence written by hand (a model importing the "kiln" domain): weights that
// do not match its attributes are a shape-inference error naming the node and the operand.
BOOST_AUTO_TEST_CASE(a_recurrent_sequence_with_mismatched_operands_is_an_error) {
  auto error = [](const std::string& xw, const std::string& rp) {
    std::string text =
        "<ir_version: 8, opset_import: [\"\" : 14, \"kiln\" : 1]>\ng (float" + xw +
        " XW, float" + rp + " RP) => (float[5,1,1,16] Y, float[1,1,16] Yh, float[1,1,16] Yc) {\n"
        "Y, Yh, Yc = kiln.RecurrentSequence <kind = 0, hidden_size = 16> (XW, RP)\n}";
    StatusOr<Graph> g = InferText(text);
    BOOST_TEST_REQUIRE(!g.ok());
    return g.status().message();
  };
  std::string panels = error("[5,1,64]", "[1,2,16,4,16]");
  BOOST_TEST(panels.find("packed R [1, 2, 16, 4, 16]") != std::string::npos, panels);
  BOOST_TEST(panels.find("RecurrentSequence") != std::string::npos, panels);
  std::string gates = error("[5,1,48]", "[1,1,16,4,16]");
  BOOST_TEST(gates.find("XW [5, 1, 48]") != std::string::npos, gates);
}

BOOST_AUTO_TEST_CASE(bad_recurrent_nodes_are_errors_naming_the_node) {
  auto error = [](const std::string& attrs) {
    std::string text = Model(14, "(float[2,1,2] X, float[1,3,2] W, float[1,3,3] R) => (float[2,1,1,3] Y)",
                             "Y = RNN <" + attrs + "> (X, W, R)");
    StatusOr<Graph> g = ImportText(text);
    BOOST_TEST_REQUIRE(!g.ok());
    return g.status();
  };
  Status unknown = error("hidden_size = 3, activations = [\"Swish\"]");
  BOOST_TEST((unknown.code() == StatusCode::kUnsupported));
  BOOST_TEST(unknown.message().find("activation 'swish'") != std::string::npos, unknown.message());
  BOOST_TEST(unknown.message().find("RNN node") != std::string::npos, unknown.message());
  Status no_size = error("direction = \"forward\"");
  BOOST_TEST((no_size.code() == StatusCode::kInvalidFormat));
  BOOST_TEST(no_size.message().find("hidden_size") != std::string::npos, no_size.message());
  Status bad_dir = error("hidden_size = 3, direction = \"sideways\"");
  BOOST_TEST(bad_dir.message().find("sideways") != std::string::npos, bad_dir.message());
}

}  // namespace
}  // namespace kiln::compiler::testing
