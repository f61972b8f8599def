// neuron_attention_masking: what valid_seq_len's masking costs the
// attention tile programs on the simulated NeuronCore (cost model), forward
// and backward, at two shapes:
//   - gpt_train's default attention: 64 batch-heads (batch 16 x 4 heads)
//     of 64 x 64, head dim 16, f32, causal, right padding (its case);
//   - the bench's GPT-mini attention: 32 batch-heads (batch 8 x 4 heads)
//     of 256 x 256, head dim 64, bf16, causal.
// Per shape: no lengths, right padding and left padding (the key bias),
// their simulated time and the ratio to no lengths. Then attn_mask
// (AttentionMask.h) at the same shapes without causal (sdpa refuses
// is_causal with a mask): no mask, a bool padding mask [B, 1, 1, S] (every
// row and head reads the same keys' flags), a bool [L, S] mask and an
// additive (q's dtype) [B*H, L, S] one. Then dropout on the probabilities
// (AttentionDropout.h: one Philox draw per probability on GpSimd) at p =
// 0.1 against none, causal, with the GpSimd engine's busy time and the
// bottleneck. Prints tables; exits 0 (a bench, not a test).
#include <cstdio>
#include <cstdlib>

#include "lib/backends/neuron/AttentionProgram.h"
#include "lib/backends/neuron/CostModel.h"

using namespace mstep::neuron;
using mstep::DType;

namespace {

double model_us(const TileProgram& program) {
  absl::StatusOr<CostReport> r = estimate_cost(program);
  if (!r.ok()) {
    std::fprintf(stderr, "%s\n", std::string(r.status().message()).c_str());
    std::exit(2);
  }
  return r->total_ns / 1e3;
}

void row(const char* name, AttentionShape s, int64_t lengths) {
  AttentionShape right = s;
  right.lengths = lengths;
  right.lengths_i64 = true;
  AttentionShape left = right;
  left.left_padding = true;
  for (bool backward : {false, true}) {
    auto program = backward ? attention_backward_program : attention_forward_program;
    const double plain = model_us(program(s)), r = model_us(program(right)),
                 l = model_us(program(left));
    std::printf("%-34s %-8s %10.1f %10.1f (%+5.1f%%) %10.1f (%+5.1f%%)\n", name,
                backward ? "backward" : "forward", plain, r, 100 * (r / plain - 1), l,
                100 * (l / plain - 1));
  }
}

/// s with an attn_mask of `dt` broadcast as [heads_per_mask, rows ? L : 1,
/// S] over its batch-heads (heads_per_mask batch-heads share one mask).
AttentionShape masked(AttentionShape s, DType dt, int64_t heads_per_mask, bool rows) {
  s.mask = dt == DType::boolean ? AttentionShape::Mask::boolean : AttentionShape::Mask::additive;
  s.mask_dtype = dt;
  s.mask_col_stride = 1;
  s.mask_row_stride = rows ? s.kv_len : 0;
  const int64_t per = (rows ? s.q_len : 1) * s.kv_len;
  s.mask_elements = per * (s.batch / heads_per_mask);
  for (int64_t h = 0; h < s.batch; ++h) s.mask_head_offset.push_back(h / heads_per_mask * per);
  return s;
}

void mask_row(const char* name, AttentionShape s, int64_t heads) {
  s.causal = false;
  const AttentionShape padding = masked(s, DType::boolean, heads, false),
                       bool_ls = masked(s, DType::boolean, s.batch, true),
                       additive = masked(s, s.dtype, 1, true);
  for (bool backward : {false, true}) {
    auto program = backward ? attention_backward_program : attention_forward_program;
    const double plain = model_us(program(s)), p = model_us(program(padding)),
                 b = model_us(program(bool_ls)), a = model_us(program(additive));
    std::printf("%-34s %-8s %10.1f %10.1f (%+5.1f%%) %10.1f (%+5.1f%%) %10.1f (%+5.1f%%)\n", name,
                backward ? "backward" : "forward", plain, p, 100 * (p / plain - 1), b,
                100 * (b / plain - 1), a, 100 * (a / plain - 1));
  }
}

void dropout_row(const char* name, AttentionShape s) {
  AttentionShape d = s;
  d.dropout = true;
  d.dropout_p = 0.1;
  for (bool backward : {false, true}) {
    auto program = backward ? attention_backward_program : attention_forward_program;
    absl::StatusOr<CostReport> plain = estimate_cost(program(s)), drop = estimate_cost(program(d));
    if (!plain.ok() || !drop.ok()) std::exit(2);
    const double a = plain->total_ns / 1e3, b = drop->total_ns / 1e3;
    std::printf("%-34s %-8s %10.1f %10.1f (%+6.0f%%) %12.1f %12s\n", name,
                backward ? "backward" : "forward", a, b, 100 * (b / a - 1),
                drop->busy_ns[static_cast<int>(Engine::gpsimd)] / 1e3,
                drop->bottleneck().c_str());
  }
}

/// `batch` causal batch-heads of n x n, head dim e.
AttentionShape causal(int64_t batch, int64_t n, int64_t e, DType dt, float scale) {
  AttentionShape s;
  s.batch = batch;
  s.q_len = s.kv_len = n;
  s.head_dim = s.value_dim = e;
  s.dtype = dt;
  s.scale = scale;
  s.causal = true;
  return s;
}

} // namespace

int main() {
  std::printf("%-34s %-8s %10s %21s %21s\n", "attention (simulated us)", "", "no lengths",
              "right padding", "left padding");
  row("gpt_train 64 x 64^2, E 16, f32", causal(64, 64, 16, DType::f32, 0.25f), 16);
  row("GPT-mini 32 x 256^2, E 64, bf16", causal(32, 256, 64, DType::bf16, 0.125f), 8);
  row("GPT-mini 32 x 256^2, E 64, f32", causal(32, 256, 64, DType::f32, 0.125f), 8);
  std::printf("\n%-34s %-8s %10s %21s %21s %21s\n", "attn_mask, not causal (sim. us)", "",
              "no mask", "bool [B,1,1,S]", "bool [L,S]", "additive [B,H,L,S]");
  mask_row("gpt_train 64 x 64^2, E 16, f32", causal(64, 64, 16, DType::f32, 0.25f), 4);
  mask_row("GPT-mini 32 x 256^2, E 64, bf16", causal(32, 256, 64, DType::bf16, 0.125f), 4);
  mask_row("GPT-mini 32 x 256^2, E 64, f32", causal(32, 256, 64, DType::f32, 0.125f), 4);
  mask_row("8 x 1024^2, E 64, bf16", causal(8, 1024, 64, DType::bf16, 0.125f), 4);
  std::printf("\n%-34s %-8s %10s %21s %12s %12s\n", "dropout 0.1, causal (sim. us)", "",
              "no dropout", "dropout", "GpSimd busy", "bottleneck");
  dropout_row("gpt_train 64 x 64^2, E 16, f32", causal(64, 64, 16, DType::f32, 0.25f));
  dropout_row("GPT-mini 32 x 256^2, E 64, bf16", causal(32, 256, 64, DType::bf16, 0.125f));
  dropout_row("GPT-mini 32 x 256^2, E 64, f32", causal(32, 256, 64, DType::f32, 0.125f));
  return 0;
}
