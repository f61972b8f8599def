// The flash `sdpa` forward kernel and the attention kernel factory.
//
// Work items are (batch-head, block of kBlockRows query rows), spread over
// the cores with a dynamic OpenMP schedule (causal blocks differ in cost).
// Per item (FlashQueryBlock.h does the tiles):
//   1. Rows outside valid_seq_len produce zeros; the rest attend only to
//      keys [key_lo, key_hi), clipped at the block's last row when causal,
//      so padded and above-diagonal key tiles are never computed.
//   2. One online-softmax pass over the key tiles gives out = acc / l.
//   3. A node that returns [L, S] probabilities (attn_probs, or saved
//      probs for the backward) needs them normalized, so a second pass
//      recomputes the scores with the final row max and sum and writes
//      them. `out` still comes from step 2, so it is bit for bit the out
//      of the same node without those results.
// A returned dropout mask is drawn first for all [L, S] positions (the ref
// kernel's mask covers excluded ones too) and then read instead of
// redrawing.
#include "lib/backends/cpu/FlashAttention.h"

#include <omp.h>

#include <algorithm>

#include "lib/backends/cpu/FlashAttentionParams.h"
#include "lib/backends/cpu/FlashQueryBlock.h"

namespace mstep::cpu {

namespace flash {

namespace {

template <typename T>
class FlashSdpaKernel final : public FlashAttentionKernel {
 public:
  explicit FlashSdpaKernel(AttentionParams params)
      : P_(std::move(params)),
        scratch_(std::max(1, omp_get_max_threads()), QueryTiles::carve(nullptr, nullptr, P_), 0),
        blocks_per_head_((P_.L + kBlockRows - 1) / kBlockRows),
        two_pass_(P_.probs >= 0 || P_.saved_probs_out >= 0) {}

  absl::string_view name() const override { return "flash.sdpa"; }
  size_t scratch_bytes() const override { return scratch_.bytes(); }

  void run(const void* const* operands, void* const* results) override {
    AttentionInputs<T> in;
    in.q = static_cast<const T*>(operands[P_.q]);
    in.k = static_cast<const T*>(operands[P_.k]);
    in.v = static_cast<const T*>(operands[P_.v]);
    if (P_.mask >= 0) in.mask = operands[P_.mask];
    if (P_.dropout) in.dropout = read_dropout(P_, operands[P_.rng_state]);
    const void* valid_len = P_.valid_len >= 0 ? operands[P_.valid_len] : nullptr;
    Outputs out;
    out.out = static_cast<T*>(results[0]);
    if (P_.probs >= 0) out.probs = static_cast<T*>(results[P_.probs]);
    if (P_.saved_probs_out >= 0) out.saved = static_cast<T*>(results[P_.saved_probs_out]);
    if (P_.dropout_mask >= 0) {
      bool* mask = static_cast<bool*>(results[P_.dropout_mask]);
      draw_dropout_mask(in.dropout, mask);
      in.keep_mask = mask;
    }
    const int64_t items = P_.batch * blocks_per_head_;
#pragma omp parallel for schedule(dynamic, 1) num_threads(scratch_.team_size())
    for (int64_t item = 0; item < items; ++item) {
      QueryTiles tiles;
      QueryTiles::carve(&tiles, scratch_.thread(omp_get_thread_num()), P_);
      attend_block(in, valid_len, item / blocks_per_head_, item % blocks_per_head_, tiles, out);
    }
  }

 private:
  struct Outputs {
    T* out = nullptr;
    T* probs = nullptr;  // after dropout
    T* saved = nullptr;  // before dropout
  };

  /// The keep mask of every [..., L, S] position (true everywhere
  /// without dropout), as the ref kernel returns it.
  void draw_dropout_mask(const DropoutDraw& draw, bool* mask) {
    const int64_t rows = P_.batch * P_.L;
#pragma omp parallel for schedule(static) num_threads(scratch_.team_size())
    for (int64_t row = 0; row < rows; ++row) {
      bool* out = mask + row * P_.S;
      if (!P_.dropout) {
        std::fill(out, out + P_.S, true);
        continue;
      }
      QueryTiles tiles;
      QueryTiles::carve(&tiles, scratch_.thread(omp_get_thread_num()), P_);
      for (int64_t j0 = 0; j0 < P_.S; j0 += kBlockKeys) {
        const int64_t nc = std::min(kBlockKeys, P_.S - j0);
        // A kept key draws keep_scale > 0 unless p = 1, which keeps none.
        dropout_factors(draw, static_cast<uint64_t>(row * P_.S + j0), nc, tiles.factors);
        for (int64_t c = 0; c < nc; ++c) out[j0 + c] = tiles.factors[c] != 0.0f;
      }
    }
  }

