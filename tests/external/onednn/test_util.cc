// Helpers for the oneDNN vendor tests (see test_util.h).
#include "tests/external/onednn/test_util.h"

#include <onnx/defs/parser.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <stdexcept>

#include "compiler/onnx/importer.h"
#include "compiler/passes/shape_inference.h"

namespace kiln::onednn::testing {

using compiler::Graph;

compiler::Graph MakeGraph(const std::string& text, const std::vector<Init>& inits) {
  onnx::ModelProto model;
  onnx::Status status = onnx::OnnxParser::Parse(model, text.c_str());
  if (!status.IsOK()) throw std::runtime_error("bad ONNX text: " + status.ErrorMessage());
  // `float Y` in the text declares a scalar; the tests leave output shapes to inference.
  for (onnx::ValueInfoProto& out : *model.mutable_graph()->mutable_output())
    out.mutable_type()->mutable_tensor_type()->clear_shape();
  for (const Init& init : inits) {
    onnx::TensorProto* t = model.mutable_graph()->add_initializer();
    t->set_name(init.name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (int64_t d : init.dims) t->add_dims(d);
    if (Numel(init.dims) != static_cast<int64_t>(init.data.size()))
      throw std::runtime_error("initializer " + init.name + " has the wrong size");
    for (float f : init.data) t->add_float_data(f);
  }
  std::string bytes;
  model.SerializeToString(&bytes);
  StatusOr<Graph> g = compiler::ImportOnnxBytes(bytes);
  if (!g.ok()) throw std::runtime_error(g.status().ToString());
  Status s = compiler::InferShapes(*g);
  if (!s.ok()) throw std::runtime_error(s.ToString());
  return std::move(*g);
}

Floats Random(int64_t n, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Floats v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

int64_t Numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t x : d) n *= x;
  return n;
}

namespace {

std::vector<compiler::ValueId> RegionInputs(const Graph& g) {
  std::vector<compiler::ValueId> in;
  for (compiler::ValueId v : g.inputs()) {
    if (g.value(v).kind == compiler::ValueKind::kGraphInput) in.push_back(v);
  }
  return in;
}

Shape ToShape(const Dims& d) {
  StatusOr<Shape> s = Shape::Make(d.data(), static_cast<int>(d.size()));
  if (!s.ok()) throw std::runtime_error(s.status().ToString());
  return *s;
}

}  // namespace

StatusOr<compiler::ExternalCode> CodegenAll(const Graph& graph) {
  std::vector<compiler::NodeId> nodes;
  for (int i = 0; i < graph.num_nodes(); ++i) nodes.push_back(i);
  return Codegen(graph, nodes, RegionInputs(graph), graph.outputs());
}

ExternalRegionSpec MakeSpec(const compiler::ExternalCode& code,
                            const std::vector<Tensor>& constants, int num_inputs, int num_outputs,
                            const char* name) {
  ExternalRegionSpec spec;
  spec.name = name;
  spec.vendor = kVendorName;
  spec.blob = code.blob.data();
  spec.blob_size = code.blob.size();
  spec.constants = constants;
  spec.num_inputs = num_inputs;
  spec.num_outputs = num_outputs;
  return spec;
}

CompiledRegion Compile(Graph graph, OneDnnOptions options) {
  CompiledRegion r;
  r.graph = std::make_shared<Graph>(std::move(graph));
  StatusOr<compiler::ExternalCode> code = CodegenAll(*r.graph);
  if (!code.ok()) throw std::runtime_error(code.status().ToString());
  r.code = std::move(*code);
  for (const compiler::ExternalConstant& c : r.code.constants) {
    const compiler::TensorData& d =
        c.value != compiler::kNoValue ? *r.graph->value(c.value).data : *c.data;
    r.constants.push_back(Tensor::Wrap(const_cast<void*>(d.data()), d.dtype(), ToShape(d.dims())));
  }
  OneDnnRuntime runtime(options);
  StatusOr<std::unique_ptr<TensorFunction>> fn = runtime.CreateRegion(
      MakeSpec(r.code, r.constants, static_cast<int>(RegionInputs(*r.graph).size()),
               static_cast<int>(r.graph->outputs().size())));
  if (!fn.ok()) throw std::runtime_error(fn.status().ToString());
  r.fn = std::move(*fn);
  return r;
}

Status CompiledRegion::TryRun(const std::vector<std::pair<Dims, Floats>>& inputs,
                              const std::vector<Dims>& output_shapes,
                              std::vector<Floats>* outputs, RegionProfiler* profiler) const {
  std::vector<Floats> in_data;
  for (const auto& [d, v] : inputs) in_data.push_back(v);
  outputs->clear();
  for (const Dims& d : output_shapes) outputs->push_back(Floats(Numel(d), NAN));
  std::vector<Tensor> tensors;
  for (size_t i = 0; i < inputs.size(); ++i)
    tensors.push_back(Tensor::Wrap(in_data[i].data(), DType::kF32, ToShape(inputs[i].first)));
  for (size_t i = 0; i < output_shapes.size(); ++i)
    tensors.push_back(Tensor::Wrap((*outputs)[i].data(), DType::kF32, ToShape(output_shapes[i])));
  std::vector<const Tensor*> args;
  for (const Tensor& t : tensors) args.push_back(&t);
  int num_inputs = static_cast<int>(inputs.size());
  int num_outputs = static_cast<int>(output_shapes.size());
  if (profiler != nullptr) return fn->RunProfiled(args.data(), num_inputs, num_outputs, profiler);
  return fn->Run(args.data(), num_inputs, num_outputs);
}

std::vector<Floats> CompiledRegion::Run(const std::vector<std::pair<Dims, Floats>>& inputs,
                                        const std::vector<Dims>& output_shapes) const {
  std::vector<Floats> out;
  Status s = TryRun(inputs, output_shapes, &out);
  if (!s.ok()) throw std::runtime_error(s.ToString());
  return out;
}

// ---- Reference kernels ----

Floats RefConv2d(const Floats& x, const Dims& xd, const Floats& w, const Dims& wd,
                 const Floats* bias, const ConvParams& p, Dims* out_dims) {
  int64_t n = xd[0], c = xd[1], h = xd[2], wi = xd[3];
  int64_t o = wd[0], cg = wd[1], kh = wd[2], kw = wd[3];
  int64_t og = o / p.group;
  int64_t oh = (h + p.pads[0] + p.pads[2] - ((kh - 1) * p.dilations[0] + 1)) / p.strides[0] + 1;
  int64_t ow = (wi + p.pads[1] + p.pads[3] - ((kw - 1) * p.dilations[1] + 1)) / p.strides[1] + 1;
  *out_dims = {n, o, oh, ow};
  Floats y(n * o * oh * ow);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oc = 0; oc < o; ++oc) {
      int64_t g = oc / og;
      for (int64_t i = 0; i < oh; ++i)
        for (int64_t j = 0; j < ow; ++j) {
          double acc = bias ? (*bias)[oc] : 0.0;
          for (int64_t ic = 0; ic < cg; ++ic)
            for (int64_t r = 0; r < kh; ++r)
              for (int64_t s = 0; s < kw; ++s) {
                int64_t yy = i * p.strides[0] - p.pads[0] + r * p.dilations[0];
                int64_t xx = j * p.strides[1] - p.pads[1] + s * p.dilations[1];
                if (yy < 0 || yy >= h || xx < 0 || xx >= wi) continue;
                acc += static_cast<double>(x[((b * c + g * cg + ic) * h + yy) * wi + xx]) *
                       w[((oc * cg + ic) * kh + r) * kw + s];
              }
          y[((b * o + oc) * oh + i) * ow + j] = static_cast<float>(acc);
        }
    }
  return y;
}

