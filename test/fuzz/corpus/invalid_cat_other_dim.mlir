func.func @cat_other_dim(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  %0 = mstep.cat %a, %b {dim = 0 : i64} : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>
  return
}
