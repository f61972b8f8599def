// nn::MultiheadAttention: PyTorch's in_proj/out_proj layout around
// scaled_dot_product_attention, with nn.MultiheadAttention's mask
// conventions translated to sdpa's.
#include "mstep/api/nn/Attention.h"

#include <cmath>
#include <limits>

#include "lib/api/nn/Init.h"
#include "lib/api/nn/ModuleChecks.h"
#include "mstep/api/Attention.h"
#include "mstep/api/Elementwise.h"
#include "mstep/api/Linalg.h"
#include "mstep/api/Reduction.h"
#include "mstep/api/ShapeOps.h"

namespace mstep::nn {
namespace {

/// The sizes forward() works with, after moving inputs to [B, L/S, E].
struct Dims {
  int64_t batch, target_len, source_len, heads;
  bool batched;
};

/// Collects masks in scaled_dot_product_attention's convention (bool true
/// = attend; floating = added), each broadcastable to [B, H, L, S]. Two
/// bool masks meet with logical_and; once one is floating, bool masks
/// become 0 / -inf and everything adds up.
class MaskBuilder {
 public:
  explicit MaskBuilder(DType dtype) : dtype_(dtype) {}

  void add(Tensor mask) {
    if (!mask.defined()) return;
    if (!mask_.defined()) {
      mask_ = mask;
    } else if (mask_.dtype() == DType::boolean && mask.dtype() == DType::boolean) {
      mask_ = logical_and(mask_, mask);
    } else {
      mask_ = additive(mask_) + additive(mask);
    }
  }
  Tensor result() const { return mask_; }

