func.func @nn(%x: tensor<2x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>, %rng: tensor<2xi64>, %lp: tensor<8x10xf32>, %t: tensor<8xi64>, %lp1: tensor<10xf64>, %t1: tensor<i64>) {
  %0 = mstep.softmax %x {dim = 1 : i64} : tensor<2x4xf32>
  %1 = mstep.log_softmax %x {dim = 0 : i64} : tensor<2x4xf32>
  %2 = mstep.layer_norm %x weight(%w : tensor<4xf32>) bias(%b : tensor<4xf32>) {eps = 1.0e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  %3 = mstep.layer_norm %x bias(%b : tensor<4xf32>) {eps = 1.0e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  %4 = mstep.layer_norm %x {eps = 0.0 : f64, normalized_ndim = 2 : i64} : tensor<2x4xf32>
  %5 = mstep.rms_norm %x weight(%w : tensor<4xf32>) {eps = 1.1920928955078125e-07 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  %6 = mstep.rms_norm %x {eps = 1.0e-06 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  %7 = mstep.dropout %x, %rng {offset = 16 : i64, p = 1.0e-01 : f64} : tensor<2x4xf32>
  %8 = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  %9 = mstep.nll_loss %lp, %t {ignore_index = 0 : i64, reduction = #mstep.reduction<none>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<8xf32>
  %10 = mstep.nll_loss %lp1, %t1 {ignore_index = -100 : i64, reduction = #mstep.reduction<sum>} : tensor<10xf64>, tensor<i64> -> tensor<f64>
  return
}
