// CudnnSdpaConfig: see CudnnSdpaConfig.h.
#include "lib/backends/cuda/CudnnSdpaConfig.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace mstep::cuda {

namespace {

absl::Status not_expressible(const CudnnSdpaConfig& config, absl::string_view option) {
  return absl::UnimplementedError(
      absl::StrCat("cudnn sdpa ", config.to_string(), ": not expressible in cuDNN: ", option));
}

} // namespace

SdpaStrides sdpa_strides_or_packed(const SdpaStrides& strides, int64_t heads, int64_t rows,
                                   int64_t cols) {
  if (strides != SdpaStrides{}) return strides;
  return {heads * rows * cols, rows * cols, cols, 1};
}

std::string CudnnSdpaConfig::to_string() const {
  std::string s =
      absl::StrCat("[", batch, ", ", heads, ", ", seq_q, ", ", head_dim, "] x [", batch, ", ",
                   heads, ", ", seq_kv, ", ", head_dim, "] ", dtype_name(dtype), ", scale ", scale);
  if (dv() != head_dim) absl::StrAppend(&s, ", value dim ", dv());
  if (causal) absl::StrAppend(&s, ", causal");
  if (mask == SdpaMaskKind::additive) absl::StrAppend(&s, ", additive mask");
  if (mask == SdpaMaskKind::boolean) absl::StrAppend(&s, ", boolean mask");
  if (padding != SdpaPadding::none)
    absl::StrAppend(&s, ", valid_seq_len (", padding == SdpaPadding::left ? "left" : "right", ")");
  if (dropout_p > 0) absl::StrAppend(&s, ", dropout ", dropout_p);
  // The strided views (views of other bytes), by role.
  const std::pair<const char*, const SdpaStrides*> roles[] = {
      {"q", &layout.q},           {"k", &layout.k},           {"v", &layout.v},
      {"out", &layout.out},       {"grad_out", &layout.grad_out},
      {"grad_q", &layout.grad_q}, {"grad_k", &layout.grad_k}, {"grad_v", &layout.grad_v}};
  for (const auto& [role, strides] : roles)
    if (*strides != SdpaStrides{})
      absl::StrAppend(&s, ", ", role, " strides [", absl::StrJoin(*strides, ", "), "]");
  return s;
}

absl::Status cudnn_sdpa_expressible(const CudnnSdpaConfig& c) {
  if (c.batch < 1 || c.heads < 1 || c.seq_q < 1 || c.seq_kv < 1 || c.head_dim < 1 ||
      c.head_dim_v < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cudnn sdpa ", c.to_string(), ": every size must be at least 1 (batch ",
                     c.batch, ", heads ", c.heads, ", seq_q ", c.seq_q, ", seq_kv ", c.seq_kv,
                     ", head_dim ", c.head_dim, ", head_dim_v ", c.dv(), ")"));
  if (!std::isfinite(c.scale))
    return absl::InvalidArgumentError(
        absl::StrCat("cudnn sdpa ", c.to_string(), ": the scale must be finite"));
  if (!(c.dropout_p >= 0 && c.dropout_p < 1))
    return absl::InvalidArgumentError(absl::StrCat(
        "cudnn sdpa ", c.to_string(), ": dropout_p must be in [0, 1), not ", c.dropout_p));
  if (c.causal && c.mask != SdpaMaskKind::none)
    return absl::InvalidArgumentError(absl::StrCat(
        "cudnn sdpa ", c.to_string(), ": is_causal excludes a mask (as mstep.sdpa says)"));
  const int64_t element_bytes = c.dtype == DType::f32 ? 4 : 2;
  for (const SdpaStrides* strides :
       {&c.layout.q, &c.layout.k, &c.layout.v, &c.layout.out, &c.layout.grad_out,
        &c.layout.grad_q, &c.layout.grad_k, &c.layout.grad_v}) {
    if (*strides == SdpaStrides{}) continue;
    // cuDNN's SDPA engines read rows with 16-byte vector loads.
    if ((*strides)[3] != 1 || (*strides)[0] * element_bytes % 16 != 0 ||
        (*strides)[1] * element_bytes % 16 != 0 || (*strides)[2] * element_bytes % 16 != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "cudnn sdpa ", c.to_string(), ": strides [", absl::StrJoin(*strides, ", "),
          "] (the last must be 1, the others multiples of 16 bytes)"));
  }
  if (c.dtype != DType::bf16 && c.dtype != DType::f16)
    return not_expressible(
        c, absl::StrCat("dtype ", dtype_name(c.dtype), " (cuDNN's SDPA takes bf16 or f16)"));
  if (c.head_dim % 8 != 0 || c.dv() % 8 != 0 || c.head_dim > 256 || c.dv() > 256)
    return not_expressible(c, absl::StrCat("head dims ", c.head_dim, " and ", c.dv(),
                                           " (cuDNN's SDPA needs multiples of 8, at most 256)"));
  if (c.dropout_p > 0)
    return not_expressible(
        c, "dropout (cuDNN draws its own Philox numbers, not the ones mstep's ref and cpu "
           "kernels draw for the same seed and offset)");
  if (c.mask == SdpaMaskKind::boolean)
    return not_expressible(c, "a boolean mask (cuDNN's SDPA takes an additive one)");
  if (c.mask_grad) return not_expressible(c, "the mask's gradient");
  if (c.padding == SdpaPadding::left)
    return not_expressible(c,
                           "valid_seq_len with left padding (cuDNN's padding mask keeps the first "
                           "seq_len rows and keys)");
  if (c.return_probs) return not_expressible(c, "returned attention probabilities");
  if (c.return_dropout_mask) return not_expressible(c, "a returned dropout mask");
  if (c.saved_probs) return not_expressible(c, "saved probabilities (recompute_mode = false)");
  if (!c.softmax_mode_none) return not_expressible(c, "a softmax_mode other than none");
  return absl::OkStatus();
}

} // namespace mstep::cuda
