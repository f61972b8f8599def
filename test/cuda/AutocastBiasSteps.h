// Steps of an autocast linear (GPT-mini's forms under `--autocast bf16`):
// the forward's bias add with the f32 bias cast to bf16 in the fusion, and
// the backward's bias gradient cast to f32 before the weight gradient's
// matmul (CudaAutocastBias.h). Shared by the autocast-bias and epilogue
// fallback tests.
#pragma once

#include <string>

namespace mstep::cuda::testing {

/// GPT-mini's form under autocast: x·w (bf16) and the f32 bias, cast to
/// bf16 and added in the fusion that reads the product (bias first), then
/// `activation` (an op on %s named %a, or empty).
inline std::string autocast_linear(const std::string& activation) {
  std::string text = R"(
func.func @step(%x: tensor<64x96xbf16>, %w: tensor<96x80xbf16>, %b: tensor<80xf32>)
    -> tensor<64x80xbf16> {
  %0 = mstep.matmul %x, %w : tensor<64x96xbf16>, tensor<96x80xbf16> -> tensor<64x80xbf16>
  %1 = mstep.fusion ins(%b, %0 : tensor<80xf32>, tensor<64x80xbf16>) -> tensor<64x80xbf16> {
  ^bb0(%c: tensor<80xf32>, %p: tensor<64x80xbf16>):
    %cb = mstep.cast %c : tensor<80xf32> -> tensor<80xbf16>
    %s = mstep.add %p, %cb : tensor<64x80xbf16>, tensor<80xbf16> -> tensor<64x80xbf16>
)";
  if (!activation.empty()) text += "    %a = " + activation + " : tensor<64x80xbf16>\n";
  text += activation.empty() ? "    mstep.yield %s : tensor<64x80xbf16>\n"
                             : "    mstep.yield %a : tensor<64x80xbf16>\n";
  return text + "  }\n  return %1 : tensor<64x80xbf16>\n}\n";
}

inline constexpr const char* kRelu = "mstep.relu %s";
inline constexpr const char* kGeluTanh = "mstep.gelu %s {approximate = #mstep.gelu_approximation<tanh>}";
inline constexpr const char* kGeluErf = "mstep.gelu %s";

/// GPT-mini's backward of an autocast linear (the transposed weight
/// gradient of W [out, in]): db = cast(sum(dY over B, S)) to f32, read
/// before dW = (x^T dY)^T.
inline constexpr const char* kAutocastBiasGrad = R"(
func.func @step(%x: tensor<4x16x96xbf16>, %dy: tensor<4x16x80xbf16>)
    -> (tensor<80xf32>, tensor<80x96xbf16>) {
  %s = mstep.sum %dy {dims = array<i64: 0, 1>, keepdim = true} : tensor<4x16x80xbf16> -> tensor<1x1x80xbf16>
  %r = mstep.reshape %s : tensor<1x1x80xbf16> -> tensor<80xbf16>
  %db = mstep.fusion ins(%r : tensor<80xbf16>) -> tensor<80xf32> {
  ^bb0(%v: tensor<80xbf16>):
    %c = mstep.cast %v : tensor<80xbf16> -> tensor<80xf32>
    mstep.yield %c : tensor<80xf32>
  }
  %x2 = mstep.reshape %x : tensor<4x16x96xbf16> -> tensor<64x96xbf16>
  %xt = mstep.permute %x2 {perm = array<i64: 1, 0>} : tensor<64x96xbf16> -> tensor<96x64xbf16>
  %d = mstep.reshape %dy : tensor<4x16x80xbf16> -> tensor<64x80xbf16>
  %p = mstep.matmul %xt, %d : tensor<96x64xbf16>, tensor<64x80xbf16> -> tensor<96x80xbf16>
  %dw = mstep.permute %p {perm = array<i64: 1, 0>} : tensor<96x80xbf16> -> tensor<80x96xbf16>
  return %db, %dw : tensor<80xf32>, tensor<80x96xbf16>
}
)";

}  // namespace mstep::cuda::testing
