// The opcode table, expanded from vm/opcodes.def.
#include "vm/opcodes.h"

namespace kiln {
namespace {

using K = OperandKind;
constexpr OpArity kNoArity = OpArity::kNoArity;
constexpr OpArity kArityResults = OpArity::kArityResults;
constexpr OpArity kArityFunction = OpArity::kArityFunction;
constexpr OpArity kArityKernel = OpArity::kArityKernel;
constexpr OpArity kArityShapeFunc = OpArity::kArityShapeFunc;
constexpr OpArity kArityExternal = OpArity::kArityExternal;
constexpr OpDType kNoDType = OpDType::kNoDType;
constexpr OpDType kUsesDType = OpDType::kUsesDType;

constexpr OpcodeInfo kOpcodeTable[] = {
#define OPCODE(name, mnemonic, a, b, c, d, e, arity, dtype, doc) \
  {mnemonic, {K::a, K::b, K::c, K::d, K::e}, arity, dtype, doc},
#include "vm/opcodes.def"
#undef OPCODE
};

static_assert(sizeof(kOpcodeTable) / sizeof(kOpcodeTable[0]) == kNumOpcodes);

}  // namespace

const OpcodeInfo& GetOpcodeInfo(Opcode op) { return kOpcodeTable[static_cast<int>(op)]; }

}  // namespace kiln
