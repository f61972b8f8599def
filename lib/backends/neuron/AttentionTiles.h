// The tiles and access patterns that the attention forward
// (AttentionProgram.cpp) and backward (AttentionBackwardProgram.cpp)
// programs share: tile sizes, SBUF/PSUM views, the on-chip identity, the
// causal mask tile (valid_seq_len's masking: AttentionValidLength.h).
// Library-internal.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "lib/backends/neuron/AttentionProgram.h"
#include "lib/backends/neuron/DependencyTracker.h"
#include "lib/backends/neuron/TileBuilder.h"

namespace mstep::neuron::attention_tiles {


inline constexpr int64_t kChunk = 512; ///< keys per QK^T matmul: one PSUM bank of fp32
inline constexpr int64_t kBlock = 128; ///< keys per P^T block (the partitions of P^T and v)

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/// SBUF bytes per partition of one batch-head's q^T, k^T and v (and its
/// valid_seq_len key-bias row, counted at the element size: it is bf16).
inline int64_t head_bytes(const AttentionShape& s) {
  const int64_t es = static_cast<int64_t>(element_size(s.dtype));
  return es * (s.q_len + s.kv_len + ceil_div(s.kv_len, kBlock) * s.value_dim +
               (s.lengths > 0 ? s.kv_len : 0));
}

inline AccessPattern at(BufferKind kind, int32_t alloc, DType d, int64_t parts, int64_t offset,
                 std::initializer_list<FreeDim> dims) {
  return tile_pattern(kind, alloc, d, 0, static_cast<int32_t>(parts), offset, dims);
}
/// [parts, cols] at `offset` of each partition of an SBUF allocation.
inline AccessPattern sb(int32_t alloc, DType d, int64_t parts, int64_t offset, int64_t cols) {
  return at(BufferKind::sbuf, alloc, d, parts, offset, {{cols, 1}});
}
/// [parts, cols] fp32 at `offset` of a PSUM bank.
inline AccessPattern ps(int32_t alloc, int64_t parts, int64_t offset, int64_t cols) {
  return at(BufferKind::psum, alloc, DType::f32, parts, offset, {{cols, 1}});
}
/// Column `c` of an fp32 SBUF allocation, [parts, 1].
inline AccessPattern column(int32_t alloc, int64_t parts, int64_t c = 0) {
  return sb(alloc, DType::f32, parts, c, 1);
}
/// Column `c` of an fp32 SBUF allocation seen as [parts, cols] (free stride 0).
inline AccessPattern broadcast(int32_t alloc, int64_t parts, int64_t cols, int64_t c = 0) {
  return at(BufferKind::sbuf, alloc, DType::f32, parts, c, {{cols, 0}});
}

/// Rows [row0, row0 + parts) of batch-head h of an HBM tensor of `len`
/// rows of d elements per batch-head, laid out as `heads` says
/// (AttentionShape::HeadStrides: 0 contiguous, else H of [B, len, H, d]).
inline AccessPattern head_rows(int32_t tensor, DType dt, int64_t heads, int64_t len, int64_t d,
                               int64_t h, int64_t row0, int64_t parts) {
  const int32_t p = static_cast<int32_t>(parts);
  if (heads == 0) return hbm_rows(tensor, dt, d, h * len + row0, p, 0, d);
  return hbm_rows(tensor, dt, heads * d, h / heads * len + row0, p, h % heads * d, d);
}

/// The [128, 128] identity in `dt` for transposes by nc_matmul: ones by
/// iota, then the diagonal kept by affine_select.
inline int32_t make_identity(TileBuilder& b, DependencyTracker& deps, DType dt) {
  const int64_t es = static_cast<int64_t>(element_size(dt));
  const int32_t ones = b.allocate(BufferKind::sbuf, kBlock * es, "ones");
  const int32_t ident = b.allocate(BufferKind::sbuf, kBlock * es, "identity");
  deps.track(b.iota(sb(ones, dt, kBlock, 0, kBlock), AffineExpr{1, 0, {0}}));
  deps.track(b.affine_select(sb(ident, dt, kBlock, 0, kBlock), sb(ones, dt, kBlock, 0, kBlock),
                             AffineExpr{0, 1, {-1}}, CmpOp::equal, 0.0f));
  return ident;
}

/// Causal masking on the Tensor engine (scale > 0): a diagonal chunk's
/// scores get I^T M_d accumulated in PSUM, M_d[p, x] = 0 where key x may
/// be seen by row p (d + p - x >= 0, d = q0 - k0), else -1e30 (finite:
/// 0 x -inf would be NaN), so max and exp need no mask and the GpSimd
/// engine (which shares SBUF with Vector) no affine_select per chunk. Every
/// M_d is a window of one [128, 1152] tile made once: M_d = base[:, c - d :
/// c - d + w], base[p, y] = (c + p - y >= 0 ? 0 : -1e30), c = 512 (d is
/// in [-127, 510] for a diagonal chunk of up to 512 keys).
struct CausalMask {
  static inline constexpr int64_t kC = kChunk, kWidth = 2 * kChunk + kBlock;
  int32_t tile = -1;
  int32_t ident = -1;
  DType dt = DType::bf16;

