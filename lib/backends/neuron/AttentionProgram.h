// The attention forward tile program (flash tiling, issue 19): for each
// batch-head, out = softmax(scale * q k^T [causal]) v without the [L, S]
// matrix ever leaving the chip.
//
// Per unit of batch-heads (two when the head dim is 32 or 64: their q^T
// and k^T share the 128 partitions; else one), q and k are loaded by rows
// and v ([128 keys, S/128 blocks, Ev]) into SBUF (contiguous DMAs), up to
// eight units resident, and q^T and k^T ([E, L], [E, S]: head dim on the
// partitions) made from them on chip by Tensor-engine transposes
// (AttentionTiles.h: a transposing DMA moves one element per descriptor,
// far slower). Per Q tile of up to 128 rows and key chunk of up to 512
// keys, in eight stages:
//   0. Tensor:  S = q^T' k^T chunk into a PSUM bank [rows, 512] (fp32); a
//               chunk crossing the causal diagonal masked there by an
//               accumulated 0/-1e30 tile (CausalMask; chunks wholly above
//               the diagonal are skipped);
//   1. Scalar or Vector: s = scale S (or -s) copied to SBUF, the PSUM
//               port the two engines share taken once per score (masks
//               that cannot go in PSUM applied there);
//   2. Vector:  the chunk's row max, the running max m (online softmax);
//   3. Scalar:  p = exp(s - m) in the input dtype with its row sum (the
//               activation's add-reduce), alpha = exp(m_old - m);
//   4. Tensor:  p^T per 128-key block by a matmul against the identity
//               (made on chip by iota + affine_select); Vector: l = l alpha
//               + rowsum and, after a tile's last chunk, 1 / l;
//   5. Scalar or Vector: p^T copied to SBUF;
//   6. Tensor:  p v accumulated over the blocks in a PSUM bank;
//   7. Vector:  o = o alpha + p v (fp32, SBUF); after a tile's last chunk,
//               Scalar: out = o / l in the input dtype, DMA'd out.
// In bf16, consecutive chunks of a unit with the same rows share their
// PSUM banks by groups of up to three (one copy out of PSUM per group). The stages
// of consecutive groups are interleaved (software pipelining), the waits
// come from a DependencyTracker.
//
// HBM tensors, in order: "q" [B, L, E], "k" [B, S, E], "v" [B, S, Ev],
// "out" [B, L, Ev] (all `dtype`, row-major, or each at the heads' strides
// of a [B', L, H, E] tensor: AttentionShape::heads), and with save_stats the fp32
// "row_max" and "row_sum" [B, L] (m in scaled-score units and l, so the
// log-sum-exp a backward recomputes from is m + ln l); with `lengths` last
// the int32 "valid_len" (ValidLength in AttentionTiles.h).
#pragma once

#include <vector>

#include "absl/status/status.h"
#include "lib/backends/neuron/TileProgram.h"

namespace mstep::neuron {

struct AttentionShape {
  int64_t batch = 1; ///< batch x heads, flattened
  int64_t q_len = 0, kv_len = 0;
  int64_t head_dim = 0, value_dim = 0;
  DType dtype = DType::bf16;
  float scale = 1.0f;
  bool causal = false; ///< key j excluded from query row i when j > i
  bool save_stats = false;
  /// valid_seq_len (FusedSDPA padding), 0: none. Else the number of
  /// lengths (q's dim 0); batch-head h uses length h / (batch / lengths),
  /// read on chip from the HBM tensor "valid_len" (the last): int32, or
  /// with lengths_i64 int64 as int32 (low, high) word pairs. As ref: a key
  /// outside [0, len) (left_padding: [S - len, S)) is excluded, a query
  /// row outside [0, len) ([L - len, L)) or with every key excluded gives
  /// zeros (and no gradient). Padded keys' k and v are zeroed on chip, so
  /// NaN or inf stored there never reaches a result (AttentionValidLength.h).
  int64_t lengths = 0;
  bool lengths_i64 = false;
  bool left_padding = false;
  /// attn_mask (AttentionMask.h), read on chip from the HBM tensor "mask"
  /// (after "valid_len"): `mask_elements` of `mask_dtype` (boolean: key
  /// excluded where false; f32/bf16, q's dtype: added to the scaled
  /// scores). Element (h, i, j) of the [..., L, S] scores it broadcasts to
  /// is at mask_head_offset[h] + i mask_row_stride + j mask_col_stride
  /// (strides 0 where the mask's dim is 1). As ref: a row whose every key
  /// is excluded (false, -inf, or valid_seq_len) gives zeros.
  enum class Mask : uint8_t { none, boolean, additive };
  Mask mask = Mask::none;
  DType mask_dtype = DType::boolean;
  int64_t mask_elements = 0, mask_row_stride = 0, mask_col_stride = 0;
  std::vector<int64_t> mask_head_offset; ///< one per batch-head
  /// Per HBM tensor: 0, the row-major [batch, len, d] above; else H, the
  /// tensor is [B, len, H, d] (the bytes a head permute [..., len, H, d] ->
  /// [..., H, len, d] reads; batch = B H): batch-head b H + j's row i is at
  /// ((b len + i) H + j) d, rows H d apart, each d contiguous elements
  /// (128 bytes for bf16 d 64: above the DMA descriptor floor). Only the
  /// DMAs' HBM addresses differ (head_rows in AttentionTiles.h).
  struct HeadStrides {
    int64_t q = 0, k = 0, v = 0, out = 0;         ///< forward (and q, k, v of the backward)
    int64_t grad_out = 0, dq = 0, dk = 0, dv = 0; ///< backward only
  };
  HeadStrides heads;
};

/// OK, or why attention_forward_program cannot tile `shape`.
absl::Status attention_tileable(const AttentionShape& shape);

/// The program (attention_tileable(shape) must be OK).
TileProgram attention_forward_program(const AttentionShape& shape);

/// The backward (FlashAttention style, nothing [L, S] saved): per
/// batch-head, pass 1 recomputes each query row's max m, sum l and
/// D = sum_j P_ij dP_ij (dP = dO v^T) chunk by chunk, online; pass 2, per
/// 128-key block and Q tile, recomputes P = exp(scale S - m) / l (causal:
/// masked by affine_select, blocks above the diagonal skipped) and
/// accumulates dV += P^T dO and dK += dS^T q in PSUM across Q tiles
/// (dS = P (dP - D)), and dQ += dS k in SBUF (dS^T by a matmul against the
/// identity); dK and dQ are scaled at the end. When every Q tile's keys
/// fit one pass 1 chunk, pass 2 reuses pass 1's P and dP instead
/// (AttentionBackwardPlan.h). q, dO, k and v are loaded by rows, their
/// transposes made on chip. HBM tensors, in order:
/// "grad_out" [B, L, Ev], "q", "k", "v", "dq" [B, L, E], "dk" [B, S, E],
/// "dv" [B, S, Ev]. save_stats is ignored.
absl::Status attention_backward_tileable(const AttentionShape& shape);
TileProgram attention_backward_program(const AttentionShape& shape);

} // namespace mstep::neuron
