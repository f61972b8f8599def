func.func @optimizers(%w: tensor<4x3xf32>, %b: tensor<4xf32>, %gw: tensor<4x3xf32>, %gb: tensor<4xf32>,
                      %s0: tensor<4x3xf32>, %s1: tensor<4xf32>, %s2: tensor<4x3xf32>, %s3: tensor<4xf32>,
                      %s4: tensor<4x3xf32>, %s5: tensor<4xf32>, %t0: tensor<i64>, %t1: tensor<i64>,
                      %lr: tensor<f64>, %h1: tensor<f64>, %h2: tensor<f64>, %h3: tensor<f64>, %wd: tensor<f64>) {
  %0 = mstep.multi_tensor_update <sgd> params(%w : tensor<4x3xf32>) grads(%gw : tensor<4x3xf32>) lr(%lr)
  %1:3 = mstep.multi_tensor_update <sgd> params(%w : tensor<4x3xf32>) grads(%gw : tensor<4x3xf32>) states(%s0 : tensor<4x3xf32>) steps(%t0) lr(%lr) momentum(%h1) dampening(%h2) weight_decay(%wd) {maximize = true}
  %2:6 = mstep.multi_tensor_update <sgd> params(%w, %b : tensor<4x3xf32>, tensor<4xf32>) grads(%gw, %gb : tensor<4x3xf32>, tensor<4xf32>) states(%s0, %s1 : tensor<4x3xf32>, tensor<4xf32>) steps(%t0, %t1) lr(%lr) momentum(%h1) {nesterov = true}
  %p:2, %s:4, %t:2 = mstep.multi_tensor_update <adam> params(%w, %b : tensor<4x3xf32>, tensor<4xf32>) grads(%gw, %gb : tensor<4x3xf32>, tensor<4xf32>) states(%s0, %s1, %s2, %s3 : tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>) steps(%t0, %t1) lr(%lr) beta1(%h1) beta2(%h2) eps(%h3)
  %4:11 = mstep.multi_tensor_update <adamw> params(%w, %b : tensor<4x3xf32>, tensor<4xf32>) grads(%gw, %gb : tensor<4x3xf32>, tensor<4xf32>) states(%s0, %s1, %s2, %s3, %s4, %s5 : tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>) steps(%t0, %t1) lr(%lr) beta1(%h1) beta2(%h2) eps(%h3) weight_decay(%wd) {amsgrad = true, grad_norm_type = 0x7FF0000000000000 : f64, max_grad_norm = 1.0 : f64} -> total_grad_norm tensor<f32>
  %5:5 = mstep.multi_tensor_update <adadelta> params(%b : tensor<4xf32>) grads(%gb : tensor<4xf32>) states(%s1, %s3 : tensor<4xf32>, tensor<4xf32>) steps(%t1) lr(%lr) rho(%h1) eps(%h3) {max_grad_norm = 5.0e-01 : f64} -> total_grad_norm tensor<f32>
  return
}