Floats RefMatMul(const Floats& a, const Dims& ad, const Floats& b, const Dims& bd) {
  int64_t m = ad[ad.size() - 2], k = ad.back(), n = bd.back();
  int64_t batch = Numel(ad) / (m * k);
  bool b_batched = bd.size() > 2;
  Floats y(batch * m * n);
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t l = 0; l < k; ++l)
          acc += static_cast<double>(a[(t * m + i) * k + l]) *
                 b[(b_batched ? t * k * n : 0) + l * n + j];
        y[(t * m + i) * n + j] = static_cast<float>(acc);
      }
  return y;
}

Floats RefPool2d(const Floats& x, const Dims& xd, bool max, const Dims& kernel, const Dims& strides,
                 const Dims& pads, bool count_include_pad, Dims* out_dims) {
  int64_t n = xd[0], c = xd[1], h = xd[2], w = xd[3];
  int64_t oh = (h + pads[0] + pads[2] - kernel[0]) / strides[0] + 1;
  int64_t ow = (w + pads[1] + pads[3] - kernel[1]) / strides[1] + 1;
  *out_dims = {n, c, oh, ow};
  Floats y(n * c * oh * ow);
  for (int64_t p = 0; p < n * c; ++p)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j) {
        double acc = max ? -INFINITY : 0.0;
        int64_t count = 0;
        for (int64_t r = 0; r < kernel[0]; ++r)
          for (int64_t s = 0; s < kernel[1]; ++s) {
            int64_t yy = i * strides[0] - pads[0] + r, xx = j * strides[1] - pads[1] + s;
            bool inside = yy >= 0 && yy < h && xx >= 0 && xx < w;
            if (count_include_pad && !max) ++count;
            if (!inside) continue;
            if (!count_include_pad) ++count;
            float v = x[(p * h + yy) * w + xx];
            acc = max ? std::max<double>(acc, v) : acc + v;
          }
        y[(p * oh + i) * ow + j] = static_cast<float>(max ? acc : acc / count);
      }
  return y;
}

