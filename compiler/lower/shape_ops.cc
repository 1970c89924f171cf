// Lowerings of the shape_ops family (not written yet).
#include "compiler/lower/lower.h"

namespace kiln::compiler {

void AddShapeLowerings(LoweringTable& table) { (void)table; }

}  // namespace kiln::compiler
