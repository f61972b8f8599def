// What every lowering shares: the refusal error ("neuron lowering: <op> not
// tiled: <why>"), the dtypes the engines tile, the value of a 0-d constant,
// and the engine operation (EwOp) of an elementwise step-graph op.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "lib/backends/neuron/TileInstruction.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::neuron {

/// Unimplemented: "neuron lowering: <op> not tiled: <why>" (the backend then
/// runs the op as a counted host fallback).
absl::Status refuse(OpKind op, absl::string_view why);

/// f32 or bf16: what the lowerings put in tiles.
bool tileable_dtype(DType d);

/// The value of a 0-d f32/bf16 constant node as its dtype stores it (an
/// immediate of the engine ops), or nullopt for any other node.
std::optional<float> scalar_constant(const GraphNode& n);

/// One engine operation on whole values: result = a <alu> b (tensor_tensor),
/// a <alu> scalar (tensor_scalar) or f(a) (activation).
struct EwOp {
  Opcode opcode = Opcode::tensor_tensor;
  AluOp alu = AluOp::add;
  ActivationFunction function = ActivationFunction::identity;
  float scalar = 0;
  int32_t a = -1, b = -1;
};

/// The EwOp of `op` over values `a` (and `b`, or the scalar `scalar` when
/// b is -1 and the op is binary), or nullopt when it has no engine op.
std::optional<EwOp> ew_op(OpKind op, int32_t a, int32_t b, std::optional<float> scalar);

} // namespace mstep::neuron
