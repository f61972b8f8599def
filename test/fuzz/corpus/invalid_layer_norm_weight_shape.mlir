func.func @layer_norm_weight_shape(%x: tensor<2x4xf32>, %w: tensor<2x4xf32>) {
  %0 = mstep.layer_norm %x weight(%w : tensor<2x4xf32>) {eps = 1.0e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  return
}
