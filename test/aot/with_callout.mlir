// A convolution: the xla step function calls out to the runtime's kernel
// for it, so mstep-aot refuses the step and names the op.
func.func @step(%x: tensor<1x3x8x8xf32> {mstep.role = "input"},
                %w: tensor<4x3x3x3xf32> {mstep.role = "parameter"}) -> tensor<1x4x8x8xf32> {
  %c = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x8x8xf32>
  %r = mstep.relu %c : tensor<1x4x8x8xf32>
  return %r : tensor<1x4x8x8xf32>
}