 private:
  Tensor additive(const Tensor& mask) const {
    if (mask.dtype() != DType::boolean) return mask;
    return where(mask, zeros({}, dtype_), -std::numeric_limits<double>::infinity());
  }
  DType dtype_;
  Tensor mask_;
};

/// A PyTorch-convention mask (bool true = masked out; floating = added) in
/// sdpa's convention, floating masks cast to the query's dtype.
Tensor to_sdpa_convention(const MultiheadAttention& me, const Tensor& mask, DType dtype,
                          absl::string_view name) {
  if (mask.dtype() == DType::boolean) return logical_not(mask);
  if (!is_floating(mask.dtype()))
    checks::fail(me, absl::StrCat(name, " must be bool or floating"), checks::describe(mask),
                 "Pass a bool mask (true = masked out) or an additive floating one.");
  return to(mask, dtype);
}

Tensor attn_mask_for_sdpa(const MultiheadAttention& me, const Tensor& mask, const Dims& d,
                          DType dtype) {
  const int64_t L = d.target_len, S = d.source_len;
  const bool is_2d = mask.dim() == 2 && mask.size(0) == L && mask.size(1) == S;
  const bool is_3d = mask.dim() == 3 && mask.size(0) == d.batch * d.heads && mask.size(1) == L &&
                     mask.size(2) == S;
  if (!is_2d && !is_3d)
    checks::fail(me,
                 absl::StrCat("expected attn_mask of shape [L, S] = ", checks::dims({L, S}),
                              " or [", d.batched ? "B * num_heads" : "num_heads",
                              ", L, S] = ", checks::dims({d.batch * d.heads, L, S})),
                 checks::describe(mask),
                 "L is the query length and S the key length; per-head masks are stacked "
                 "batch-major.");
  Tensor m = to_sdpa_convention(me, mask, dtype, "attn_mask");
  return is_3d ? reshape(m, {d.batch, d.heads, L, S}) : m;
}

Tensor key_padding_mask_for_sdpa(const MultiheadAttention& me, const Tensor& mask, const Dims& d,
                                 DType dtype) {
  const int64_t S = d.source_len;
  const bool ok = d.batched ? mask.dim() == 2 && mask.size(0) == d.batch && mask.size(1) == S
                            : mask.dim() == 1 && mask.size(0) == S;
  if (!ok)
    checks::fail(me,
                 absl::StrCat("expected key_padding_mask of shape ",
                              d.batched ? absl::StrCat("[B, S] = ", checks::dims({d.batch, S}))
                                        : absl::StrCat("[S] = ", checks::dims({S}))),
                 checks::describe(mask), "Pass one entry per key (true = padding).");
  return reshape(to_sdpa_convention(me, mask, dtype, "key_padding_mask"), {d.batch, 1, 1, S});
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, bool bias,
                                       bool batch_first)
    : MultiheadAttention(embed_dim, num_heads,
                         MultiheadAttentionOptions{.bias = bias, .batch_first = batch_first}) {}

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads,
                                       const MultiheadAttentionOptions& options)
    : Module("MultiheadAttention"), embed_dim_(embed_dim), num_heads_(num_heads),
      options_(options) {
  const auto& me = *this;
  checks::require_positive(me, "embed_dim", embed_dim);
  checks::require_positive(me, "num_heads", num_heads);
  if (embed_dim % num_heads != 0)
    checks::fail(me, "embed_dim must be divisible by num_heads",
                 absl::StrCat("embed_dim ", embed_dim, ", num_heads ", num_heads),
                 "Each head gets embed_dim / num_heads features.");
  if (!(options.dropout >= 0.0 && options.dropout <= 1.0))
    checks::fail(me, "dropout must be in [0, 1]", absl::StrCat("dropout ", options.dropout),
                 "Pass the probability of dropping an attention weight.");
  in_proj_weight = init::uniform({3 * embed_dim, embed_dim}, xavier_bound());
  register_parameter("in_proj_weight", in_proj_weight);
  if (options.bias) {
    in_proj_bias = zeros({3 * embed_dim});
    register_parameter("in_proj_bias", in_proj_bias);
  }
  out_proj =
      register_module("out_proj", std::make_shared<Linear>(embed_dim, embed_dim, options.bias));
  if (out_proj->bias.defined()) init::assign(out_proj->bias, zeros_like(out_proj->bias));
}

double MultiheadAttention::xavier_bound() const {
  // xavier_uniform_ on [3E, E]: fan_in E, fan_out 3E.
  return std::sqrt(6.0 / static_cast<double>(4 * embed_dim_));
}

void MultiheadAttention::reset_parameters() {
  // PyTorch's _reset_parameters: xavier-uniform in_proj_weight, zero
  // biases; out_proj.weight keeps Linear's init.
  init::assign(in_proj_weight, init::uniform(in_proj_weight.shape(), xavier_bound()));
  if (in_proj_bias.defined()) init::assign(in_proj_bias, zeros_like(in_proj_bias));
  if (out_proj->bias.defined()) init::assign(out_proj->bias, zeros_like(out_proj->bias));
}

std::string MultiheadAttention::repr() const {
  return absl::StrCat("MultiheadAttention(embed_dim=", embed_dim_, ", num_heads=", num_heads_,
                      ", dropout=", options_.dropout, ", bias=", options_.bias ? "true" : "false",
                      ", batch_first=", options_.batch_first ? "true" : "false", ")");
}

MultiheadAttentionOutput MultiheadAttention::forward(const Tensor& query, const Tensor& key,
                                                     const Tensor& value,
                                                     const MultiheadAttentionForwardOptions& o) {
  const auto& me = *this;
  const int64_t E = embed_dim_, H = num_heads_, D = head_dim();
  checks::require_defined(me, query, "query");
  checks::require_defined(me, key, "key");
  checks::require_defined(me, value, "value");
  auto got = [&] {
    return absl::StrCat("query ", checks::describe(query), ", key ", checks::describe(key),
                        ", value ", checks::describe(value));
  };
  const std::string layout = options_.batch_first ? "[B, L, E]" : "[L, B, E]";
  if ((query.dim() != 3 && query.dim() != 2) || key.dim() != query.dim() ||
      value.dim() != query.dim())
    checks::fail(me,
                 absl::StrCat("expected query, key and value of rank 3 (", layout,
                              ") or all of rank 2 (unbatched [L, E])"),
                 got(), "Pass query, key and value with the same layout.");
  if (query.size(-1) != E || key.size(-1) != E || value.size(-1) != E)
    checks::fail(me,
                 absl::StrCat("expected the last dim of query, key and value to be embed_dim ", E),
                 got(), "Project the inputs to embed_dim features first.");

  // 1. Move everything to [B, len, E].
  const bool batched = query.dim() == 3;
  auto batch_first = [&](const Tensor& t) {
    if (!batched) return unsqueeze(t, 0);
    return options_.batch_first ? t : transpose(t, 0, 1);
  };
  const Tensor q_in = batch_first(query), k_in = batch_first(key), v_in = batch_first(value);
  Dims d{q_in.size(0), q_in.size(1), k_in.size(1), H, batched};
  if (k_in.size(0) != d.batch || v_in.size(0) != d.batch)
    checks::fail(me, "query, key and value have different batch sizes", got(),
                 absl::StrCat("Inputs are ", layout, "; every one needs the same B."));
  if (v_in.size(1) != d.source_len)
    checks::fail(me, "key and value have different lengths", got(),
                 absl::StrCat("Inputs are ", layout, "; key and value need the same length S."));

  // 2. Project. One matmul when the inputs coincide (self-attention), two
  //    when key is value (encoder-decoder attention).
  Tensor q, k, v;
  if (query.impl() == key.impl() && key.impl() == value.impl()) {
    std::vector<Tensor> qkv = chunk(linear(q_in, in_proj_weight, in_proj_bias), 3, -1);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    auto rows = [&](const Tensor& t, int64_t from, int64_t to) {
      return t.defined() ? slice(t, 0, from * E, to * E) : Tensor();
    };
    q = linear(q_in, rows(in_proj_weight, 0, 1), rows(in_proj_bias, 0, 1));
    if (key.impl() == value.impl()) {
      std::vector<Tensor> kv =
          chunk(linear(k_in, rows(in_proj_weight, 1, 3), rows(in_proj_bias, 1, 3)), 2, -1);
      k = kv[0], v = kv[1];
    } else {
      k = linear(k_in, rows(in_proj_weight, 1, 2), rows(in_proj_bias, 1, 2));
      v = linear(v_in, rows(in_proj_weight, 2, 3), rows(in_proj_bias, 2, 3));
    }
  }
  auto split_heads = [&](const Tensor& t, int64_t len) {
    return transpose(reshape(t, {d.batch, len, H, D}), 1, 2);  // [B, H, len, D]
  };

  // 3. Masks, translated to sdpa's convention. sdpa takes is_causal only
  //    without a mask, so with one the causal pattern joins the mask.
  SdpaOptions so;
  MaskBuilder masks(q.dtype());
  if (o.attn_mask.defined()) masks.add(attn_mask_for_sdpa(me, o.attn_mask, d, q.dtype()));
  if (o.key_padding_mask.defined())
    masks.add(key_padding_mask_for_sdpa(me, o.key_padding_mask, d, q.dtype()));
  if (o.is_causal) {
    if (masks.result().defined())
      masks.add(tril(ones({d.target_len, d.source_len}, DType::boolean)));
    else
      so.is_causal = true;
  }
  so.attn_mask = masks.result();
  so.dropout_p = is_training() ? options_.dropout : 0.0;
  so.return_attn_probs = o.need_weights;
  SdpaResult r = fused_sdpa(split_heads(q, d.target_len), split_heads(k, d.source_len),
                            split_heads(v, d.source_len), so);

  // 4. Merge heads, project out, restore the caller's layout.
  Tensor out = out_proj->forward(reshape(transpose(r.out, 1, 2), {d.batch, d.target_len, E}));
  MultiheadAttentionOutput result;
  result.output = !batched ? squeeze(out, 0) : options_.batch_first ? out : transpose(out, 0, 1);
  if (o.need_weights) {
    Tensor w = o.average_attn_weights ? mean(r.attn_probs, {1}) : r.attn_probs;
    result.weights = batched ? w : squeeze(w, 0);
  }
  return result;
}

}  // namespace mstep::nn
