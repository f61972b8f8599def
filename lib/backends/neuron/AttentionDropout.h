// Dropout on the attention probabilities (sdpa's dropout_p with an RNG
// state operand) inside the forward and backward tile programs, with ref's
// numbers (RefAttention.cpp, RefAttentionGrad.cpp): probability (h, i, j)
// of the flat [..., L, S] matrix is kept iff Philox::uniform(seed, state
// offset + node offset, (h L + i) S + j) >= p, and kept ones are scaled by
// 1 / (1 - p). The draw is the standalone dropout's (DropoutLowering.h):
// GpSimd philox_uniform over a [rows, w] tile with the affine counter
// node offset + (h L + q0) S + k0 + partition S + column, then Vector turns
// u into the factor F = (u >= p) / (1 - p) (the comparison against the
// smallest float >= p, exactly ref's double comparison). The programs
// multiply by F where ref's formulas have keep / (1 - p): the forward its
// P before P V (the row sums stay undropped, as ref); the backward dP
// (before D = sum P dP and dS = P (dP - D)) and P where it multiplies dO
// into dV. The backward (recompute) regenerates the same F from the same
// counters. Nothing is emitted without dropout: those programs are
// unchanged. Library-internal.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "lib/backends/neuron/AttentionProgram.h"
#include "lib/backends/neuron/DependencyTracker.h"
#include "lib/backends/neuron/TileBuilder.h"

namespace mstep::neuron {

class AttentionDropout {
public:
  /// OK, or why `s`'s dropout cannot be drawn on chip.
  static absl::Status tileable(const AttentionShape& s);

  /// With s.dropout: the HBM tensor "rng_state" (the int64 [2] state as
  /// int32 [4]; created here, so after the programs' other inputs) loaded
  /// to every partition.
  AttentionDropout(TileBuilder& b, DependencyTracker& deps, const AttentionShape& s);

  bool on() const { return state_ >= 0; }

  /// GpSimd: the uniforms of rows [q0, q0 + dst.partitions) and keys [k0,
  /// k0 + dst's columns) of batch-head h into `dst` (fp32 [rows, w]).
  void draw(TileBuilder& b, DependencyTracker& deps, const AccessPattern& dst, int64_t h,
            int64_t q0, int64_t k0) const;
  /// Vector: `u` (a draw) becomes F = (u >= p) / (1 - p), in place.
  void to_factor(TileBuilder& b, DependencyTracker& deps, const AccessPattern& u) const;
  /// Vector: x *= F (x in any dtype, F fp32 of x's shape).
  void apply(TileBuilder& b, DependencyTracker& deps, const AccessPattern& x,
             const AccessPattern& factor) const;

private:
  const AttentionShape& s_;
  int32_t state_ = -1; ///< SBUF int32 [128, 4]
};

} // namespace mstep::neuron
