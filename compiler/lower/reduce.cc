// Lowerings of the reduce family (not written yet).
#include "compiler/lower/lower.h"

namespace kiln::compiler {

void AddReduceLowerings(LoweringTable& table) { (void)table; }

}  // namespace kiln::compiler
