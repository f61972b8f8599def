// neuron_attention_masking: what valid_seq_len's masking costs the
// attention tile programs on the simulated NeuronCore (cost model), forward
// and backward, at two shapes:
//   - gpt_train's default attention: 64 batch-heads (batch 16 x 4 heads)
//     of 64 x 64, head dim 16, f32, causal, right padding (its case);
//   - the bench's GPT-mini attention: 32 batch-heads (batch 8 x 4 heads)
//     of 256 x 256, head dim 64, bf16, causal.
// Per shape: no lengths, right padding and left padding (the key bias),
// their simulated time and the ratio to no lengths. Prints a table; exits 0
// (a bench, not a test).
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

} // namespace

int main() {
  std::printf("%-34s %-8s %10s %21s %21s\n", "attention (simulated us)", "", "no lengths",
              "right padding", "left padding");
  AttentionShape gpt_train;
  gpt_train.batch = 64;
  gpt_train.q_len = gpt_train.kv_len = 64;
  gpt_train.head_dim = gpt_train.value_dim = 16;
  gpt_train.dtype = DType::f32;
  gpt_train.scale = 0.25f;
  gpt_train.causal = true;
  row("gpt_train 64 x 64^2, E 16, f32", gpt_train, 16);
  AttentionShape mini;
  mini.batch = 32;
  mini.q_len = mini.kv_len = 256;
  mini.head_dim = mini.value_dim = 64;
  mini.dtype = DType::bf16;
  mini.scale = 0.125f;
  mini.causal = true;
  row("GPT-mini 32 x 256^2, E 64, bf16", mini, 8);
  mini.dtype = DType::f32;
  row("GPT-mini 32 x 256^2, E 64, f32", mini, 8);
  return 0;
}
