func.func @update_result_types(%w: tensor<4xf32>, %lr: tensor<f64>) {
  %0 = "mstep.multi_tensor_update"(%w, %w, %lr) <{kind = #mstep.optimizer<sgd>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0>}> : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<2x2xf32>
  return
}
