// linear(x, w stored [96, 80], bias) then relu, as the graph has it: a
// matmul, a broadcast add and a relu (one cuBLASLt step with the RELU_BIAS
// epilogue); and the same with tanh (a BIAS epilogue, then a tanh kernel).
// Shared by the plan tests and the GPU case generator.
#pragma once

namespace mstep::cuda::testing {

inline constexpr const char* kLinearReluStep = R"(
func.func @step(%x: tensor<64x96xf32>, %w: tensor<96x80xf32>, %b: tensor<80xf32>)
    -> tensor<64x80xf32> {
  %0 = mstep.matmul %x, %w : tensor<64x96xf32>, tensor<96x80xf32> -> tensor<64x80xf32>
  %1 = mstep.add %0, %b : tensor<64x80xf32>, tensor<80xf32> -> tensor<64x80xf32>
  %2 = mstep.relu %1 : tensor<64x80xf32>
  return %2 : tensor<64x80xf32>
}
)";

inline constexpr const char* kLinearTanhStep = R"(
func.func @step(%x: tensor<64x96xf32>, %w: tensor<96x80xf32>, %b: tensor<80xf32>)
    -> tensor<64x80xf32> {
  %0 = mstep.matmul %x, %w : tensor<64x96xf32>, tensor<96x80xf32> -> tensor<64x80xf32>
  %1 = mstep.add %0, %b : tensor<64x80xf32>, tensor<80xf32> -> tensor<64x80xf32>
  %2 = mstep.tanh %1 : tensor<64x80xf32>
  return %2 : tensor<64x80xf32>
}
)";

} // namespace mstep::cuda::testing
