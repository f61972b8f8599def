// The backward formula table and the list of non-differentiable ops.
#include "lib/api/autograd/Formulas.h"

namespace mstep::autograd {

const FormulaTable& formulas() {
  static const FormulaTable table = [] {
    FormulaTable t{};
    register_elementwise_formulas(t);
    register_reduction_formulas(t);
    register_shape_formulas(t);
    register_linalg_formulas(t);
    register_nn_formulas(t);
    register_attention_formulas(t);
    register_loss_formulas(t);
    register_custom_formulas(t);
    register_collective_formulas(t);
    return t;
  }();
  return table;
}

bool is_non_differentiable(OpKind op) {
  switch (op) {
    case OpKind::parameter: case OpKind::data: case OpKind::constant:
    case OpKind::full: case OpKind::arange: case OpKind::rand: case OpKind::randn:
    case OpKind::isnan: case OpKind::isfinite: case OpKind::logical_not:
    case OpKind::eq: case OpKind::ne: case OpKind::lt: case OpKind::le:
    case OpKind::gt: case OpKind::ge: case OpKind::logical_and: case OpKind::logical_or:
    case OpKind::argmax:
      return true;
    default:
      return false;
  }
}

}  // namespace mstep::autograd
