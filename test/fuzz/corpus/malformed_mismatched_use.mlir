func.func @mismatched_use(%x: tensor<2xf32>) {
  %0 = mstep.exp %x : tensor<3xf32>
  return
}
