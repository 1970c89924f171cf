// What kiln run, bench and profile share: their common flags, the function they run (loaded
// through kiln::Runtime, as any embedder loads it), and its inputs (read from .npy / .pb files or
// generated deterministically), checked against the signature and the --dim values.
#ifndef KILN_TOOLS_INPUTS_H_
#define KILN_TOOLS_INPUTS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/tensor.h"
#include "embed/flags.h"
#include "embed/runtime.h"
#include "vm/executable.h"

namespace kiln::tools {

/// The flags of run, bench and profile that say what to load and how to run it.
struct ModelArgs {
  std::string file, function;
  std::map<std::string, int64_t> dims;  // --dim NAME=VALUE
  int64_t timeout_ms = 0;
  RuntimeOptions runtime;  // --threads, --jit-cache, --plugin
};

/// Declares FILE.kiln, --function, --dim (described by `dim_help`), --timeout-ms and the
/// runtime flags (embed/flags.h), writing into *args.
void AddModelFlags(FlagParser& flags, const std::string& dim_help, ModelArgs* args);

/// AddModelFlags for bench and profile, which generate inputs, plus --input NAME=PATH
/// (repeatable; a NAME given twice is a usage error) for the inputs read from files instead.
void AddGeneratedInputFlags(FlagParser& flags, ModelArgs* args,
                            std::map<std::string, std::string>* files);

/// A function ready to run, with the runtime that loaded it.
struct LoadedFunction {
  std::shared_ptr<Runtime> runtime;
  std::shared_ptr<const Executable> exe;
  int index = -1;
  std::string name;
  const FunctionSignature& signature() const { return exe->signature(index); }
};

/// Creates a kiln::Runtime with args.runtime, loads args.file and finds args.function (the
/// entry function if empty), then checks that each --dim names a symbolic dim of the function's
/// inputs. Errors: Runtime::Create's (naming the plugin or cache directory) and LoadFile's;
/// NotFound naming the function and the file; InvalidArgument naming the --dim.
StatusOr<LoadedFunction> LoadFunction(const ModelArgs& args);

/// InvalidArgument naming `flag` (e.g. "--dim M=4") unless `symbol` is a symbolic dim of
/// one of sig's inputs; the message lists the symbols there are.
Status CheckSymbol(const FunctionSignature& sig, const std::string& symbol,
                   const std::string& flag);

/// Checks tensor `t`, read from `path`, against parameter i of `sig`: the name stored in the
/// file (`stored_name`, a TensorProto's; "" when it has none) if any, dtype, rank, fixed dims,
/// and symbolic dims that `dims` gives a value. (The VM checks again, and also that symbolic
/// dims agree across inputs; this check names the file.) InvalidArgument naming the input, the
/// file and what differs.
Status CheckInput(const FunctionSignature& sig, size_t i, const Tensor& t, const std::string& path,
                  const std::map<std::string, int64_t>& dims, const std::string& stored_name = "");

/// Fills `t` from a fixed-seed generator: floats in [-1, 1), integers in [0, 10) (safe as
/// indices into most tables), alternating bools; f16/bf16 as zeros.
void FillDeterministic(Tensor& t, uint64_t seed);

/// One tensor per parameter of `sig`, from `allocator`: from files[name] (.npy or .pb, see
/// ReadTensorFile, checked by CheckInput) if given, else allocated with each symbolic dim taken
/// from dims[symbol] and filled deterministically. InvalidArgument naming the input and the
/// flag to give when a symbolic dim has no value.
StatusOr<std::vector<Tensor>> MakeInputs(const FunctionSignature& sig,
                                         const std::map<std::string, int64_t>& dims,
                                         const std::map<std::string, std::string>& files,
                                         Allocator& allocator);

/// "n=4, seq=128" (or "" without dims), for reports.
std::string DimsText(const std::map<std::string, int64_t>& dims);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_INPUTS_H_
