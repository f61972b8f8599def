// What every lowering shares: the refusal error ("neuron lowering: <op> not
// tiled: <why>"), the dtypes the engines tile, the value of a 0-d constant,
// and the engine operation (EwOp) of an elementwise step-graph op.
#pragma once

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include <vector>

#include "lib/backends/neuron/TileInstruction.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::neuron {

/// Unimplemented: "neuron lowering: <op> not tiled: <why>" (the backend then
/// runs the op as a counted host fallback).
absl::Status refuse(OpKind op, absl::string_view why);

/// f32 or bf16: what the lowerings put in tiles.
bool tileable_dtype(DType d);

/// `v` as a tile of dtype `d` (f32 or bf16) stores it: the immediate of an
/// engine op that stands for a value of that dtype.
float round_to_dtype(double v, DType d);

/// A flat tensor of n elements viewed as [128, f] (partition p holds
/// elements [p * f, (p + 1) * f), f = n / 128) and the tail of n mod 128
/// elements as one partition; a piece is a column chunk of either.
struct FlatPiece {
  int64_t base = 0;      ///< first element of the view (0, or 128 * f for the tail)
  int32_t parts = 0;     ///< partitions
  int64_t row = 0;       ///< row length (f, or the tail's length)
  int64_t c0 = 0, w = 0; ///< columns [c0, c0 + w)
};
/// The pieces of n elements, column chunks at most `chunk` wide.
std::vector<FlatPiece> flat_pieces(int64_t n, int64_t chunk);
/// The HBM pattern of `piece` in flat HBM tensor `tensor`.
AccessPattern flat_hbm(int32_t tensor, DType dt, const FlatPiece& piece);

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
/// ew_op of node `n`, with the attributes that pick the engine function
/// (gelu's approximate: the erf or the tanh form).
std::optional<EwOp> ew_op_of(const GraphNode& n, int32_t a, int32_t b,
                             std::optional<float> scalar);

} // namespace mstep::neuron