  void zero_rows(T* data, int64_t b, int64_t first, int64_t last, int64_t width) const {
    if (data && first < last)
      std::fill(data + (b * P_.L + first) * width, data + (b * P_.L + last) * width,
                from_f32<T>(0));
  }

  void attend_block(const AttentionInputs<T>& in, const void* valid_len, int64_t b, int64_t block,
                    QueryTiles& tiles, const Outputs& out) const {
    const ValidRanges valid = valid_ranges(P_, valid_len, b);
    const int64_t i0 = block * kBlockRows, i1 = std::min(P_.L, i0 + kBlockRows);
    const int64_t first = std::max(i0, valid.row_lo), last = std::min(i1, valid.row_hi);
    // Step 1: padded rows are zero; probabilities are zero where not computed.
    zero_rows(out.probs, b, i0, i1, P_.S);
    zero_rows(out.saved, b, i0, i1, P_.S);
    if (first >= last) {
      zero_rows(out.out, b, i0, i1, P_.Ev);
      return;
    }
    zero_rows(out.out, b, i0, first, P_.Ev);
    zero_rows(out.out, b, last, i1, P_.Ev);
    const int64_t key_begin = valid.key_lo;
    const int64_t key_end = P_.causal ? std::min(valid.key_hi, last) : valid.key_hi;

    // Step 2.
    QueryBlock<T> rows(P_, in, tiles);
    rows.begin(b, first, last - first);
    for (int64_t j0 = key_begin; j0 < key_end; j0 += kBlockKeys) {
      const int64_t nc = std::min(kBlockKeys, key_end - j0);
      rows.scores(j0, nc);
      rows.accumulate(j0, nc, /*apply_dropout=*/true);
    }
    rows.finish_normalizer();  // tiles.alpha = 1 / l
    // Step 3.
    if (two_pass_) {
      for (int64_t j0 = key_begin; j0 < key_end; j0 += kBlockKeys) {
        const int64_t nc = std::min(kBlockKeys, key_end - j0);
        rows.normalized_probabilities(j0, nc);
        if (out.saved) rows.write_probabilities(out.saved, j0, nc);
        if (!out.probs) continue;
        rows.apply_dropout_factors(j0, nc);
        rows.write_probabilities(out.probs, j0, nc);
      }
    }
    for (int64_t r = 0; r < last - first; ++r) {
      const float norm = tiles.alpha[r];
      const float* acc = tiles.acc + r * P_.Ev;
      T* dst = out.out + (b * P_.L + first + r) * P_.Ev;
      for (int64_t e = 0; e < P_.Ev; ++e) dst[e] = from_f32<T>(acc[e] * norm);
    }
  }

  const AttentionParams P_;
  ThreadScratch scratch_;
  const int64_t blocks_per_head_;
  const bool two_pass_;
};

}  // namespace

std::unique_ptr<CpuKernel> make_flash_sdpa_kernel(AttentionParams params) {
  if (params.dtype == DType::bf16)
    return std::make_unique<FlashSdpaKernel<BFloat16>>(std::move(params));
  return std::make_unique<FlashSdpaKernel<float>>(std::move(params));
}

}  // namespace flash

absl::StatusOr<std::unique_ptr<CpuKernel>> make_flash_attention_kernel(
    const KernelRequest& request) {
  const OpKind op = request.node().op;
  if (op != OpKind::sdpa && op != OpKind::sdpa_grad) return nullptr;
  absl::StatusOr<flash::AttentionParams> params = flash::read_attention_params(request);
  if (!params.ok()) return params.status();
  if (params->dtype != DType::f32 && params->dtype != DType::bf16) return nullptr;
  if (params->backward) {
    // bf16 mask gradients would need an f32 accumulator the size of the
    // mask; the ref kernel handles that rare case.
    if (params->dmask >= 0 && params->dtype != DType::f32) return nullptr;
    return flash::make_flash_sdpa_grad_kernel(*std::move(params));
  }
  return flash::make_flash_sdpa_kernel(*std::move(params));
}

}  // namespace mstep::cpu
