// What an `sdpa` or `sdpa_grad` node asks of the flash attention kernels:
// shapes, options and operand/result positions, read once from the node
// when the kernel is built; and the per-run values (valid lengths, the RNG
// state) the kernels read from their operands.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cpu/CpuKernel.h"
#include "lib/backends/cpu/FlashAttentionTiles.h"

namespace mstep::cpu::flash {

struct AttentionParams {
  bool backward = false;  // sdpa_grad
  DType dtype = DType::f32;
  int64_t batch = 1;        // flat batch-heads: the product of the leading dims
  int64_t rows_per_b0 = 1;  // flat batch-heads per index of dim 0
  int64_t L = 0, S = 0, E = 0, Ev = 0;
  bool causal = false, left_pad = false, dropout = false;
  double scale = 1, p = 0;
  int64_t rng_offset = -1;  // the node's position in the Philox stream

  // Operand positions; -1 when absent.
  int grad_out = -1, q = 0, k = 1, v = 2;
  int mask = -1, valid_len = -1, rng_state = -1, saved_probs_in = -1;
  // Result positions after the first (out, or dq dk dv); -1 when absent.
  int probs = -1, dropout_mask = -1, saved_probs_out = -1, dmask = -1;

  bool bool_mask = false;
  DType len_dtype = DType::i64;
  /// Per batch-head: the mask element of (row 0, key 0) under broadcasting.
  std::vector<int64_t> mask_base;
  int64_t mask_row_stride = 0, mask_col_stride = 0, mask_numel = 0;
  /// Two batch-heads read the same mask elements (the mask is broadcast
  /// over a batch or head dim), so their mask gradients meet.
  bool mask_shared_across_batch = false;

  int64_t mask_offset(int64_t b, int64_t i, int64_t j) const {
    return mask_base[b] + i * mask_row_stride + j * mask_col_stride;
  }
};

/// Reads and checks the node `request` names, which must be sdpa or
/// sdpa_grad. An error names the op, the shapes and what disagrees.
absl::StatusOr<AttentionParams> read_attention_params(const KernelRequest& request);

/// The query rows [row_lo, row_hi) and keys [key_lo, key_hi) of batch-head
/// b that valid_seq_len keeps (everything without one), as the ref kernel
/// clamps them.
struct ValidRanges {
  int64_t row_lo, row_hi, key_lo, key_hi;
};
ValidRanges valid_ranges(const AttentionParams& params, const void* valid_len, int64_t b);

/// The dropout draw for one run, from the RNG state operand (seed, offset).
DropoutDraw read_dropout(const AttentionParams& params, const void* rng_state);

/// The kernels, for f32 or bf16 params (FlashAttention.cpp,
/// FlashAttentionGrad.cpp).
std::unique_ptr<CpuKernel> make_flash_sdpa_kernel(AttentionParams params);
std::unique_ptr<CpuKernel> make_flash_sdpa_grad_kernel(AttentionParams params);

}  // namespace mstep::cpu::flash
