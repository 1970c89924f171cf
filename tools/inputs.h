// Inputs for kiln bench / profile: generated deterministically from a function's signature, or
// read from .npy / .pb files.
#ifndef KILN_TOOLS_INPUTS_H_
#define KILN_TOOLS_INPUTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vm/executable.h"
#include "base/tensor.h"

namespace kiln::tools {

/// Fills `t` from a fixed-seed generator: floats in [-1, 1), integers in [0, 10) (safe as
/// indices into most tables), alternating bools; f16/bf16 as zeros.
void FillDeterministic(Tensor& t, uint64_t seed);

/// One tensor per parameter of `sig`: from files[name] (.npy or .pb, see ReadTensorFile) if
/// given, else allocated with each symbolic dim taken from shapes[symbol] and filled
/// deterministically. InvalidArgument naming the input and the flag to give when a symbolic dim
/// has no value.
StatusOr<std::vector<Tensor>> MakeInputs(const FunctionSignature& sig,
                                         const std::map<std::string, int64_t>& shapes,
                                         const std::map<std::string, std::string>& files);

}  // namespace kiln::tools

#endif  // KILN_TOOLS_INPUTS_H_
