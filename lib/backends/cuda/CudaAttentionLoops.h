// The loop nests of the composed attention (CudaComposedAttention.h): the
// row-wise parts of mstep.sdpa and its backward between the cuBLASLt
// matmuls, following lib/backends/ref's RefAttention.cpp and
// RefAttentionGrad.cpp (whose comments give the rules) op for op: f64
// arithmetic within a row, one rounding per stored element, dropout's
// keep decisions from the same Philox words (counter = state offset +
// rng_offset + the element's linear index in [..., L, S]).
//
// Both are one lane per score row (batch-head b, query row i), reading
// and writing the [..., L, S] scratch of the plan in place:
//
//   probs:       scores (q·kᵀ) -> probabilities: scale, the additive
//                mask added or the boolean mask / causal rule /
//                valid_seq_len (left or right) excluding keys, a softmax
//                with ref's NaN-propagating max (a row with every key
//                excluded is all zeros), then dropout's keep / (1 - p)
//                when asked.
//   probs_grad:  (P, dP' = g·vᵀ) -> (P' = P·keep/(1-p) for dV = P'ᵀ·g,
//                scale·dS with dS = P·(dP - Σ P·dP), dP = dP'·keep/(1-p),
//                for dQ = dS·k and dK = dSᵀ·q); keys with P = 0 give 0.
//
// Library-internal; MLIR.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace mlir::func {
class FuncOp;
}

namespace mstep::cuda {

/// The static description of one attention node, for the loop nests.
struct AttentionRows {
  /// The score matrix's shape [..., L, S] (q's leading dims).
  std::vector<int64_t> scores_shape;
  int64_t batch_heads = 1; ///< the product of the leading dims
  int64_t rows_per_b0 = 1; ///< batch-heads per index of dim 0 (valid_seq_len's index)
  int64_t L = 0, S = 0;
  double scale = 1, dropout_p = 0;
  int64_t rng_offset = 0;
  bool causal = false, left_padding = false;
  /// The mask's strides over scores_shape (0 where it broadcasts); empty
  /// without a mask.
  std::vector<int64_t> mask_strides;
  bool boolean_mask = false;

  int64_t rows() const { return batch_heads * L; }
};

/// Which parameters of the kernel func are which buffer (-1: absent).
struct AttentionParams {
  int mask = -1, valid_seq_len = -1, rng = -1;
  int scores = -1; ///< probs: the scores, overwritten by the probabilities
  /// probs, written when present: the probabilities before dropout (the
  /// forward's saved_probs), after it (its returned probs, a copy of what
  /// `scores` gets), and dropout's keep decisions (i1; all true without
  /// dropout).
  int saved = -1, returned = -1, dropout_mask = -1;
  int probs = -1;  ///< probs_grad: P, overwritten by P'
  int dprobs = -1; ///< probs_grad: dP', overwritten by scale·dS
  int ds = -1;     ///< probs_grad, when present: dS in f64 (for the mask's gradient)
  int grad_mask = -1; ///< mask_grad: the mask's gradient (from `ds`)
};

/// The probs loop nest in `func` (its entry block empty; a return added).
/// Dropout is applied iff `dropout` (the backward recomputes P without).
void build_attention_probs(mlir::func::FuncOp func, const AttentionRows& rows,
                           const AttentionParams& params, bool dropout);

/// The probs_grad loop nest in `func` (its entry block empty).
void build_attention_probs_grad(mlir::func::FuncOp func, const AttentionRows& rows,
                                const AttentionParams& params);

/// The mask_grad loop nest in `func`: one lane per element of an additive
/// mask, summing dS (probs_grad's f64 `ds`) over every position of
/// [..., L, S] broadcasting maps onto it, in ref's order (ascending flat
/// position), rounded once (RefAttentionGrad.cpp's dmask).
void build_attention_mask_grad(mlir::func::FuncOp func, const AttentionRows& rows,
                               const AttentionParams& params);

/// i64 valid_seq_len as the i32 lengths cuDNN's SDPA takes (parameter 0:
/// i64[n], 1: i32[n]), one lane per length, clamped to [0, 2^31 - 1]
/// first: ref clamps a length to [0, L] (or S) anyway, so the attention is
/// unchanged while a plain truncation would wrap a huge length into any
/// value.
void build_lengths_as_i32(mlir::func::FuncOp func);

} // namespace mstep::cuda
