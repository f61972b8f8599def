// valid_seq_len on chip for the attention forward and backward programs
// (AttentionShape::lengths): the lengths read from HBM, the keep
// predicates, the padded keys zeroed in the resident operands, the key
// bias and the row keep. Library-internal.
#pragma once

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "lib/backends/neuron/AttentionTiles.h"

namespace mstep::neuron::attention_tiles {

/// The lengths come from the HBM tensor "valid_len", loaded once onto every
/// partition (a DMA with partition stride 0) and turned into fp32 by the
/// Vector engine (int64: high x 2^32 + the low word as unsigned, exact
/// below 2^24 and of the right sign beyond, which is all the compares below
/// need). With thresholds made once by iota (t = j + 1 right, S - j left,
/// for key j; likewise for query rows), "len >= t" is the keep predicate:
///   padded keys (and query rows): zeroed in k and v (q and dO) by rows
///         (the programs' transposes then carry the zeros into k^T, v^T,
///         q^T and dO^T) by a Vector select per batch-head and operand,
///         before any matmul, transposes included, reads them:
///         their probability is exactly 0, but 0 x NaN is NaN, so a NaN or
///         inf stored there would otherwise reach the output (ref skips
///         those positions), and a NaN in a row reaches every key (or
///         row) of its transpose (the identity matmul: 0 x NaN). The
///         select, not a multiply by 0/1, keeps NaN out. Its predicates
///         ([128, S] by column for the bias, [128, blocks] by key row,
///         [128, tiles] by query row, bf16 0/1) are made by GpSimd once
///         per length.
///   key bias: (not needed with right padding and causal: a kept row i
///         sees only keys j <= i < len) per batch-head a [128, S] bf16
///         tile made from the column predicate, 0 where the key is kept
///         and -1e30 (finite: exp gives 0, and no 0 x inf) where it is
///         padding. With a positive scale its first partition is added
///         to each raw score chunk in PSUM by a K = 1 matmul (ones [1, rows]
///         x bias [1, w]), so max and exp need no mask; otherwise (the
///         scores are scaled into SBUF first) by a Vector add onto the
///         scaled scores, and the backward's recomputed P takes a select.
///   rows: row_keep, 1 where the row is valid and keeps a key (causal and
///         left padding with S > L can leave a valid row none: row i
///         keeps one iff len >= max(L, S) - i), else 0; the programs
///         multiply it into 1 / l, so such rows give zeros (no gradient).
/// The compares are tensor_tensor is_ge against the length as a
/// per-partition scalar (a [P, 1] column, free stride 0).
class ValidLength {
public:
  /// OK, or why the lengths cannot be applied on chip.
  static absl::Status tileable(const AttentionShape& s) {
    if (s.lengths < 1 || s.batch % s.lengths != 0)
      return absl::UnimplementedError(absl::StrCat(s.lengths, " valid_seq_len lengths for ",
                                                   s.batch, " batch-heads (not a divisor)"));
    if (fixed_bytes(s) > kSbufBytesPerPartition / 4)
      return absl::UnimplementedError(
          absl::StrCat("valid_seq_len's thresholds and predicates need ", fixed_bytes(s),
                       " SBUF bytes per partition for S = ", s.kv_len, ", over ",
                       kSbufBytesPerPartition / 4));
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
    const int64_t S = s.kv_len, tiles = ceil_div(s.q_len, kBlock), blocks = ceil_div(S, kBlock);
    const bool left = s.left_padding;
    const int64_t top = s.causal ? std::max(s.q_len, S) : s.q_len;
    row_thr_ = b.allocate(BufferKind::sbuf, tiles * 4, "row_threshold");
    deps.track(b.iota(sb(row_thr_, DType::f32, kPartitions, 0, tiles),
                      left ? AffineExpr{top, -1, {-kBlock}} : AffineExpr{1, 1, {kBlock}}));
    // Key j's threshold in column j, and key kb x 128 + p's at (p, kb).
    key_thr_ = b.allocate(BufferKind::sbuf, S * 4, "key_threshold");
    deps.track(b.iota(sb(key_thr_, DType::f32, kPartitions, 0, S),
                      left ? AffineExpr{S, 0, {-1}} : AffineExpr{1, 0, {1}}));
    key_row_thr_ = b.allocate(BufferKind::sbuf, blocks * 4, "key_row_threshold");
    deps.track(b.iota(sb(key_row_thr_, DType::f32, kPartitions, 0, blocks),
                      left ? AffineExpr{S, -1, {-kBlock}} : AffineExpr{1, 1, {kBlock}}));
    keep_cols_ = b.allocate(BufferKind::sbuf, S * 2, "key_keep");
    keep_rows_ = b.allocate(BufferKind::sbuf, blocks * 2, "key_keep_rows");
    keep_queries_ = b.allocate(BufferKind::sbuf, tiles * 2, "row_keep_rows");
    zero_ = b.allocate(BufferKind::sbuf, 4, "zero");
    deps.track(b.iota(column(zero_, kPartitions), AffineExpr{0, 0, {0}}));
    if (!masks_keys() || !(s.scale > 0)) return;
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
  /// Whether the key bias goes onto the raw scores in PSUM (add_bias),
  /// else onto the scaled scores in SBUF (add_scaled_bias).
  bool bias_in_psum() const { return masks_keys() && s_.scale > 0; }

  /// A key-bias tile [128, S] for one resident batch-head slot (-1 when
  /// the keys need none).
  int32_t allocate_bias(TileBuilder& b, int slot) const {
    if (!masks_keys()) return -1;
    return b.allocate(BufferKind::sbuf, s_.kv_len * 2, absl::StrCat("key_bias", slot));
  }

  /// Batch-head h's key masks, when its operands are loaded: its length's
  /// keep predicates (once per length when heads come in increasing order,
  /// else again when the length changes) and,
  /// when the keys need it, its key bias into `bias` (allocate_bias).
  void prepare_head(TileBuilder& b, DependencyTracker& deps, int64_t h, int32_t bias) {
    const int64_t S = s_.kv_len, blocks = ceil_div(S, kBlock), li = h / per_length_;
    if (li != ready_length_) {
      ready_length_ = li;
      if (masks_keys()) // the columns only make the bias
        deps.track(b.tensor_tensor(Engine::gpsimd, sb(keep_cols_, kKeepType, kPartitions, 0, S),
                                   broadcast(len_, kPartitions, S, li),
                                   sb(key_thr_, DType::f32, kPartitions, 0, S), AluOp::is_ge));
      deps.track(b.tensor_tensor(
          Engine::gpsimd, sb(keep_rows_, kKeepType, kPartitions, 0, blocks),
          broadcast(len_, kPartitions, blocks, li),
          sb(key_row_thr_, DType::f32, kPartitions, 0, blocks), AluOp::is_ge));
      const int64_t tiles = ceil_div(s_.q_len, kBlock);
      deps.track(b.tensor_tensor(Engine::gpsimd, sb(keep_queries_, kKeepType, kPartitions, 0, tiles),
                                 broadcast(len_, kPartitions, tiles, li),
                                 sb(row_thr_, DType::f32, kPartitions, 0, tiles), AluOp::is_ge));
    }
    if (!masks_keys()) return;
    const int64_t i = b.tensor_scalar(Engine::gpsimd, sb(bias, kBiasType, kPartitions, 0, S),
                                      sb(keep_cols_, kKeepType, kPartitions, 0, S),
                                      AluOp::subtract, 1.0f);
    b.at(i).alu2 = AluOp::multiply;
    b.at(i).scalar2 = 1e30f;
    deps.track(i);
  }
  /// Zeroes the padded keys of the head last prepared in `tile`, [128,
  /// blocks x width] with key kb x 128 + p at partition p, columns [kb x
  /// width, (kb + 1) x width) (v, k by rows).
  void zero_key_rows(TileBuilder& b, DependencyTracker& deps, int32_t tile, DType dt,
                     int64_t width) const {
    zero_rows(b, deps, tile, dt, width, keep_rows_, s_.kv_len);
  }
  /// Zeroes the query rows of the head last prepared that row_keep drops
  /// (padded, or left with no key) in `tile`, laid out as for
  /// zero_key_rows (q, dO by rows): a NaN there would reach the whole Q
  /// tile through its transpose.
  void zero_query_rows(TileBuilder& b, DependencyTracker& deps, int32_t tile, DType dt,
                       int64_t width) const {
    zero_rows(b, deps, tile, dt, width, keep_queries_, s_.q_len);
  }
  /// Adds keys [k0, k0 + w) of `bias` to the [rows, w] scores at column
  /// `col` of PSUM `bank` (accumulating onto the QK^T matmul).
  void add_bias(TileBuilder& b, DependencyTracker& deps, int32_t bank, int64_t col, int64_t rows,
                int32_t bias, int64_t k0, int64_t w) const {
    deps.track(b.matmul(ps(bank, rows, col, w), sb(ones_, kBiasType, 1, 0, rows),
                        sb(bias, kBiasType, 1, k0, w), true));
  }
  /// Adds keys [k0, k0 + w) of `bias` to `scores`, [rows, w] fp32 scaled
  /// scores in SBUF (a scale that is not positive).
  void add_scaled_bias(TileBuilder& b, DependencyTracker& deps, const AccessPattern& scores,
                       int64_t rows, int32_t bias, int64_t k0, int64_t w) const {
    deps.track(b.tensor_tensor(Engine::vector, scores, scores, sb(bias, kBiasType, rows, k0, w),
                               AluOp::add));
  }
  /// p = 0 for the padded keys among [k0, k0 + w) (a select: p may be inf
  /// there when the bias was not in the exponent).
  void drop_padded_keys(TileBuilder& b, DependencyTracker& deps, const AccessPattern& p,
                        int64_t rows, int32_t bias, int64_t k0, int64_t w) const {
    deps.track(b.select(p, sb(bias, kBiasType, rows, k0, w), broadcast(zero_, rows, w), p));
  }
  /// Keys [k0, k0 + w) of a batch-head's key bias ([rows, w] bf16, 0
  /// where the key is kept), for AttentionMask.
  AccessPattern bias_keys(int32_t bias, int64_t rows, int64_t k0, int64_t w) const {
    return sb(bias, kBiasType, rows, k0, w);
  }
  /// dst [rows, 1] fp32 = 1 where row (Q tile t, partition p) of batch-head
  /// h is valid and keeps a key, else 0.
  void row_keep(TileBuilder& b, DependencyTracker& deps, const AccessPattern& dst, int64_t h,
                int64_t t, int64_t rows) const {
    deps.track(b.tensor_tensor(Engine::vector, dst, column(len_, rows, h / per_length_),
                               column(row_thr_, rows, t), AluOp::is_ge));
  }

private:
  /// The thresholds and predicates, per partition.
  static int64_t fixed_bytes(const AttentionShape& s) {
    return 6 * (s.kv_len + ceil_div(s.kv_len, kBlock)) + 6 * ceil_div(s.q_len, kBlock) +
           16 * s.lengths + 4;
  }
  /// Zeroes the rows of `tile` ([128, blocks x width], row kb x 128 + p at
  /// partition p, columns [kb x width, (kb + 1) x width); `len` rows) whose
  /// `keep` ([128, blocks] 0/1) is 0; a partial last block by an
  /// instruction of its own (its other partitions were never written).
  void zero_rows(TileBuilder& b, DependencyTracker& deps, int32_t tile, DType dt, int64_t width,
                 int32_t keep, int64_t len) const {
    const int64_t full = len / kBlock, rest = len % kBlock;
    auto zero = [&](int64_t parts, int64_t kb, int64_t nb) {
      const AccessPattern x =
          at(BufferKind::sbuf, tile, dt, parts, kb * width, {{nb, width}, {width, 1}});
      deps.track(
          b.select(x, at(BufferKind::sbuf, keep, kKeepType, parts, kb, {{nb, 1}, {width, 0}}), x,
                   at(BufferKind::sbuf, zero_, DType::f32, parts, 0, {{nb, 0}, {width, 0}})));
    };
    if (full > 0) zero(kBlock, 0, full);
    if (rest > 0) zero(rest, full, 1);
  }
  /// 0, 1 and -1e30 (to 3 digits) are bf16 values: the bias matmul runs at
  /// the bf16 rate whatever the scores' dtype (PSUM adds in fp32).
  static constexpr DType kBiasType = DType::bf16, kKeepType = DType::bf16;
  const AttentionShape& s_;
  int64_t per_length_ = 1, ready_length_ = -1;
  int32_t len_ = -1, key_thr_ = -1, key_row_thr_ = -1, row_thr_ = -1, ones_ = -1;
  int32_t keep_cols_ = -1, keep_rows_ = -1, keep_queries_ = -1, zero_ = -1;
};

} // namespace mstep::neuron::attention_tiles
