// The three layers of load-time verification. After VerifyExecutable succeeds, the interpreter
// runs the code without re-checking indices.
#ifndef KILN_VM_VERIFIER_H_
#define KILN_VM_VERIFIER_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "serializer/executable_generated.h"
#include "base/status.h"

namespace kiln {

/// Layer 1: size prefix, identifier, version and the FlatBuffers verifier. On success
/// `*root` points into `data` and `*flatbuffer_size` is the bytes the FlatBuffer occupies
/// (size prefix included). `data` must be 4-byte aligned.
Status VerifyStructure(const uint8_t* data, size_t size, const fb::Executable** root,
                       size_t* flatbuffer_size);

/// Layer 2: table contents — required fields, unique function names, dtypes, constant data
/// inside the file and 64-byte aligned, sizes overflow-safe, region checksums and constant
/// references, ahead-of-time code tables (lengths, symbols, object checksums), metadata and
/// debug-info indices.
Status VerifySemantics(const fb::Executable& exe, size_t file_size, size_t flatbuffer_size);

/// Layer 3: every function's bytecode — known opcodes, each operand valid for its kind
/// (register < count, table indices, jump targets, lists inside `operands`), arities.
Status VerifyBytecode(const fb::Executable& exe);

/// "aot_targets[1] (x86_64-pc-linux-gnu, cpu x86-64-v3)": how errors name a code target.
std::string AotTargetWhere(size_t i, const fb::AotTarget& target);

/// FNV-1a 64-bit hash; the checksum of an external region's blob.
uint64_t Fnv1a64(const uint8_t* data, size_t size);

}  // namespace kiln

#endif  // KILN_VM_VERIFIER_H_