  CausalMask(TileBuilder& b, DependencyTracker& deps, DType dtype, int32_t identity)
      : ident(identity), dt(dtype) {
    tile = b.allocate(BufferKind::sbuf, kWidth * static_cast<int64_t>(element_size(dt)),
                      "causal_mask");
    const AccessPattern all = sb(tile, dt, kBlock, 0, kWidth);
    deps.track(b.iota(all, AffineExpr{0, 0, {0}}));
    deps.track(b.affine_select(all, all, AffineExpr{kC, 1, {-1}}, CmpOp::greater_equal, -1e30f));
  }
  /// Accumulates M_{q0 - k0} into [rows, w] at column `col` of PSUM `bank`.
  void add(TileBuilder& b, DependencyTracker& deps, int32_t bank, int64_t col, int64_t rows,
           int64_t q0, int64_t k0, int64_t w) const {
    deps.track(b.matmul(ps(bank, rows, col, w), sb(ident, dt, rows, 0, rows),
                        sb(tile, dt, rows, kC - (q0 - k0), w), true));
  }
};

/// An operand with its head (or value) dim on the partitions, made on
/// chip: rows [row0, row0 + len) of a row-major [..., d] HBM tensor (d <=
/// 128) as [d, len] in SBUF. A transposing DMA would walk one element per
/// descriptor (CostParams::dma_descriptor_bytes: 32x the time for bf16);
/// instead load() DMAs each 128-row block by rows (contiguous) into a rows
/// tile ([128, blocks x d], block j at column j d), and transpose() turns
/// the blocks around on the Tensor engine (a matmul against the identity,
/// exact: one product per output), four blocks to the PSUM bank `bank`,
/// each bank copied to the destination by the Scalar engine. Emit load()
/// early (the DMAs run on their own) and transpose() shortly before the
/// operand is needed: the Tensor queue is in order.
struct OnChipTranspose {
  int32_t ident = -1;
  int32_t bank = -1;
  DType dt = DType::bf16;

  /// SBUF bytes per partition of the rows tile of `len` rows of width d.
  static int64_t rows_bytes(DType dt, int64_t d, int64_t len) {
    return ceil_div(len, kBlock) * d * static_cast<int64_t>(element_size(dt));
  }
  void load(TileBuilder& b, DependencyTracker& deps, int32_t rows_tile, int32_t src, int64_t d,
            int64_t row0, int64_t len) const {
    for (int64_t j = 0; j * kBlock < len; ++j) {
      const int64_t r = std::min(kBlock, len - j * kBlock);
      deps.track(b.dma_copy(sb(rows_tile, dt, r, j * d, d),
                            hbm_rows(src, dt, d, row0 + j * kBlock, static_cast<int32_t>(r), 0, d)),
                 /*partial_write=*/true);
    }
  }
  void transpose(TileBuilder& b, DependencyTracker& deps, int32_t rows_tile, int64_t d, int64_t len,
                 int32_t dst) const {
    for (int64_t c0 = 0; c0 < len; c0 += kChunk) {
      const int64_t w = std::min(kChunk, len - c0);
      for (int64_t x = 0; x < w; x += kBlock) {
        const int64_t r = std::min(kBlock, w - x);
        deps.track(b.matmul(ps(bank, d, x, r), sb(rows_tile, dt, r, (c0 + x) / kBlock * d, d),
                            sb(ident, dt, r, 0, r), false));
      }
      deps.track(b.tensor_copy(Engine::scalar, sb(dst, dt, d, c0, w), ps(bank, d, 0, w)),
                 /*partial_write=*/true);
    }
  }
};

} // namespace mstep::neuron::attention_tiles
