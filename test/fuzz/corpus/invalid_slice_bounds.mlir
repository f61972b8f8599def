func.func @slice_bounds(%x: tensor<2x6xf32>) {
  %0 = mstep.slice %x {dim = 1 : i64, end = 8 : i64, start = 4 : i64, step = 1 : i64} : tensor<2x6xf32> -> tensor<2x4xf32>
  return
}
