#include "tests/compiler/lower/op_test_util.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <sstream>

#include "base/dtype.h"
#include "compiler/lower/evaluate.h"
#include "tests/compiler/test_util.h"

namespace kiln::compiler::testing {
namespace {

uint16_t ToF16(float f) {
  // Round-to-nearest-even float -> IEEE half.
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000;
  int32_t exp = static_cast<int32_t>((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffff;
  if (((x >> 23) & 0xff) == 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0);
  if (exp >= 31) return sign | 0x7c00;
  if (exp <= 0) {
    if (exp < -10) return sign;
    mant |= 0x800000;
    int shift = 14 - exp;
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return sign | half;
  }
  uint32_t half = sign | (exp << 10) | (mant >> 13);
  uint32_t rem = mant & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) ++half;
  return half;
}

uint16_t ToBF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if (std::isnan(f)) return static_cast<uint16_t>((x >> 16) | 0x40);
  uint32_t lsb = (x >> 16) & 1;
  x += 0x7fff + lsb;
  return static_cast<uint16_t>(x >> 16);
}

void Store(DType dtype, void* p, size_t i, double v) {
  switch (dtype) {
    case DType::kF32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kF64: static_cast<double*>(p)[i] = v; break;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = ToF16(static_cast<float>(v)); break;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = ToBF16(static_cast<float>(v)); break;
    case DType::kI8: static_cast<int8_t*>(p)[i] = static_cast<int8_t>(v); break;
    case DType::kU8: static_cast<uint8_t*>(p)[i] = static_cast<uint8_t>(v); break;
    case DType::kI16: static_cast<int16_t*>(p)[i] = static_cast<int16_t>(v); break;
    case DType::kI32: static_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::kI64: static_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
    case DType::kU16:
      static_cast<uint16_t*>(p)[i] = static_cast<uint16_t>(v);
      break;
    case DType::kU32:
      static_cast<uint32_t*>(p)[i] = static_cast<uint32_t>(v);
      break;
    case DType::kU64:
      static_cast<uint64_t*>(p)[i] = static_cast<uint64_t>(v);
      break;
    case DType::kBool: static_cast<uint8_t*>(p)[i] = v != 0; break;
    default: break;
  }
}

}  // namespace

TensorDataRef MakeTensor(DType dtype, std::vector<int64_t> dims, const std::vector<double>& values) {
  size_t n = values.size();
  std::vector<uint8_t> bytes(n * DTypeSize(dtype));
  for (size_t i = 0; i < n; ++i) Store(dtype, bytes.data(), i, values[i]);
  StatusOr<TensorDataRef> t = TensorData::Copy(dtype, std::move(dims), bytes.data(), bytes.size());
  if (!t.ok()) {
    std::fprintf(stderr, "MakeTensor: %s\n", t.status().message().c_str());
    std::abort();
  }
  return *t;
}

TensorDataRef RandomTensor(DType dtype, std::vector<int64_t> dims, double lo, double hi,
                           uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) {
    x = dist(rng);
    if (IsInteger(dtype) || dtype == DType::kBool) x = std::floor(x);
  }
  return MakeTensor(dtype, std::move(dims), v);
}

StatusOr<std::vector<TensorDataRef>> RunModel(const std::string& model_text,
                                              const std::vector<TensorDataRef>& inputs,
                                              const LoweringTable& table) {
  // Leaked on purpose: destroying the JIT during static destruction races LLVM's own statics.
  static auto* engine = new std::shared_ptr<jit::Engine>([] {
    StatusOr<std::unique_ptr<jit::Engine>> e = jit::Engine::Create();
    if (!e.ok()) {
      std::fprintf(stderr, "engine: %s\n", e.status().message().c_str());
      std::abort();
    }
    return std::shared_ptr<jit::Engine>(std::move(*e));
  }());
  ASSIGN_OR_RETURN(Graph g, InferText(model_text));
  Evaluator ev(*engine, &table);
  return ev.RunGraph(g, inputs);
}

std::string Compare(const TensorData& actual, const TensorData& expected, double rtol,
                    double atol) {
  std::ostringstream os;
  if (actual.dtype() != expected.dtype()) {
    os << "dtype " << DTypeName(actual.dtype()) << " vs expected " << DTypeName(expected.dtype());
    return os.str();
  }
  if (actual.dims() != expected.dims()) {
    os << "dims [";
    for (int64_t d : actual.dims()) os << d << ",";
    os << "] vs expected [";
    for (int64_t d : expected.dims()) os << d << ",";
    os << "]";
    return os.str();
  }
  std::vector<double> a = actual.ToDoubles(), e = expected.ToDoubles();
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok;
    if (std::isnan(e[i])) {
      ok = std::isnan(a[i]);
    } else if (std::isinf(e[i])) {
      ok = a[i] == e[i];
    } else {
      ok = std::fabs(a[i] - e[i]) <= atol + rtol * std::fabs(e[i]);
    }
    if (!ok && bad++ < 5) os << "[" << i << "] " << a[i] << " vs expected " << e[i] << "; ";
  }
  if (bad) os << bad << " of " << a.size() << " elements differ";
  return os.str();
}

std::string Model(int opset, const std::string& signature, const std::string& body) {
  return "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + "]>\ng " + signature +
         " {\n" + body + "\n}";
}

std::string Model(int opset, const std::string& inputs, const std::string& outputs,
                  const std::string& body, const std::string& inits) {
  std::string signature = "(" + inputs + ") => (" + outputs + ")";
  return Model(opset, inits.empty() ? signature : signature + " <" + inits + ">", body);
}

std::string Shape(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string Ints(const std::vector<int64_t>& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + std::to_string(values[i]);
  return s;
}

std::string Floats(const std::vector<double>& values) {
  std::string s;
  for (size_t i = 0; i < values.size(); ++i) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%s%.6f", i ? ", " : "", values[i]);
    s += buf;
  }
  return s;
}

int64_t Count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::vector<int64_t> Unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (int d = static_cast<int>(dims.size()) - 1; d >= 0; --d) {
    idx[d] = dims[d] ? flat % dims[d] : 0;
    flat = dims[d] ? flat / dims[d] : 0;
  }
  return idx;
}

int64_t Ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  int64_t flat = 0;
  for (size_t d = 0; d < dims.size(); ++d) flat = flat * dims[d] + idx[d];
  return flat;
}

Nd ToNd(const TensorData& t) { return {t.dims(), t.ToDoubles()}; }

Nd Generate(const std::vector<int64_t>& dims,
            const std::function<double(const std::vector<int64_t>&)>& f) {
  Nd out{dims, std::vector<double>(Count(dims))};
  for (int64_t i = 0; i < Count(dims); ++i) out.v[i] = f(Unravel(i, dims));
  return out;
}

}  // namespace kiln::compiler::testing
