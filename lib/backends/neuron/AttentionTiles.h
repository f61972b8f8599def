// The tiles and access patterns that the attention forward
// (AttentionProgram.cpp) and backward (AttentionBackwardProgram.cpp)
// programs share: tile sizes, SBUF/PSUM views, the on-chip identity, the
// causal mask tile and the valid_seq_len masking. Library-internal.
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

/// valid_seq_len on chip (AttentionShape::lengths). The lengths come from
/// the HBM tensor "valid_len", loaded once onto every partition (a DMA
/// with partition stride 0) and turned into fp32 by the Vector engine
/// (int64: high x 2^32 + the low word as unsigned, exact below 2^24 and of
/// the right sign beyond, which is all the compares below need). Then,
/// with thresholds made once by iota (t = j + 1 right, S - j left, for
/// key j; likewise for query rows), "len >= t" is the keep predicate:
///   keys: (not needed with right padding and causal: a kept row i sees
///         only keys j <= i < len) per batch-head a bias row [1, S] in bf16, 0 where
///         the key is kept and -1e30 (finite: exp gives 0, and no 0 x inf)
///         where it is padding, added to each score chunk in PSUM by a
///         K = 1 matmul (ones [1, rows] x bias [1, w]), so max and exp need
///         no mask;
///   rows: row_keep, 1 where the row is valid and keeps a key (causal and
///         left padding with S > L can leave a valid row none: row i
///         keeps one iff len >= max(L, S) - i), else 0; the programs
///         multiply it into 1 / l, so such rows give zeros (no gradient).
/// The compares are Vector tensor_tensor is_ge against the length as a
/// per-partition scalar (a [P, 1] column, free stride 0).
class ValidLength {
public:
  /// OK, or why the lengths cannot be applied on chip.
  static absl::Status tileable(const AttentionShape& s) {
    if (s.lengths < 1 || s.batch % s.lengths != 0)
      return absl::UnimplementedError(absl::StrCat(s.lengths, " valid_seq_len lengths for ",
                                                   s.batch, " batch-heads (not a divisor)"));
    // The key bias is added to the raw scores in PSUM, scaled afterwards.
    if (masks_keys(s) && !(s.scale > 0))
      return absl::UnimplementedError(
          absl::StrCat("valid_seq_len with scale ", s.scale, " (the key bias needs scale > 0)"));
    return absl::OkStatus();
  }

  ValidLength(TileBuilder& b, DependencyTracker& deps, const AttentionShape& s) : s_(s) {
    if (s.lengths == 0) return;
    const int64_t n = s.lengths, words = s.lengths_i64 ? 2 : 1;
    per_length_ = s.batch / n;
    const int32_t hbm = b.hbm_tensor("valid_len", DType::i32, n * words);
    const int32_t raw = b.allocate(BufferKind::sbuf, n * words * 4, "valid_len_words");
    AccessPattern from =
        tile_pattern(BufferKind::hbm, hbm, DType::i32, 0, kPartitions, 0, {{n * words, 1}});
    from.partition_stride = 0; // every partition reads the same lengths
    deps.track(
        b.dma_copy(at(BufferKind::sbuf, raw, DType::i32, kPartitions, 0, {{n * words, 1}}), from));
    len_ = b.allocate(BufferKind::sbuf, n * 4, "valid_len");
    const AccessPattern len = sb(len_, DType::f32, kPartitions, 0, n);
    auto word = [&](int64_t w) {
      return at(BufferKind::sbuf, raw, DType::i32, kPartitions, w, {{n, words}});
    };
    deps.track(b.tensor_copy(Engine::vector, len, word(0)));
    if (s.lengths_i64) {
      // low (as signed) + (low >= 0 ? -2^32 : 0) + (high + 1) 2^32
      const int32_t tmp = b.allocate(BufferKind::sbuf, 2 * n * 4, "valid_len_parts");
      const AccessPattern hi = sb(tmp, DType::f32, kPartitions, 0, n),
                          lo = sb(tmp, DType::f32, kPartitions, n, n);
      constexpr float k2p32 = 4294967296.0f;
      deps.track(b.tensor_copy(Engine::vector, hi, word(1)));
      int64_t i = b.tensor_scalar(Engine::vector, hi, hi, AluOp::add, 1.0f);
      b.at(i).alu2 = AluOp::multiply;
      b.at(i).scalar2 = k2p32;
      deps.track(i);
      i = b.tensor_scalar(Engine::vector, lo, len, AluOp::is_ge, 0.0f);
      b.at(i).alu2 = AluOp::multiply;
      b.at(i).scalar2 = -k2p32;
      deps.track(i);
      deps.track(b.tensor_tensor(Engine::vector, hi, hi, lo, AluOp::add));
      deps.track(b.tensor_tensor(Engine::vector, len, len, hi, AluOp::add));
    }
    const int64_t S = s.kv_len, tiles = ceil_div(s.q_len, kBlock);
    const bool left = s.left_padding;
    const int64_t top = s.causal ? std::max(s.q_len, S) : s.q_len;
    row_thr_ = b.allocate(BufferKind::sbuf, tiles * 4, "row_threshold");
    deps.track(b.iota(sb(row_thr_, DType::f32, kPartitions, 0, tiles),
                      left ? AffineExpr{top, -1, {-kBlock}} : AffineExpr{1, 1, {kBlock}}));
    if (!masks_keys()) return;
    key_thr_ = b.allocate(BufferKind::sbuf, S * 4, "key_threshold");
    deps.track(b.iota(sb(key_thr_, DType::f32, 1, 0, S),
                      left ? AffineExpr{S, 0, {-1}} : AffineExpr{1, 0, {1}}));
    ones_ = b.allocate(BufferKind::sbuf, kBlock * 2, "ones_row");
    deps.track(b.iota(sb(ones_, kBiasType, 1, 0, kBlock), AffineExpr{1, 0, {0}}));
  }

