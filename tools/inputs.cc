// Inputs for kiln bench / profile: generated deterministically from a signature, or read from
// .npy / .pb files.
#include "tools/inputs.h"

#include <cstring>

#include "tools/tensor_file.h"
#include "vm/context.h"

namespace kiln::tools {

// Deterministic contents: floats in [-1, 1), integers in [0, 10), alternating bools.
void FillDeterministic(Tensor& t, uint64_t seed) {
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  auto next = [&s] {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    return s >> 33;
  };
  int64_t n = t.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    uint64_t r = next();
    double u = (r % 2000000) / 1000000.0 - 1.0;
    switch (t.dtype()) {
      case DType::kF32: t.data_as<float>()[i] = static_cast<float>(u); break;
      case DType::kF64: t.data_as<double>()[i] = u; break;
      case DType::kI64: t.data_as<int64_t>()[i] = static_cast<int64_t>(r % 10); break;
      case DType::kI32: t.data_as<int32_t>()[i] = static_cast<int32_t>(r % 10); break;
      case DType::kI16: t.data_as<int16_t>()[i] = static_cast<int16_t>(r % 10); break;
      case DType::kI8: t.data_as<int8_t>()[i] = static_cast<int8_t>(r % 10); break;
      case DType::kU8: t.data_as<uint8_t>()[i] = static_cast<uint8_t>(r % 10); break;
      case DType::kBool: t.data_as<uint8_t>()[i] = static_cast<uint8_t>(i % 2); break;
      default: std::memset(static_cast<char*>(t.data()) + i * DTypeSize(t.dtype()), 0, DTypeSize(t.dtype()));
    }
  }
}

StatusOr<std::vector<Tensor>> MakeInputs(const FunctionSignature& sig,
                                         const std::map<std::string, int64_t>& shapes,
                                         const std::map<std::string, std::string>& files) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < sig.params.size(); ++i) {
    const ValueSpec& p = sig.params[i];
    auto file = files.find(p.name);
    if (file != files.end()) {
      ASSIGN_OR_RETURN(Tensor t, ReadTensorFile(file->second, DefaultAllocator()));
      inputs.push_back(std::move(t));
      continue;
    }
    int64_t dims[kMaxRank];
    for (size_t d = 0; d < p.shape.size(); ++d) {
      const DimSpec& ds = p.shape[d];
      if (ds.fixed()) {
        dims[d] = ds.value;
        continue;
      }
      auto it = shapes.find(ds.symbol);
      if (ds.symbol.empty() || it == shapes.end()) {
        return InvalidArgument("input '" + p.name + "' (" + p.ToString() + "): dim " + std::to_string(d) +
                               " is symbolic" + (ds.symbol.empty() ? " and unnamed: give --input " + p.name + "=FILE.npy"
                                                                   : ": give --shape " + ds.symbol + "=N"));
      }
      dims[d] = it->second;
    }
    ASSIGN_OR_RETURN(Shape shape, Shape::Make(dims, static_cast<int>(p.shape.size())));
    ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(DefaultAllocator(), p.dtype, shape));
    FillDeterministic(t, i + 1);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

}  // namespace kiln::tools
