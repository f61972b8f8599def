// Scaled dot-product attention with the options of Gaudi's FusedSDPA.
#pragma once

#include <optional>

#include "mstep/api/Tensor.h"

namespace mstep {

enum class PaddingSide : uint8_t { left, right };

struct SdpaOptions {
  /// Bool (true = attend) or floating (added to the scores), broadcastable
  /// to [..., L, S].
  Tensor attn_mask;
  double dropout_p = 0.0;
  bool is_causal = false;
  /// Defaults to 1 / sqrt(head_dim).
  std::optional<double> scale;
  /// Integer [B]: the valid length of each batch row. Keys beyond it are
  /// ignored and query rows beyond it produce zeros.
  Tensor valid_seq_len;
  /// Where the padding sits: `right` keeps positions [0, len), `left`
  /// keeps [S - len, S).
  PaddingSide padding_side = PaddingSide::right;
  bool return_attn_probs = false;
  bool return_dropout_mask = false;
  /// FusedSDPA's recompute_mode. true: the backward recomputes the
  /// probabilities from q and k, so the forward saves nothing [..., L, S].
  /// false: the forward also keeps the pre-dropout probabilities (q's dtype)
  /// and the backward reads them instead, trading memory for compute. Only
  /// a call that records a backward saves them; otherwise the two modes
  /// record the same node.
  bool recompute = true;
};

struct SdpaResult {
  Tensor out;           // [..., L, Ev]
  Tensor attn_probs;    // [..., L, S], when requested (after dropout)
  Tensor dropout_mask;  // bool [..., L, S], when requested
};

/// q [..., L, E], k [..., S, E], v [..., S, Ev] -> [..., L, Ev].
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k,
                                    const Tensor& v,
                                    const SdpaOptions& options = {});
/// The same, also returning probabilities and dropout mask when asked
/// (result order out, probabilities, mask, as FusedSDPA).
SdpaResult fused_sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                      const SdpaOptions& options = {});

}  // namespace mstep
