// Autocast: inside an autocast scope, matrix products and attention run in
// a lower precision (bf16) while everything else, and the parameters
// ("master weights"), stays f32 -- PyTorch's torch.autocast for CPU.
//
//   {
//     auto scope = mstep::autocast(DType::bf16);
//     Tensor logits = model.forward(x);      // matmuls, sdpa in bf16
//     loss = cross_entropy(logits, y);       // f32 (bf16 promotes to f32)
//   }
//   loss.backward();                          // f32 grads for f32 params
//
// Covered ops: matmul, bmm, linear, scaled_dot_product_attention and
// fused_sdpa. Their f32 operands are cast (a differentiable `to`), so the
// gradient flows back to the f32 tensors as f32. Results are in the
// autocast dtype. Scopes nest; the innermost wins; the state is per thread.
#pragma once

#include <optional>

#include "mstep/core/DType.h"

namespace mstep {

class AutocastScope {
 public:
  /// `dtype` nullopt turns autocast off inside the scope.
  explicit AutocastScope(std::optional<DType> dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  std::optional<DType> previous_;
};

/// Starts an autocast scope: `auto scope = mstep::autocast(DType::bf16);`.
/// bf16 and f16 are accepted; another dtype throws mstep::Error.
[[nodiscard]] AutocastScope autocast(DType dtype);

/// The autocast dtype of this thread, nullopt outside any scope.
std::optional<DType> autocast_dtype();

}  // namespace mstep
