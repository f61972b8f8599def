// The attention programs' dropout draws (AttentionDropout.h).
#include "lib/backends/neuron/AttentionDropout.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/neuron/AttentionTiles.h"
#include "lib/backends/neuron/DropoutLowering.h"

namespace mstep::neuron {

using namespace attention_tiles;

absl::Status AttentionDropout::tileable(const AttentionShape& s) {
  if (!s.dropout) return absl::OkStatus();
  if (!(s.dropout_p > 0 && s.dropout_p < 1))
    return absl::UnimplementedError(absl::StrCat("dropout_p = ", s.dropout_p, " is not in (0, 1)"));
  if (s.dropout_offset < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("dropout with a negative node offset ", s.dropout_offset));
  return absl::OkStatus();
}

AttentionDropout::AttentionDropout(TileBuilder& b, DependencyTracker& deps,
                                   const AttentionShape& s)
    : s_(s) {
  if (!s.dropout) return;
  // The int64 [2] state's bytes as int32 [4]: seed lo, hi; offset lo, hi.
  const int32_t hbm = b.hbm_tensor("rng_state", DType::i32, 4);
  state_ = b.allocate(BufferKind::sbuf, 4 * 4, "rng_state");
  deps.track(b.dma_copy(at(BufferKind::sbuf, state_, DType::i32, kPartitions, 0, {{4, 1}}),
                        hbm_rows(hbm, DType::i32, /*row_length=*/0, 0, kPartitions, 0, 4)));
}

void AttentionDropout::draw(TileBuilder& b, DependencyTracker& deps, const AccessPattern& dst,
                            int64_t h, int64_t q0, int64_t k0) const {
  AffineExpr counter; // the element's index in the [..., L, S] probabilities, plus the node's offset
  counter.offset = s_.dropout_offset + (h * s_.q_len + q0) * s_.kv_len + k0;
  counter.channel_multiplier = s_.kv_len;
  counter.steps = {1};
  deps.track(b.philox_uniform(
      dst, at(BufferKind::sbuf, state_, DType::i32, dst.partitions, 0, {{4, 1}}), counter));
}

void AttentionDropout::to_factor(TileBuilder& b, DependencyTracker& deps,
                                 const AccessPattern& u) const {
  const int64_t i = b.tensor_scalar(Engine::vector, u, u, AluOp::is_ge,
                                    dropout_keep_threshold(s_.dropout_p));
  b.at(i).alu2 = AluOp::multiply;
  b.at(i).scalar2 = static_cast<float>(1.0 / (1.0 - s_.dropout_p));
  deps.track(i);
}

void AttentionDropout::apply(TileBuilder& b, DependencyTracker& deps, const AccessPattern& x,
                             const AccessPattern& factor) const {
  deps.track(b.tensor_tensor(Engine::vector, x, x, factor, AluOp::multiply));
}

} // namespace mstep::neuron
