// Opcode enum and per-opcode operand descriptions, generated from vm/opcodes.def.
#ifndef KILN_VM_OPCODES_H_
#define KILN_VM_OPCODES_H_

#include <cstdint>

namespace kiln {

/// What an Instruction field holds; drives verification and disassembly.
enum class OperandKind : uint8_t {
  kNone,       // unused; must be 0
  kReg,        // register index < register_count
  kRegList,    // offset of a register list in Function.operands; the next field is its count
  kImmList,    // offset of an immediate list (non-negative dims); the next field is its count
  kCount,      // length of the list named by the previous field
  kFunction,   // index into Executable.functions
  kKernel,     // index into Executable.kernels
  kShapeFunc,  // index into Executable.shape_functions
  kExternal,   // index into Executable.external_regions
  kConstant,   // index into Executable.constants
  kString,     // index into Executable.strings
  kTarget,     // jump target: an instruction index in this function
  kImm,        // non-negative immediate (offset, field index)
  kAlign,      // power of two in [1, 64] (storage is 64-byte aligned)
  kImm64Lo,    // low 32 bits of a 64-bit immediate
  kImm64Hi,    // high 32 bits of a 64-bit immediate
  kImm64,      // offset in Function.operands of one non-negative 64-bit value (lo, hi pair)
  kImm64List,  // offset of a list of non-negative 64-bit dims (lo, hi pairs); next field: count
};

/// What the length of an instruction's list must equal.
enum class OpArity : uint8_t {
  kNoArity,
  kArityResults,    // the current function's result count
  kArityFunction,   // callee's params + results
  kArityKernel,     // kernel's inputs + outputs
  kArityShapeFunc,  // shape function's inputs + outputs
  kArityExternal,   // region's inputs + outputs
};

enum class OpDType : uint8_t { kNoDType, kUsesDType };

enum class Opcode : uint8_t {
#define OPCODE(name, mnemonic, a, b, c, d, e, arity, dtype, doc) k##name,
#include "vm/opcodes.def"
#undef OPCODE
  kNumOpcodes
};

inline constexpr int kNumOpcodes = static_cast<int>(Opcode::kNumOpcodes);
inline constexpr int kNumOperandFields = 5;

struct OpcodeInfo {
  const char* mnemonic;
  OperandKind operands[kNumOperandFields];
  OpArity arity;
  OpDType dtype;
  const char* doc;  // one-line semantics, e.g. "R[a] := R[b]"
};

/// The table row for `op`; `op` must be < kNumOpcodes (verified code only).
const OpcodeInfo& GetOpcodeInfo(Opcode op);
inline bool IsValidOpcode(uint8_t raw) { return raw < kNumOpcodes; }

/// The 64-bit value stored as a (low, high) int32 pair at ops[at], ops[at + 1] (kImm64,
/// kImm64List); `at + 1` must be inside the operand pool (verified code only).
inline int64_t ReadOperand64(const int32_t* ops, int64_t at) {
  return static_cast<int64_t>((uint64_t{static_cast<uint32_t>(ops[at + 1])} << 32) |
                              static_cast<uint32_t>(ops[at]));
}

}  // namespace kiln

#endif  // KILN_VM_OPCODES_H_
