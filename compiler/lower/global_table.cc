// LoweringTable::Global(): every family's lowerings (target //compiler/lower).
#include "compiler/lower/lower.h"

namespace kiln::compiler {

const LoweringTable& LoweringTable::Global() {
  static const LoweringTable* table = [] {
    auto* t = new LoweringTable;
    AddElementwiseLowerings(*t);
    AddReduceLowerings(*t);
    AddNnLowerings(*t);
    AddShapeLowerings(*t);
    AddIndexingLowerings(*t);
    AddQuantizeLowerings(*t);
    AddSignalLowerings(*t);
    return t;
  }();
  return *table;
}

}  // namespace kiln::compiler
