func.func @permute_repeats(%x: tensor<2x3xf32>) {
  %0 = mstep.permute %x {perm = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<3x3xf32>
  return
}
