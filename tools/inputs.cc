// What kiln run, bench and profile share: common flags, loading through kiln::Runtime, inputs.
#include "tools/inputs.h"

#include <cstring>
#include <set>

#include "tools/tensor_file.h"

namespace kiln::tools {

void AddModelFlags(FlagParser& flags, const std::string& dim_help, ModelArgs* args) {
  flags.AddPositional("FILE.kiln", "the executable (kiln compile writes it)", &args->file, true);
  flags.AddString("--function", "NAME", "the function to run", &args->function,
                  "the model's entry function");
  flags.AddSizeMap("--dim", dim_help, &args->dims);
  flags.AddInt("--timeout-ms", "N", "stop a call that runs longer than N ms", 1, int64_t{1} << 40,
               &args->timeout_ms, "none");
  AddRuntimeFlags(flags, &args->runtime);
}

void AddGeneratedInputFlags(FlagParser& flags, ModelArgs* args,
                            std::map<std::string, std::string>* files) {
  AddModelFlags(flags,
                "the value of symbolic dim NAME in generated inputs (and checked in --input files)",
                args);
  flags.AddCustom(
      "--input", "NAME=PATH", "read input NAME from PATH (.npy or .pb) instead of generating it",
      "", true, [files](const std::string& v) -> Status {
        size_t eq = v.find('=');
        if (eq == std::string::npos || eq == 0) {
          return InvalidArgument("wants NAME=PATH, got '" + v + "'");
        }
        if (!files->emplace(v.substr(0, eq), v.substr(eq + 1)).second) {
          return InvalidArgument(v + ": input '" + v.substr(0, eq) + "' is given twice");
        }
        return Status::Ok();
      });
}

StatusOr<LoadedFunction> LoadFunction(const ModelArgs& args) {
  LoadedFunction f;
  ASSIGN_OR_RETURN(f.runtime, Runtime::Create(args.runtime));
  ASSIGN_OR_RETURN(f.exe, f.runtime->LoadFile(args.file));
  f.name = args.function.empty() ? std::string(f.exe->entry_function()) : args.function;
  f.index = f.exe->FindFunction(f.name);
  if (f.index < 0) return NotFound("no function named '" + f.name + "' in " + args.file);
  for (const auto& [symbol, value] : args.dims) {
    RETURN_IF_ERROR(
        CheckSymbol(f.signature(), symbol, "--dim " + symbol + "=" + std::to_string(value)));
  }
  return f;
}

Status CheckSymbol(const FunctionSignature& sig, const std::string& symbol,
                   const std::string& flag) {
  std::set<std::string> symbols;
  for (const ValueSpec& p : sig.params) {
    for (const DimSpec& d : p.shape) {
      if (!d.fixed() && !d.symbol.empty()) symbols.insert(d.symbol);
    }
  }
  if (symbols.count(symbol) != 0) return Status::Ok();
  std::string list;
  for (const std::string& s : symbols) list += (list.empty() ? "" : ", ") + s;
  return InvalidArgument(flag + ": the inputs of '" + sig.name + "' have no symbolic dim '" +
                         symbol + "' (" + (list.empty() ? "they have none" : "they have " + list) +
                         ")");
}

Status CheckInput(const FunctionSignature& sig, size_t i, const Tensor& t, const std::string& path,
                  const std::map<std::string, int64_t>& dims, const std::string& stored_name) {
  const ValueSpec& spec = sig.params[i];
  std::string where = "input " + std::to_string(i) + " '" + spec.name + "' (" + path + ")";
  // A named tensor given for another input is a slip (files swapped or out of order), not
  // something to run on silently.
  if (!stored_name.empty() && stored_name != spec.name) {
    return InvalidArgument(where + ": the file holds tensor '" + stored_name + "', not '" +
                           spec.name + "': give each file for the input it names (--input " +
                           stored_name + "=" + path + ")");
  }
  std::string expected = "expected " + spec.ToString();
  if (t.dtype() != spec.dtype) {
    return InvalidArgument(where + ": dtype " + DTypeShortName(t.dtype()) + ", " + expected);
  }
  if (t.rank() != static_cast<int>(spec.shape.size())) {
    return InvalidArgument(where + ": rank " + std::to_string(t.rank()) + " (" + t.TypeString() +
                           "), " + expected);
  }
  for (int d = 0; d < t.rank(); ++d) {
    const DimSpec& ds = spec.shape[d];
    std::string is = ": dim " + std::to_string(d) + " is " + std::to_string(t.dim(d));
    if (ds.fixed() && ds.value != t.dim(d)) return InvalidArgument(where + is + ", " + expected);
    auto given = ds.fixed() ? dims.end() : dims.find(ds.symbol);
    if (given != dims.end() && given->second != t.dim(d)) {
      return InvalidArgument(where + is + ", but --dim " + ds.symbol + "=" +
                             std::to_string(given->second));
    }
  }
  return Status::Ok();
}

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
    // One line per dtype reads best.
    // clang-format off
    switch (t.dtype()) {
      case DType::kF32: t.data_as<float>()[i] = static_cast<float>(u); break;
      case DType::kF64: t.data_as<double>()[i] = u; break;
      case DType::kI64: t.data_as<int64_t>()[i] = static_cast<int64_t>(r % 10); break;
      case DType::kI32: t.data_as<int32_t>()[i] = static_cast<int32_t>(r % 10); break;
      case DType::kI16: t.data_as<int16_t>()[i] = static_cast<int16_t>(r % 10); break;
      case DType::kI8: t.data_as<int8_t>()[i] = static_cast<int8_t>(r % 10); break;
      case DType::kU8: t.data_as<uint8_t>()[i] = static_cast<uint8_t>(r % 10); break;
      case DType::kU16: t.data_as<uint16_t>()[i] = static_cast<uint16_t>(r % 10); break;
      case DType::kU32: t.data_as<uint32_t>()[i] = static_cast<uint32_t>(r % 10); break;
      case DType::kU64: t.data_as<uint64_t>()[i] = r % 10; break;
      case DType::kBool: t.data_as<uint8_t>()[i] = static_cast<uint8_t>(i % 2); break;
      default:
        std::memset(static_cast<char*>(t.data()) + i * DTypeSize(t.dtype()), 0,
                    DTypeSize(t.dtype()));
    }
    // clang-format on
  }
}

