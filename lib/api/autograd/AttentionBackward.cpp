// Backward formulas: attention ops. STUB: not implemented yet.
#include "lib/api/autograd/Formulas.h"

namespace mstep::autograd {

void register_attention_formulas(FormulaTable&) {}

}  // namespace mstep::autograd
