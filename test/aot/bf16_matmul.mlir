// A bf16 matmul: the xla step function multiplies it through the runtime's
// oneDNN matmul (XlaRuntimeCalls::gemm_bf16), which a stand-alone object
// does not bind yet, so mstep-aot refuses the step and names the matmul.
func.func @step(%x: tensor<4x8xbf16> {mstep.role = "input"},
                %w: tensor<8x3xbf16> {mstep.role = "parameter"}) -> tensor<4x3xbf16> {
  %y = mstep.matmul %x, %w : tensor<4x8xbf16>, tensor<8x3xbf16> -> tensor<4x3xbf16>
  return %y : tensor<4x3xbf16>
}
