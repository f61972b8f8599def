// The attention backward's plan (AttentionBackwardProgram.cpp): what a
// resident batch-head set holds (the operand pairing, pass 1's P and dP
// kept for pass 2, the SBUF bytes) and the work items in their software
// pipelined order. Library-internal.
#pragma once

#include <cstdint>
#include <vector>

#include "lib/backends/neuron/AttentionProgram.h"

namespace mstep::neuron::attention_backward {

/// SBUF bytes per partition of one batch-head's operands in the backward
/// (q, dO, k, v by rows and transposed apart, nothing kept for pass 2).
int64_t backward_bytes(const AttentionShape& s);

/// q and dO side by side in one rows tile (k and v in another) when both
/// fit the 128 partitions of one transpose: one Tensor transpose and one
/// PSUM copy then make q^T and dO^T together (on partitions [0, E) and
/// [second, second + Ev); k^T and v^T likewise), half the copies of
/// transposing them apart. `second` keeps the second operand's partitions
/// aligned as the engines require (Validator: 33-64 partitions start at 0
/// or 64, up to 32 at a multiple of 32).
struct OperandPairing {
  bool on = false;
  int64_t second = 0; ///< dO's (v's) first column in a block of the rows tile
  int64_t pitch = 0;  ///< columns per 128-row block of the rows tile
};
OperandPairing operand_pairing(const AttentionShape& s);

/// The keys pass 1 covers for Q tile [q0, q0 + rows) when pass 2 reuses
/// its P and dP: causal, up to the key block of its last row (the keys
/// past that row come out 0: masked like any key above the diagonal).
int64_t tile_keys(const AttentionShape& s, int64_t q0, int64_t rows);

/// SBUF bytes per partition of a resident set: as backward_bytes, with the
/// pairing's rows tiles and, when pass 2 reuses pass 1's P (in the dtype)
/// and dP (fp32), [rows, tile_keys] per Q tile, those (with dropout, the
/// dropped P too).
int64_t set_bytes(const AttentionShape& s, const OperandPairing& pair, bool reuse);

/// A resident batch-head set's SBUF allocations (per Q tile where a tile
/// holds a column or columns per tile).
struct HeadSet {
  int32_t qT, kT, doT, vT, q_rows, do_rows, k_rows, v_rows, dq_acc, negm, rl, l, dsum;
  int32_t ds_bias; ///< per tile, pass 2's bias: -D
  int32_t dq_out;
  int32_t kbias = -1; ///< valid_seq_len's key bias
  int32_t kept = -1;  ///< attn_mask: per tile, 1 where the row keeps a key
  /// reuse: per Q tile -P = -exp(scale S - m) / l in the dtype and dP
  /// (fp32, dropped); with dropout -P dropped too (dV's operand).
  std::vector<int32_t> p_in_kept, dp_kept, p_drop_kept;
};

/// Pass 1: a Q tile's key chunk (its statistics m, l, D); pass 2: the
/// gradients of a key block's Q tile at or below the diagonal (with
/// reuse: of a Q tile over all its key blocks); empty: a key block no row
/// sees (zero dK and dV).
enum class ItemKind { pass1, pass2, empty };

struct WorkItem {
  ItemKind kind;
  int64_t h, t, q0, rows, k0, w; ///< pass 2: k0 = the block's first key, w = its keys
  int64_t kb = 0;
  bool first = false, last = false; ///< pass 1: of the tile; pass 2: of the key block
                                    ///< (reuse: last of the batch-head)
  bool diagonal = false;
  bool head_last = false;
  uint64_t fresh = 0; ///< reuse, pass 2: bit kb where the item starts key block kb's sums
};

struct BackwardItems {
  std::vector<WorkItem> items;
  /// Per item (and one past the end): where a pipelined group starts, the
  /// one before drained.
  std::vector<bool> starts;
};

/// The items of every batch-head in their order, for `nsets` resident sets
/// and a pipeline of `stages` stages (pass 1's key chunks of `chunk1`).
BackwardItems backward_items(const AttentionShape& s, bool reuse, int nsets, int64_t chunk1,
                             int64_t stages);

} // namespace mstep::neuron::attention_backward
