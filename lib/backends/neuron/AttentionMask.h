// attn_mask on chip for the attention forward and backward programs
// (AttentionShape::mask): the mask tile of each [Q tile, key chunk] DMA'd
// from HBM by its broadcast strides, applied to the scaled scores in SBUF,
// and each row's "some key kept" flag. Library-internal.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "lib/backends/neuron/AttentionTiles.h"
#include "lib/backends/neuron/AttentionValidLength.h"

namespace mstep::neuron::attention_tiles {

/// Per chunk, in up to `slots` rotating mask tiles [128, cols] (loaded
/// ahead of their chunk, so the DMA overlaps the chunks before):
///   boolean: scores = select(mask, scores, -1e30) (Vector; a select, so a
///         NaN or inf score of an excluded key does not survive);
///   additive: the mask clamped in place to >= -1e30 (GpSimd), then added
///         to the scores (Vector). -1e30, not -inf: a chunk whose every
///         key is excluded must not give exp(-inf - -inf) = NaN in the
///         online softmax (a later chunk's alpha = 0 washes it out).
/// The programs take the scores through SBUF (scaled by the Scalar engine)
/// whenever a mask is on: the mask is in scaled units.
/// Row flag (GpSimd, before the clamp): the max over the chunk's keys of
/// "kept" (boolean: the mask; additive: mask >= the lowest float, so only
/// -inf excludes, as in ref, where a huge finite negative such as
/// finfo.min still counts), plus valid_seq_len's key bias (0 or -1e30)
/// when the keys need one, clamped to >= 0. The
/// programs take its max over the chunks and multiply it into 1 / l, so a
/// row with no key kept gives zeros (ref).
class AttentionMask {
public:
  static absl::Status tileable(const AttentionShape& s) {
    using M = AttentionShape::Mask;
    if (s.mask == M::none) return absl::OkStatus();
    if (s.mask == M::boolean ? s.mask_dtype != DType::boolean : s.mask_dtype != s.dtype)
      return absl::UnimplementedError(
          absl::StrCat("attn_mask of ", dtype_name(s.mask_dtype), " (bool or q's dtype only)"));
    if (static_cast<int64_t>(s.mask_head_offset.size()) != s.batch || s.mask_row_stride < 0 ||
        s.mask_col_stride < 0 || s.mask_elements < 1)
      return absl::InvalidArgumentError("attn_mask: a broadcast layout that is not [batch-heads]");
    return absl::OkStatus();
  }

  AttentionMask(TileBuilder& b, DependencyTracker& deps, const AttentionShape& s, int slots,
                int64_t cols)
      : s_(s) {
    if (s.mask == AttentionShape::Mask::none) return;
    hbm_ = b.hbm_tensor("mask", s.mask_dtype, s.mask_elements);
    const int64_t es = static_cast<int64_t>(element_size(s.mask_dtype));
    for (int g = 0; g < slots; ++g)
      tiles_.push_back(b.allocate(BufferKind::sbuf, cols * es, absl::StrCat("mask", g)));
    kept_ = b.allocate(BufferKind::sbuf, cols * 2, "mask_kept");
    if (s.mask != AttentionShape::Mask::boolean) return;
    excluded_ = b.allocate(BufferKind::sbuf, 4, "excluded_score");
    deps.track(b.iota(column(excluded_, kPartitions), AffineExpr{0, 0, {0}}));
    deps.track(b.tensor_scalar(Engine::gpsimd, column(excluded_, kPartitions),
                               column(excluded_, kPartitions), AluOp::add, kExcluded));
  }

  bool on() const { return hbm_ >= 0; }

  /// Loads the mask of rows [q0, q0 + rows) and keys [k0, k0 + w) of
  /// batch-head h into `slot`.
  void load(TileBuilder& b, DependencyTracker& deps, int slot, int64_t h, int64_t q0, int64_t rows,
            int64_t k0, int64_t w) const {
    AccessPattern from =
        tile_pattern(BufferKind::hbm, hbm_, s_.mask_dtype, 0, static_cast<int32_t>(rows),
                     s_.mask_head_offset[h] + q0 * s_.mask_row_stride + k0 * s_.mask_col_stride,
                     {{w, s_.mask_col_stride}});
    from.partition_stride = s_.mask_row_stride;
    deps.track(b.dma_copy(tile(slot, rows, w), from));
  }

  /// GpSimd work on the tile in `slot` (keys [k0, k0 + w)): with `kept`,
  /// the rows' flag [rows, 1] fp32 (1 where a key is kept; `key_bias` the
  /// batch-head's valid_seq_len key bias when the keys need one); an
  /// additive mask then clamped to >= -1e30.
  void prepare(TileBuilder& b, DependencyTracker& deps, int slot, int64_t rows, int64_t w,
               std::optional<AccessPattern> kept,
               std::optional<AccessPattern> key_bias = std::nullopt) const {
    const bool additive = s_.mask == AttentionShape::Mask::additive;
    const AccessPattern m = tile(slot, rows, w);
    if (kept) {
      const AccessPattern k = sb(kept_, DType::bf16, rows, 0, w);
      AccessPattern src = m;
      if (additive) {
        deps.track(b.tensor_scalar(Engine::gpsimd, k, m, AluOp::is_ge,
                                   std::numeric_limits<float>::lowest()));
        src = k;
      }
      if (key_bias) { // 1 + 0 kept, 1 - 1e30 padded
        deps.track(b.tensor_tensor(Engine::gpsimd, k, src, *key_bias, AluOp::add));
        src = k;
      }
      deps.track(b.tensor_reduce(Engine::gpsimd, *kept, src, AluOp::max));
      if (key_bias) deps.track(b.tensor_scalar(Engine::gpsimd, *kept, *kept, AluOp::max, 0.0f));
    }
    if (additive) deps.track(b.tensor_scalar(Engine::gpsimd, m, m, AluOp::max, kExcluded));
  }

  /// Applies the tile in `slot` (prepared) to `scores`, [rows, w] fp32
  /// scaled scores in SBUF (Vector).
  void apply(TileBuilder& b, DependencyTracker& deps, const AccessPattern& scores, int slot,
             int64_t rows, int64_t w) const {
    if (s_.mask == AttentionShape::Mask::boolean)
      deps.track(b.select(scores, tile(slot, rows, w), scores, broadcast(excluded_, rows, w)));
    else
      deps.track(b.tensor_tensor(Engine::vector, scores, scores, tile(slot, rows, w), AluOp::add));
  }

  /// SBUF bytes per partition the mask needs with `slots` tiles of `cols`.
  static int64_t bytes(const AttentionShape& s, int slots, int64_t cols) {
    if (s.mask == AttentionShape::Mask::none) return 0;
    return cols * (slots * static_cast<int64_t>(element_size(s.mask_dtype)) + 2) + 4;
  }

private:
  static constexpr float kExcluded = -1e30f;
  AccessPattern tile(int slot, int64_t rows, int64_t w) const {
    return sb(tiles_[slot], s_.mask_dtype, rows, 0, w);
  }
  const AttentionShape& s_;
  int32_t hbm_ = -1, kept_ = -1, excluded_ = -1;
  std::vector<int32_t> tiles_;
};

} // namespace mstep::neuron::attention_tiles
