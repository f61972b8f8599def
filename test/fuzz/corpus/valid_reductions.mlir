func.func @reductions(%x: tensor<2x3x4xf32>, %i: tensor<2x3xi64>, %z: tensor<f32>) {
  %0 = mstep.sum %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %1 = mstep.sum %i {dims = array<i64: 0, 1>, keepdim = true} : tensor<2x3xi64> -> tensor<1x1xi64>
  %2 = mstep.mean %x {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<3xf32>
  %3 = mstep.max %x {dims = array<i64: 2>, keepdim = true} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %4 = mstep.min %i {dims = array<i64: 0>, keepdim = false} : tensor<2x3xi64> -> tensor<3xi64>
  %5 = mstep.argmax %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x4xi64>
  %6 = mstep.argmax %x {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<i64>
  %7 = mstep.logsumexp %x {dims = array<i64: 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x3xf32>
  %8 = mstep.var %x {correction = 1 : i64, dims = array<i64: 1, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2xf32>
  %9 = mstep.sum %z {dims = array<i64>, keepdim = false} : tensor<f32> -> tensor<f32>
  return
}
