// Lowerings of the elementwise family (not written yet).
#include "compiler/lower/lower.h"

namespace kiln::compiler {

void AddElementwiseLowerings(LoweringTable& table) { (void)table; }

}  // namespace kiln::compiler
