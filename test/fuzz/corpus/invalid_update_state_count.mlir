func.func @update_state_count(%w: tensor<4xf32>, %s: tensor<4xf32>, %t: tensor<i64>, %lr: tensor<f64>) {
  %0:4 = mstep.multi_tensor_update <adamw> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) states(%s, %s : tensor<4xf32>, tensor<4xf32>) steps(%t) lr(%lr) beta1(%lr) beta2(%lr) eps(%lr) {amsgrad = true}
  return
}
