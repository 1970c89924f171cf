// Text views of a verified executable: one instruction, one function, the whole file.
#ifndef KILN_VM_DISASSEMBLER_H_
#define KILN_VM_DISASSEMBLER_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "vm/executable.h"
#include "base/status.h"

namespace kiln {

/// "invoke_kernel kernels[2] 'add' (r3, r4) -> (r5)". Trusts the (verified) indices.
std::string DisassembleInstruction(const Executable& exe, int function, int pc);

/// "func @main(x: f32[batch, 4]) -> (y: f32[batch, 4])  registers=12" and one line per
/// instruction: pc, instruction, "; node" when the debug table names one.
std::string DisassembleFunction(const Executable& exe, int function);

/// What a vendor's region blob holds, as newline-terminated lines (ExternalRegistry::Describe
/// fits). An error is printed in place of the lines.
using RegionDescriber =
    std::function<StatusOr<std::string>(const std::string& vendor, const uint8_t* blob, size_t size)>;

/// Everything `kiln inspect` prints: header, metadata, functions with disassembly, the kernel,
/// shape-function, external-region and constant tables, and the byte size of each section.
/// With `describe`, each external region is followed by its description (its ops), indented.
std::string InspectExecutable(const Executable& exe, const RegionDescriber& describe = nullptr);

}  // namespace kiln

#endif  // KILN_VM_DISASSEMBLER_H_
