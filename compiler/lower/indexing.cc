// Lowerings of the indexing family (not written yet).
#include "compiler/lower/lower.h"

namespace kiln::compiler {

void AddIndexingLowerings(LoweringTable& table) { (void)table; }

}  // namespace kiln::compiler
