func.func @nll_loss_target(%lp: tensor<8x10xf32>, %t: tensor<10xi64>) {
  %0 = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<8x10xf32>, tensor<10xi64> -> tensor<f32>
  return
}
