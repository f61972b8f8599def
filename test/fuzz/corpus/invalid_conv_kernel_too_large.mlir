func.func @conv_kernel_too_large(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x1x1xf32>
  return
}
