// Backward formulas: shape ops. STUB: not implemented yet.
#include "lib/api/autograd/Formulas.h"

namespace mstep::autograd {

void register_shape_formulas(FormulaTable&) {}

}  // namespace mstep::autograd
