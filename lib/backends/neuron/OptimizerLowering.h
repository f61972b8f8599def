// The fused optimizer update, mstep.multi_tensor_update (issue 19): SGD
// (momentum, dampening, Nesterov), Adam, AdamW (amsgrad), Adadelta, with
// weight decay, maximize and clip_grad_norm_ (the 2-norm), as one tile
// program over all parameters.
//   Clipping: each gradient, viewed flat as [128, n/128] plus a tail
//     (flat_pieces), is squared and summed along the free axis on the
//     Scalar engine (activation square with accum); a matmul against an
//     on-chip ones tile sums the partitions into PSUM (accumulated over the
//     chunks) and leaves the sum on every partition. Then per gradient its
//     norm, the total norm, and min(max_norm / (total + 1e-6), 1) as a
//     [128, 1] column, as RefOptimizer.cpp orders them (sums in fp32 here,
//     double there: the clip coefficient agrees to about 1e-7).
//   Update: per parameter, chunk by chunk (double-buffered, each chunk's
//     loads emitted before the chunk before it computes), one instruction
//     per operation of ref's formula, in ref's order, each result stored in
//     the parameter's dtype as ref rounds it (f32: the same bits as ref).
//     Tensor-tensor operations run on Vector; a product with (or a sum
//     with) a per-parameter scalar runs on the Scalar engine as an identity
//     activation with a [P, 1] scale (bias -0: x * s + -0 is exactly the
//     fp32 product, -0 included) or bias column (x * 1 + s), as does sqrt.
// The 0-d hyperparameters (f64 operands) and step counts are runtime
// values: LoweredOp::stage computes the per-parameter scalars from them on
// the host exactly as ref does (f64, then one cast to the dtype), and the
// advanced step counts; the program reads the scalars as a small table
// broadcast to all partitions. Refused (host fallback): other norm types,
// mixed dtypes, dtypes other than f32/bf16, empty parameters.
#pragma once

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "lib/backends/neuron/Lowering.h"

namespace mstep::neuron {

absl::StatusOr<LoweredOp> lower_multi_tensor_update(const GraphNode& node,
                                                    absl::Span<const TensorType> operand_types);

} // namespace mstep::neuron
