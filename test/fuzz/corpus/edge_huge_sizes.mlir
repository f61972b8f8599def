func.func @huge(%x: tensor<2305843009213693952x2xf32>, %y: tensor<1x2x4611686018427387904x6xf32>, %v: tensor<f32>) {
  %0 = mstep.exp %x : tensor<2305843009213693952x2xf32>
  %1 = mstep.reshape %x : tensor<2305843009213693952x2xf32> -> tensor<2x2305843009213693952xf32>
  %2 = mstep.pad %x, %v {pads = array<i64: 9223372036854775805, -9223372036854775805>} : tensor<2305843009213693952x2xf32>, tensor<f32> -> tensor<2305843009213693952x2xf32>
  %3 = mstep.max_pool2d %y {ceil_mode = true, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 1, 0>, stride = array<i64: 4611686018427387904, 2>} : tensor<1x2x4611686018427387904x6xf32> -> tensor<1x2x2x3xf32>
  %4 = mstep.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<2305843009213693952x2xf32> -> tensor<2xf32>
  return
}
