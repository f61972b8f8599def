func.func @reduce_dims_unsorted(%x: tensor<2x3xf32>) {
  %0 = mstep.mean %x {dims = array<i64: 1, 0>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
  return
}
