// Lowerings of the nn family (not written yet).
#include "compiler/lower/lower.h"

namespace kiln::compiler {

void AddNnLowerings(LoweringTable& table) { (void)table; }

}  // namespace kiln::compiler
