// The neuron kernels of custom ops (mstep/runtime/NeuronCustomKernel.h):
// a custom node's registered "neuron" kernel is built into a tile program
// for the node's types, checked and costed like the backend's own
// lowerings, and run by the executable in place of the host fallback.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/Lowering.h"
#include "mstep/runtime/NeuronCustomKernel.h"

namespace mstep::neuron {

/// The tile program of `kernel` for a call of the custom op `label` with
/// these input and output types and attributes: HBM tensor i is input i,
/// then one per output (LoweredOp::hbm_binding says so). Validated and
/// costed. Unimplemented when a tensor has a dtype the engines lack (f64,
/// int64, bool), has no elements, or the kernel declines the call
/// (returns Unimplemented): the op then runs on the host. Any other error
/// names the op: the kernel's own, a builder misuse, an output element no
/// store writes, or a hardware rule the program breaks (the validator's
/// message: the instruction, the rule, the values).
absl::StatusOr<LoweredOp> build_neuron_kernel(absl::string_view label,
                                              const NeuronTileKernel& kernel,
                                              absl::Span<const TensorType> inputs,
                                              absl::Span<const TensorType> outputs,
                                              const CustomAttrView& attrs);

/// build_neuron_kernel for the custom node `node` (operand types
/// `operand_types`) with the "neuron" kernel its op registered;
/// Unimplemented when the op has none (a counted host fallback), or a
/// FailedPrecondition when the kernel registered there is of another kind.
absl::StatusOr<LoweredOp> lower_custom_op(const GraphNode& node,
                                          absl::Span<const TensorType> operand_types);

/// "custom giou_loss", the node's name in the simulated timeline (the op's
/// label; "custom" when the op is not registered).
std::string custom_op_label(const GraphNode& node);

} // namespace mstep::neuron
