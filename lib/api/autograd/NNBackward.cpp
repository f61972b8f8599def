// Backward formulas: nn ops. STUB: not implemented yet.
#include "lib/api/autograd/Formulas.h"

namespace mstep::autograd {

void register_nn_formulas(FormulaTable&) {}

}  // namespace mstep::autograd
