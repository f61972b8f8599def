// The fp32 arithmetic of the Vector and Scalar engines over whole rows:
// one switch on the op per call, then a plain loop (no per-element dispatch).
#pragma once

#include <cstdint>

#include "lib/backends/neuron/TileInstruction.h"

namespace mstep::neuron {

/// out[i] = a[i] <op> b[i].
void alu_arrays(AluOp op, const float* a, const float* b, float* out, int64_t n);
/// out[i] = a[i] <op> s.
void alu_scalar(AluOp op, const float* a, float s, float* out, int64_t n);
/// out[i] = f(x[i] * scale + bias).
void activate(ActivationFunction f, const float* x, float scale, float bias, float* out, int64_t n);
/// The <op>-reduction of x[0..n) (add, max, min, multiply; fp32).
float reduce_row(AluOp op, const float* x, int64_t n);
/// out = (n, mean, M2) of x[0..n), two passes in fp32.
void bn_stats_row(const float* x, int64_t n, float* out);
/// out = (mean, M2 / count) of `records` (count, mean, M2) records,
/// combined pairwise in fp32 (Chan et al.); empty records are skipped.
void bn_aggr_row(const float* records, int64_t count, float* out);

} // namespace mstep::neuron
