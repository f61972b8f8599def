// Backward formulas: loss ops. STUB: not implemented yet.
#include "lib/api/autograd/Formulas.h"

namespace mstep::autograd {

void register_loss_formulas(FormulaTable&) {}

}  // namespace mstep::autograd
