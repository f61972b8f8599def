// Backward formulas, one per differentiable primitive op, registered by op
// family into a table indexed by OpKind (like the ref backend's kernels).
// A formula builds the input gradients from public lazy ops; it runs with
// grad mode off (no higher-order gradients).
#pragma once

#include <array>
#include <vector>

#include "mstep/api/Tensor.h"
#include "mstep/ir/Attr.h"
#include "mstep/ir/OpKind.h"

namespace mstep::autograd {

struct BackwardContext {
  OpKind op;
  const AttrList& attrs;
  const std::vector<Tensor>& inputs;   // the forward inputs
  const std::vector<Tensor>& outputs;  // the forward outputs (detached)
  const std::vector<Tensor>& grads;    // per output; undefined = zero
  const std::vector<bool>& needs;      // per input: a gradient is wanted

  bool needs_grad(size_t input) const { return needs[input]; }
  /// Gradient of output `i`, zeros when it was not used.
  Tensor grad(size_t i = 0) const;
  const Tensor& input(size_t i) const { return inputs[i]; }
  const Tensor& output(size_t i = 0) const { return outputs[i]; }
};

/// Returns one gradient per forward input (undefined where not needed or
/// not differentiable).
using BackwardFormula = std::vector<Tensor> (*)(const BackwardContext&);
using FormulaTable = std::array<BackwardFormula, kNumOpKinds>;

/// The registered formulas.
const FormulaTable& formulas();
/// Ops whose outputs never carry gradients (comparisons, argmax, random,
/// integer results...). Recording them with requires-grad inputs is fine.
bool is_non_differentiable(OpKind op);

void register_elementwise_formulas(FormulaTable& table);
void register_reduction_formulas(FormulaTable& table);
void register_shape_formulas(FormulaTable& table);
void register_linalg_formulas(FormulaTable& table);
void register_nn_formulas(FormulaTable& table);
void register_attention_formulas(FormulaTable& table);
void register_loss_formulas(FormulaTable& table);
/// The `custom` op: the backward its registration gives (CustomBackward.cpp).
void register_custom_formulas(FormulaTable& table);
void register_collective_formulas(FormulaTable& table);

/// Sums `grad` over the dims that broadcasting added or expanded, so it
/// has `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& grad, const Shape& shape);

}  // namespace mstep::autograd