Floats RefSoftmax(const Floats& x, const Dims& xd, int axis, bool log) {
  int64_t outer = 1, inner = 1, len = xd[axis];
  for (int i = 0; i < axis; ++i) outer *= xd[i];
  for (size_t i = axis + 1; i < xd.size(); ++i) inner *= xd[i];
  Floats y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t k) { return (o * len + k) * inner + in; };
      double mx = -INFINITY, sum = 0;
      for (int64_t k = 0; k < len; ++k) mx = std::max<double>(mx, x[at(k)]);
      for (int64_t k = 0; k < len; ++k) sum += std::exp(x[at(k)] - mx);
      for (int64_t k = 0; k < len; ++k)
        y[at(k)] =
            static_cast<float>(log ? x[at(k)] - mx - std::log(sum) : std::exp(x[at(k)] - mx) / sum);
    }
  return y;
}

Floats RefLayerNorm(const Floats& x, const Dims& xd, int axis, const Floats& scale,
                    const Floats& bias, float eps) {
  int64_t inner = 1;
  for (size_t i = axis; i < xd.size(); ++i) inner *= xd[i];
  int64_t outer = static_cast<int64_t>(x.size()) / inner;
  Floats y(x.size());
  for (int64_t o = 0; o < outer; ++o) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < inner; ++k) mean += x[o * inner + k];
    mean /= inner;
    for (int64_t k = 0; k < inner; ++k)
      var += (x[o * inner + k] - mean) * (x[o * inner + k] - mean);
    var /= inner;
    for (int64_t k = 0; k < inner; ++k)
      y[o * inner + k] =
          static_cast<float>((x[o * inner + k] - mean) / std::sqrt(var + eps) * scale[k] +
                             (bias.empty() ? 0.0 : bias[k]));
  }
  return y;
}

float RefGelu(float x) {
  return static_cast<float>(0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))));
}

bool Close(const Floats& got, const Floats& want, double atol, double rtol) {
  if (got.size() != want.size()) {
    std::printf("size %zu != %zu\n", got.size(), want.size());
    return false;
  }
  // NaN-safe: an element that is not within tolerance (including a NaN or Inf where the reference
  // is finite, whose ratio is NaN or Inf) fails on its own, and the first such element is
  // reported. A running maximum would let a NaN ratio be overwritten by the next finite one.
  size_t bad = 0, at = 0;
  double ratio_at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    double bound = atol + rtol * std::fabs(want[i]);
    double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (diff <= bound) continue;  // false for NaN, and for Inf - Inf
    if (bad++ == 0) {
      at = i;
      ratio_at = diff / bound;
    }
  }
  if (bad == 0) return true;
  std::printf("%zu of %zu elements differ; first at %zu: got %.7g, want %.7g (error ratio %.3g)\n",
              bad, got.size(), at, got[at], want[at], ratio_at);
  return false;
}

ScopedEnv::ScopedEnv(const char* var, const char* value) : var_(var) {
  const char* env = std::getenv(var);
  had_ = env != nullptr;
  if (had_) saved_ = env;
  if (value != nullptr) {
    setenv(var, value, 1);
  } else {
    unsetenv(var);
  }
}

ScopedEnv::~ScopedEnv() {
  if (had_) {
    setenv(var_.c_str(), saved_.c_str(), 1);
  } else {
    unsetenv(var_.c_str());
  }
}

}  // namespace kiln::onednn::testing
