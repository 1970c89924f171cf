// LSTM, GRU and RNN as kiln expands them at import, compiled and run end to end against
// straightforward loops written from the ONNX definitions: the cases the backend node tests do
// not reach (reverse and bidirectional, sequence_lens, clip, peepholes with initial states,
// layout 1, linear_before_reset, activations with alpha/beta).
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#define BOOST_TEST_MODULE expand_rnn_test
#include <boost/test/unit_test.hpp>

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

// A step of the loop an LSTM / GRU becomes: the recurrent product reads R packed at compile
// time (a constant of the file; no unpacked MatMul and no packing at run time), and the gates
// come out of one Split per gate vector instead of a Reshape and a Gather kernel per gate.
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
      BOOST_TEST_REQUIRE(bodies.size() == 1u, listing);
      const std::string& body = bodies[0];
      // LSTM: h R^T; GRU (linear_before_reset = 0): h R_zr^T and (r * h) R_h^T.
      BOOST_TEST(Occurrences(body, "'PackedMatMul") == (lstm ? 1u : 2u), body);
      BOOST_TEST(Occurrences(listing, "'MatMul") == 0u, listing);
      BOOST_TEST(Occurrences(body, "'Split") == (lstm ? 1u : 2u), body);
      BOOST_TEST(Occurrences(body, "reshape_tensor") == 0u, body);

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
