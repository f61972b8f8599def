// Scaled dot-product attention: argument checks and the `sdpa` node.
//
// One primitive node carries every FusedSDPA option, so backends (and the
// fuse-attention pass) see attention as a unit:
//   operands  q, k, v [, mask] [, valid_len] [, rng_state]
//   attrs     is_causal, scale (double), dropout_p (double), offset,
//             has_mask, has_valid_len, padding_side (0 right / 1 left),
//             return_probs, return_mask, recompute
//   results   out [, probs] [, dropout mask (bool)] [, saved probs]
// The RNG state operand is present only when dropout_p > 0; `offset` is
// then the op's offset into the Philox stream, and -1 says "no RNG
// operand". Without dropout the node is deterministic and draws nothing,
// so inference graphs neither take the RNG state as an input nor advance it.
// With recompute = 0 the last result is the softmax before dropout
// ([..., L, S], q's dtype), kept for `sdpa_grad`; the user never sees it.
// recompute is 0 only when the call records a backward: with nothing to
// differentiate, both modes give the same (cache-sharing) node.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/GradFn.h"
#include "mstep/api/Attention.h"
#include "mstep/runtime/TensorImpl.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {

constexpr absl::string_view kOp = "scaled_dot_product_attention";

std::string describe_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  return absl::StrCat("q ", describe(q), ", k ", describe(k), ", v ",
                      describe(v));
}

/// q, k, v: floating, one dtype, equal ranks >= 2, identical leading dims,
/// matching head dim (q/k) and key length (k/v).
void check_qkv(const Tensor& q, const Tensor& k, const Tensor& v) {
  if (!q.defined() || !k.defined() || !v.defined())
    throw_op_error(kOp, "q, k and v must all be defined", describe_qkv(q, k, v),
                   "Pass three tensors.");
  const std::string got = describe_qkv(q, k, v);
  if (!is_floating(q.dtype()) || !is_floating(k.dtype()) ||
      !is_floating(v.dtype()))
    throw_op_error(kOp, "expects floating-point q, k and v", got,
                   "Convert them first, e.g. q.to(mstep::DType::f32).");
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype())
    throw_op_error(kOp, "expects q, k and v of one dtype", got,
                   "Convert them to a common dtype with to() first.");
  if (q.dim() < 2 || k.dim() < 2 || v.dim() < 2)
    throw_op_error(kOp, "expects q, k and v of rank >= 2 ([..., L, E])", got,
                   "Add a batch dim with unsqueeze(0) if needed.");
  if (q.dim() != k.dim() || q.dim() != v.dim())
    throw_op_error(kOp, "expects q, k and v of the same rank", got,
                   "Give them the same batch/head dims; broadcasting of "
                   "batch dims is not supported (use expand()).");
  for (int64_t d = 0; d < q.dim() - 2; ++d)
    if (q.size(d) != k.size(d) || q.size(d) != v.size(d))
      throw_op_error(
          kOp,
          absl::StrCat("batch/head dim ", d, " differs between q, k and v"),
          got,
          "The leading dims must be identical; use expand() to "
          "repeat shared keys/values.");
  if (q.size(-1) != k.size(-1))
    throw_op_error(kOp,
                   absl::StrCat("q's head dim E=", q.size(-1),
                                " differs from k's E=", k.size(-1)),
                   got, "q is [..., L, E] and k is [..., S, E].");
  if (k.size(-2) != v.size(-2))
    throw_op_error(
        kOp,
        absl::StrCat("k has S=", k.size(-2), " keys but v has ", v.size(-2)),
        got, "k is [..., S, E] and v is [..., S, Ev].");
}

/// The mask is bool (true = attend) or q's floating dtype (added to the
/// scores), and must broadcast to the score shape [..., L, S] without
/// growing it.
void check_mask(const Tensor& mask, const Tensor& q, const Shape& scores,
                bool is_causal) {
  if (is_causal)
    throw_op_error(kOp, "is_causal and attn_mask cannot be used together",
                   describe(mask),
                   "Fold the causal pattern into attn_mask (e.g. "
                   "logical_and with tril(ones)) or drop one of them, as "
                   "PyTorch requires.");
  if (mask.dtype() != DType::boolean && mask.dtype() != q.dtype())
    throw_op_error(
        kOp,
        absl::StrCat("attn_mask must be bool or q's dtype ",
                     dtype_name(q.dtype())),
        absl::StrCat("attn_mask ", describe(mask), ", q ", describe(q)),
        "Use a bool mask (true = attend) or an additive mask of "
        "q's dtype (convert with to()).");
  bool ok = mask.dim() <= scores.rank();
  for (int64_t i = 1; ok && i <= mask.dim(); ++i) {
    const int64_t m = mask.shape()[mask.dim() - i];
    ok = m == 1 || m == scores[scores.rank() - i];
  }
  if (!ok)
    throw_op_error(
        kOp,
        absl::StrCat("attn_mask does not broadcast to the score "
                     "shape [..., L, S] = ",
                     scores.to_string()),
        absl::StrCat("attn_mask ", describe(mask), ", q ", describe(q)),
        "Each trailing mask dim must equal the score dim or be 1.");
}