namespace {

// A tensor of parameter i's dtype with every symbolic dim from `dims`, filled deterministically.
StatusOr<Tensor> GenerateInput(const ValueSpec& p, size_t i,
                               const std::map<std::string, int64_t>& dims, Allocator& allocator) {
  int64_t shape[kMaxRank];
  for (size_t d = 0; d < p.shape.size(); ++d) {
    const DimSpec& ds = p.shape[d];
    auto it = ds.fixed() ? dims.end() : dims.find(ds.symbol);
    if (ds.fixed()) {
      shape[d] = ds.value;
    } else if (!ds.symbol.empty() && it != dims.end()) {
      shape[d] = it->second;
    } else {
      return InvalidArgument("input '" + p.name + "' (" + p.ToString() + "): dim " +
                             std::to_string(d) + " is symbolic" +
                             (ds.symbol.empty()
                                  ? " and unnamed: give --input " + p.name + "=FILE.npy"
                                  : ": give --dim " + ds.symbol + "=N"));
    }
  }
  ASSIGN_OR_RETURN(Shape s, Shape::Make(shape, static_cast<int>(p.shape.size())));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Allocate(allocator, p.dtype, s));
  FillDeterministic(t, i + 1);
  return t;
}

}  // namespace

StatusOr<std::vector<Tensor>> MakeInputs(const FunctionSignature& sig,
                                         const std::map<std::string, int64_t>& dims,
                                         const std::map<std::string, std::string>& files,
                                         Allocator& allocator) {
  for (const auto& [name, path] : files) {
    bool known = false;
    for (const ValueSpec& p : sig.params) known = known || p.name == name;
    if (!known) {
      return InvalidArgument("--input " + name + "=" + path + ": '" + sig.name +
                             "' has no input named '" + name + "'");
    }
  }
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < sig.params.size(); ++i) {
    auto file = files.find(sig.params[i].name);
    if (file == files.end()) {
      ASSIGN_OR_RETURN(Tensor t, GenerateInput(sig.params[i], i, dims, allocator));
      inputs.push_back(std::move(t));
      continue;
    }
    std::string stored_name;
    ASSIGN_OR_RETURN(Tensor t, ReadTensorFile(file->second, allocator, &stored_name));
    RETURN_IF_ERROR(CheckInput(sig, i, t, file->second, dims, stored_name));
    inputs.push_back(std::move(t));
  }
  return inputs;
}

std::string DimsText(const std::map<std::string, int64_t>& dims) {
  std::string out;
  for (const auto& [name, value] : dims) {
    out += (out.empty() ? "" : ", ") + name + "=" + std::to_string(value);
  }
  return out;
}

}  // namespace kiln::tools
