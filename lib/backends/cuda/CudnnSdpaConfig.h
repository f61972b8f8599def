// What one attention node asks of cuDNN's SDPA (CudnnSdpa.h): its shapes
// and options, the check of what cuDNN can express, and the device
// pointers of one forward / backward run. No cuDNN header: the compile
// half records a config in the launch plan (CudaPlan.h) whether or not the
// build found cuDNN. Library-internal.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "mstep/core/DType.h"

namespace mstep::cuda {

enum class SdpaMaskKind : uint8_t { none, additive, boolean };
enum class SdpaPadding : uint8_t { none, right, left };

/// Element strides of one [B, H, rows, cols] tensor in its buffer; all 0:
/// packed row-major. A strided one is a view of another value's bytes (the
/// heads' [B, S, H, D] -> [B, H, S, D] permute, a slice of a packed qkv
/// projection: CudaViews::attention_strides), read or written by cuDNN in
/// place of a copy kernel.
using SdpaStrides = std::array<int64_t, 4>;

/// The strides of each tensor an SDPA step reads or writes.
struct SdpaLayout {
  SdpaStrides q{}, k{}, v{}, out{}, grad_out{}, grad_q{}, grad_k{}, grad_v{};
  bool packed() const { return *this == SdpaLayout{}; }
  friend bool operator==(const SdpaLayout&, const SdpaLayout&) = default;
};

/// `strides`, or [B, H, rows, cols]'s packed ones where it is all 0.
SdpaStrides sdpa_strides_or_packed(const SdpaStrides& strides, int64_t heads, int64_t rows,
                                   int64_t cols);

/// One attention node's shapes and options (mstep.sdpa / sdpa_backward).
struct CudnnSdpaConfig {
  int64_t batch = 1, heads = 1, seq_q = 0, seq_kv = 0, head_dim = 0;
  int64_t head_dim_v = 0; ///< 0: head_dim
  DType dtype = DType::bf16;
  double scale = 1.0;
  bool causal = false;
  SdpaMaskKind mask = SdpaMaskKind::none;
  bool mask_per_batch = true;              ///< the mask's dim 0 is B (else 1, broadcast)
  bool mask_per_head = true;               ///< the mask's dim 1 is H (else 1, broadcast)
  bool mask_grad = false;                  ///< the backward must return the mask's gradient
  SdpaPadding padding = SdpaPadding::none; ///< valid_seq_len and its side
  double dropout_p = 0.0;
  // FusedSDPA's extra results and modes (mstep.sdpa's attributes).
  bool return_probs = false, return_dropout_mask = false;
  bool saved_probs = false;      ///< recompute_mode = false
  bool softmax_mode_none = true; ///< softmax_mode = none
  SdpaLayout layout;             ///< where q, k, v, ... are views of other bytes

  int64_t dv() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  /// "[2, 4, 128, 64] x [2, 4, 128, 64] bf16, scale 0.125, causal".
  std::string to_string() const;
  friend bool operator==(const CudnnSdpaConfig&, const CudnnSdpaConfig&) = default;
};

/// OK when cuDNN's SDPA graphs can run `config`. Errors:
/// InvalidArgument for a bad config (a size below 1, a non-finite scale,
/// dropout_p outside [0, 1), causal with a mask); Unimplemented "not
/// expressible in cuDNN: <option>" for an option cuDNN cannot express
/// (f32, dropout, a boolean mask, the mask's gradient, left padding,
/// returned probabilities or dropout mask, saved probabilities, a softmax
/// mode, a head dim over 256 or not a multiple of 8). Strides whose last is
/// not 1, or others not a multiple of 16 bytes: InvalidArgument.
absl::Status cudnn_sdpa_expressible(const CudnnSdpaConfig& config);

/// Device pointers of one forward run (mask / valid_seq_len only when the
/// config has them).
struct CudnnSdpaForwardArgs {
  CUdeviceptr q = 0, k = 0, v = 0, out = 0, stats = 0;
  CUdeviceptr mask = 0, valid_seq_len = 0;
};
/// Device pointers of one backward run: the forward's q, k, v, out and
/// stats, the gradient of out, and the three gradients written.
struct CudnnSdpaBackwardArgs {
  CUdeviceptr q = 0, k = 0, v = 0, out = 0, stats = 0, grad_out = 0;
  CUdeviceptr grad_q = 0, grad_k = 0, grad_v = 0;
  CUdeviceptr mask = 0, valid_seq_len = 0;
};

} // namespace mstep::cuda