/// valid_seq_len is an integer [B] with B = q's dim 0; needs rank >= 3 so
/// that dim 0 is a batch dim distinct from L.
void check_valid_len(const Tensor& len, const Tensor& q) {
  const std::string got =
      absl::StrCat("valid_seq_len ", describe(len), ", q ", describe(q));
  if (q.dim() < 3)
    throw_op_error(kOp, "valid_seq_len needs q of rank >= 3 ([B, ..., L, E])",
                   got, "Add a batch dim with unsqueeze(0).");
  if (!is_integral(len.dtype()))
    throw_op_error(kOp, "valid_seq_len must be i32 or i64", got,
                   "Convert it with to(mstep::DType::i64).");
  if (len.dim() != 1 || len.size(0) != q.size(0))
    throw_op_error(
        kOp,
        absl::StrCat("valid_seq_len must have shape [B] = [", q.size(0), "]"),
        got, "Pass one valid length per batch row (q's dim 0).");
}

SdpaResult record_sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                       const SdpaOptions& o) {
  check_qkv(q, k, v);
  Shape scores(q.shape().dims());
  scores[scores.rank() - 1] = k.size(-2);
  const bool has_mask = o.attn_mask.defined();
  const bool has_len = o.valid_seq_len.defined();
  if (has_mask) check_mask(o.attn_mask, q, scores, o.is_causal);
  if (has_len) check_valid_len(o.valid_seq_len, q);
  if (!(o.dropout_p >= 0.0 && o.dropout_p <= 1.0))
    throw_op_error(kOp, "dropout_p must be in [0, 1]",
                   absl::StrCat("dropout_p ", o.dropout_p),
                   "Pass a probability; use 0 for inference.");
  if (o.scale && !std::isfinite(*o.scale))
    throw_op_error(kOp, "scale must be finite",
                   absl::StrCat("scale ", *o.scale),
                   "Leave it unset for 1/sqrt(E).");
  // E == 0 gives empty dot products (zero scores); any finite scale works.
  const double scale = o.scale.value_or(
      1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(q.size(-1), 1))));

  std::vector<Tensor> operands = {q, k, v};
  if (has_mask) operands.push_back(o.attn_mask);
  if (has_len) operands.push_back(o.valid_seq_len);
  // Check devices before drawing random numbers, so a failing call leaves
  // the RNG stream untouched (record_multi would only catch it after).
  for (const Tensor& t : operands)
    if (t.device() != q.device())
      throw_op_error(
          kOp, "operands live on different devices",
          absl::StrCat(q.device().to_string(), " and ", t.device().to_string()),
          "Move q, k, v, attn_mask and valid_seq_len to one device.");
  // Saved probabilities only serve a backward; checked on the inputs
  // before the RNG state joins them.
  const bool save_probs = !o.recompute && autograd::any_requires_grad(operands);
  int64_t offset = -1;
  if (o.dropout_p > 0) {
    Tracer::RandomDraw draw =
        value_or_throw(Tracer::get().draw_random(scores.numel(), q.device()));
    offset = draw.offset;
    operands.emplace_back(std::move(draw.state));  // the RNG state goes last
  }

  AttrList attrs = {{AttrName::is_causal, int64_t{o.is_causal}},
                    {AttrName::scale, scale},
                    {AttrName::dropout_p, o.dropout_p},
                    {AttrName::offset, offset},
                    {AttrName::has_mask, int64_t{has_mask}},
                    {AttrName::has_valid_len, int64_t{has_len}},
                    {AttrName::padding_side, int64_t{o.padding_side == PaddingSide::left ? 1 : 0}},
                    {AttrName::return_probs, int64_t{o.return_attn_probs}},
                    {AttrName::return_mask, int64_t{o.return_dropout_mask}},
                    {AttrName::recompute, int64_t{!save_probs}}};

  Shape out_shape(q.shape().dims());
  out_shape[out_shape.rank() - 1] = v.size(-1);
  ResultTypes types = {TensorType{out_shape, q.dtype()}};
  if (o.return_attn_probs) types.push_back({scores, q.dtype()});
  if (o.return_dropout_mask) types.push_back({scores, DType::boolean});
  if (save_probs) types.push_back({scores, q.dtype()}); // hidden, see top

  std::vector<Tensor> results = detail::record_multi(
      kOp, OpKind::sdpa, operands, std::move(attrs), std::move(types));
  SdpaResult r;
  r.out = results[0];
  size_t next = 1;
  if (o.return_attn_probs) r.attn_probs = results[next++];
  if (o.return_dropout_mask) r.dropout_mask = results[next++];
  return r;
}

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k,
                                    const Tensor& v,
                                    const SdpaOptions& options) {
  // Only `out` is returned, so the node need not produce the extras.
  SdpaOptions o = options;
  o.return_attn_probs = false;
  o.return_dropout_mask = false;
  if (detail::autocast_target({&q, &k, &v})) return fused_sdpa(q, k, v, o).out;
  return record_sdpa(q, k, v, o).out;
}

SdpaResult fused_sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                      const SdpaOptions& options) {
  if (auto d = detail::autocast_target({&q, &k, &v})) {
    SdpaOptions o = options;
    if (o.attn_mask.defined() && o.attn_mask.dtype() != DType::boolean)
      o.attn_mask = detail::autocast_operand(o.attn_mask, *d);
    return fused_sdpa(detail::autocast_operand(q, *d), detail::autocast_operand(k, *d),
                      detail::autocast_operand(v, *d), o);
  }
  return record_sdpa(q, k, v, options);
}

}  // namespace mstep
