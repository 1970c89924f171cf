// Stripping and refilling zoo model weights (see weights.h).
#include "tests/zoo/weights.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

namespace kiln::zoo {
namespace {

constexpr char kTag[] = "kiln-fill uniform ";

uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t NameSeed(const std::string& name) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : name) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

int64_t ElementCount(const onnx::TensorProto& t) {
  int64_t n = 1;
  for (int64_t d : t.dims()) n *= d;
  return n;
}

// The float values of `t` (raw_data or float_data).
std::vector<float> FloatValues(const onnx::TensorProto& t) {
  if (t.has_raw_data()) {
    std::vector<float> v(t.raw_data().size() / sizeof(float));
    std::memcpy(v.data(), t.raw_data().data(), v.size() * sizeof(float));
    return v;
  }
  return {t.float_data().begin(), t.float_data().end()};
}

}  // namespace

std::vector<double> Uniform(uint64_t seed, int64_t count, double lo, double hi) {
  std::vector<double> v(count);
  uint64_t state = seed;
  for (int64_t i = 0; i < count; ++i) {
    double u = static_cast<double>(SplitMix64(state) >> 11) * 0x1.0p-53;  // [0, 1)
    v[i] = lo + (hi - lo) * u;
  }
  return v;
}

StatusOr<int> StripWeights(onnx::ModelProto& model, int64_t keep_up_to) {
  int stripped = 0;
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL) {
      return InvalidArgument("initializer '" + t.name() + "' has external data");
    }
    if (t.data_type() != onnx::TensorProto::FLOAT || ElementCount(t) <= keep_up_to) continue;
    std::vector<float> v = FloatValues(t);
    if (static_cast<int64_t>(v.size()) != ElementCount(t)) {
      return InvalidArgument("initializer '" + t.name() + "' has " + std::to_string(v.size()) +
                             " values for its dims");
    }
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    bool finite = true;
    for (float x : v) {
      finite = finite && std::isfinite(x);
      lo = std::min(lo, x);
      hi = std::max(hi, x);
    }
    if (!finite) continue;
    char range[80];
    std::snprintf(range, sizeof(range), "%.9g %.9g", lo, hi);
    t.clear_raw_data();
    t.clear_float_data();
    t.set_doc_string(kTag + std::string(range));
    ++stripped;
  }
  return stripped;
}

StatusOr<int> FillWeights(onnx::ModelProto& model) {
  int filled = 0;
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    const std::string& doc = t.doc_string();
    if (doc.compare(0, sizeof(kTag) - 1, kTag) != 0) continue;
    double lo, hi;
    if (std::sscanf(doc.c_str() + sizeof(kTag) - 1, "%lf %lf", &lo, &hi) != 2 || !(lo <= hi) ||
        t.data_type() != onnx::TensorProto::FLOAT) {
      return InvalidFormat("initializer '" + t.name() + "': bad fill tag '" + doc + "'");
    }
    std::vector<double> v = Uniform(NameSeed(t.name()), ElementCount(t), lo, hi);
    std::string raw(v.size() * sizeof(float), '\0');
    for (size_t i = 0; i < v.size(); ++i) {
      float f = lo == hi ? static_cast<float>(lo) : static_cast<float>(v[i]);
      std::memcpy(&raw[i * sizeof(float)], &f, sizeof(float));
    }
    t.set_raw_data(std::move(raw));
    t.clear_doc_string();
    ++filled;
  }
  return filled;
}

}  // namespace kiln::zoo

namespace kiln::zoo {

StatusOr<std::vector<Case>> ParseCases(const std::string& text) {
  std::vector<Case> cases;
  size_t pos = 0;
  for (int line_no = 1; pos < text.size(); ++line_no) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    line = line.substr(0, line.find('#'));
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    char name[128], input[128], dtype[8], shape[128];
    Case c;
    unsigned long long seed;
    if (std::sscanf(line.c_str(), "%127s %127s %7s %127s %lf %lf %llu", name, input, dtype, shape,
                    &c.lo, &c.hi, &seed) != 7) {
      return InvalidFormat("cases line " + std::to_string(line_no) + ": expected 'NAME INPUT "
                           "f32|i64 D0,D1,... LO HI SEED', got '" + line + "'");
    }
    c.name = name;
    c.input = input;
    c.seed = seed;
    c.dtype = std::strcmp(dtype, "f32") == 0 ? DType::kF32
              : std::strcmp(dtype, "i64") == 0 ? DType::kI64 : DType::kInvalid;
    for (const char* p = shape; *p;) {
      char* next;
      c.shape.push_back(std::strtoll(p, &next, 10));
      if (next == p || c.shape.back() <= 0) break;
      p = *next == ',' ? next + 1 : next;
    }
    if (c.dtype == DType::kInvalid || c.shape.empty() || c.shape.back() <= 0 || !(c.lo < c.hi)) {
      return InvalidFormat("cases line " + std::to_string(line_no) + ": bad dtype, shape or "
                           "range in '" + line + "'");
    }
    cases.push_back(std::move(c));
  }
  return cases;
}

StatusOr<Tensor> MakeInput(const Case& c, Allocator& allocator) {
  ASSIGN_OR_RETURN(Shape shape, Shape::Make(c.shape.data(), static_cast<int>(c.shape.size())));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(allocator, c.dtype, shape));
  std::vector<double> v = Uniform(c.seed, t.NumElements(), c.lo, c.hi);
  for (size_t i = 0; i < v.size(); ++i) {
    if (c.dtype == DType::kF32) {
      t.data_as<float>()[i] = static_cast<float>(v[i]);
    } else {
      t.data_as<int64_t>()[i] = static_cast<int64_t>(std::floor(v[i]));
    }
  }
  return t;
}

}  // namespace kiln::zoo