  bool on() const { return s_.lengths > 0; }
  /// Whether keys need the bias: not with right padding and causal, where
  /// a kept row i (i < len) sees only keys j <= i < len, all kept.
  static bool masks_keys(const AttentionShape& s) {
    return s.lengths > 0 && (s.left_padding || !s.causal);
  }
  bool masks_keys() const { return masks_keys(s_); }

  /// A key-bias row [1, S] for one resident batch-head slot (-1 when the
  /// keys need none).
  int32_t allocate_bias(TileBuilder& b, int slot) const {
    if (!masks_keys()) return -1;
    return b.allocate(BufferKind::sbuf, s_.kv_len * 2, absl::StrCat("key_bias", slot));
  }
  /// Fills `bias` with batch-head h's key bias: 0 kept, -1e30 padding.
  void make_bias(TileBuilder& b, DependencyTracker& deps, int32_t bias, int64_t h) const {
    const AccessPattern row = sb(bias, kBiasType, 1, 0, s_.kv_len);
    deps.track(b.tensor_tensor(Engine::vector, row, broadcast(len_, 1, s_.kv_len, h / per_length_),
                               sb(key_thr_, DType::f32, 1, 0, s_.kv_len), AluOp::is_ge));
    const int64_t i = b.tensor_scalar(Engine::vector, row, row, AluOp::subtract, 1.0f);
    b.at(i).alu2 = AluOp::multiply;
    b.at(i).scalar2 = 1e30f;
    deps.track(i);
  }
  /// Adds keys [k0, k0 + w) of `bias` to the [rows, w] scores at column
  /// `col` of PSUM `bank` (accumulating onto the QK^T matmul).
  void add_bias(TileBuilder& b, DependencyTracker& deps, int32_t bank, int64_t col, int64_t rows,
                int32_t bias, int64_t k0, int64_t w) const {
    deps.track(b.matmul(ps(bank, rows, col, w), sb(ones_, kBiasType, 1, 0, rows),
                        sb(bias, kBiasType, 1, k0, w), true));
  }
  /// dst [rows, 1] fp32 = 1 where row (Q tile t, partition p) of batch-head
  /// h is valid and keeps a key, else 0.
  void row_keep(TileBuilder& b, DependencyTracker& deps, const AccessPattern& dst, int64_t h,
                int64_t t, int64_t rows) const {
    deps.track(b.tensor_tensor(Engine::vector, dst, column(len_, rows, h / per_length_),
                               column(row_thr_, rows, t), AluOp::is_ge));
  }

private:
  /// 0, 1 and -1e30 (to 3 digits) are bf16 values: the bias matmul runs at
  /// the bf16 rate whatever the scores' dtype (PSUM adds in fp32).
  static constexpr DType kBiasType = DType::bf16;
  const AttentionShape& s_;
  int64_t per_length_ = 1;
  int32_t len_ = -1, key_thr_ = -1, row_thr_ = -1, ones_ = -1;
};

} // namespace mstep::neuron::attention_tiles
