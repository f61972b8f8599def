// Backward formulas: linalg ops. STUB: not implemented yet.
#include "lib/api/autograd/Formulas.h"

namespace mstep::autograd {

void register_linalg_formulas(FormulaTable&) {}

}  // namespace mstep::autograd
