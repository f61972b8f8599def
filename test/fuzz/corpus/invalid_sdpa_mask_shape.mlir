func.func @sdpa_mask_shape(%q: tensor<2x8x16xf32>, %m: tensor<3x8xi1>) {
  %0 = mstep.sdpa %q, %q, %q mask(%m : tensor<3x8xi1>) {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}
