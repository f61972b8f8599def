// mstep-fuse-optimizer: the update chains lib/api/optim records (and a
// clip_grad_norm_ before them) become one mstep.multi_tensor_update per
// rule; chains that do not match op for op stay as they are.
// RUN: mstep-opt %s -split-input-file -mstep-fuse-optimizer | FileCheck %s
// Idempotence: a second run changes nothing, so the same checks hold.
// RUN: mstep-opt %s -split-input-file -mstep-fuse-optimizer -mstep-fuse-optimizer | FileCheck %s

// Plain SGD on two parameters: one op, params and grads in argument order.
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<4x3xf32>
// CHECK-SAME:      %[[B:arg[0-9]+]]: tensor<4xf32>
// CHECK-SAME:      %[[GW:arg[0-9]+]]: tensor<4x3xf32>
// CHECK-SAME:      %[[GB:arg[0-9]+]]: tensor<4xf32>
// CHECK-SAME:      %[[LR:arg[0-9]+]]: tensor<f64>
// CHECK-NEXT:    %[[P:[a-z_0-9]+]]:2 = mstep.multi_tensor_update <sgd> params(%[[W]], %[[B]] : tensor<4x3xf32>, tensor<4xf32>) grads(%[[GW]], %[[GB]] : tensor<4x3xf32>, tensor<4xf32>) lr(%[[LR]]){{$}}
// CHECK-NEXT:    return %[[P]]#0, %[[P]]#1 : tensor<4x3xf32>, tensor<4xf32>
func.func @sgd(%w: tensor<4x3xf32> {mstep.aliased_result = 0 : i64, mstep.role = "parameter"},
               %b: tensor<4xf32> {mstep.aliased_result = 1 : i64, mstep.role = "parameter"},
               %gw: tensor<4x3xf32> {mstep.role = "input"}, %gb: tensor<4xf32> {mstep.role = "input"},
               %lr: tensor<f64> {mstep.role = "device_scalar"}) -> (tensor<4x3xf32>, tensor<4xf32>) {
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %0 = mstep.mul %lr32, %gw : tensor<f32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %1 = mstep.sub %w, %0 : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %2 = mstep.mul %lr32, %gb : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %3 = mstep.sub %b, %2 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %1, %3 : tensor<4x3xf32>, tensor<4xf32>
}

// -----

// SGD with weight decay and nesterov momentum: the step counter is only
// advanced (the rule never reads it).
// CHECK-LABEL: func.func @sgd_nesterov(
// CHECK-SAME:      %[[STEP:arg[0-9]+]]: tensor<i64>
// CHECK-SAME:      %[[BUF:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[G:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[LR:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[MOM:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[WD:arg[0-9]+]]: tensor<f64>
// CHECK-NEXT:    %[[P:[a-z_0-9]+]], %[[S:[a-z_0-9]+]], %[[T:[a-z_0-9]+]] = mstep.multi_tensor_update <sgd> params(%[[W]] : tensor<3xf32>) grads(%[[G]] : tensor<3xf32>) states(%[[BUF]] : tensor<3xf32>) steps(%[[STEP]]) lr(%[[LR]]) momentum(%[[MOM]]) weight_decay(%[[WD]]) {nesterov = true}
// CHECK-NEXT:    return %[[T]], %[[S]], %[[P]] : tensor<i64>, tensor<3xf32>, tensor<3xf32>
func.func @sgd_nesterov(%step: tensor<i64> {mstep.aliased_result = 0 : i64, mstep.role = "optimizer_state"},
                        %buf: tensor<3xf32> {mstep.aliased_result = 1 : i64, mstep.role = "optimizer_state"},
                        %w: tensor<3xf32> {mstep.aliased_result = 2 : i64, mstep.role = "parameter"},
                        %g: tensor<3xf32> {mstep.role = "input"},
                        %lr: tensor<f64> {mstep.role = "device_scalar"},
                        %mom: tensor<f64> {mstep.role = "device_scalar"},
                        %wd: tensor<f64> {mstep.role = "device_scalar"}) -> (tensor<i64>, tensor<3xf32>, tensor<3xf32>) {
  %one = mstep.constant 1.000000e+00 : tensor<i64>
  %t = mstep.add %step, %one : tensor<i64>, tensor<i64> -> tensor<i64>
  %wd32 = mstep.cast %wd : tensor<f64> -> tensor<f32>
  %0 = mstep.mul %wd32, %w : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %d = mstep.add %g, %0 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %mom32 = mstep.cast %mom : tensor<f64> -> tensor<f32>
  %1 = mstep.mul %buf, %mom32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %nb = mstep.add %1, %d : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %2 = mstep.mul %mom32, %nb : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %3 = mstep.add %d, %2 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %4 = mstep.mul %lr32, %3 : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %4 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %t, %nb, %w1 : tensor<i64>, tensor<3xf32>, tensor<3xf32>
}

// -----

// SGD with dampening: the first step's coefficient comes from the counter.
// CHECK-LABEL: func.func @sgd_dampening(
// CHECK-SAME:      %[[STEP:arg[0-9]+]]: tensor<i64>
// CHECK-SAME:      %[[BUF:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[G:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[LR:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[MOM:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[DAMP:arg[0-9]+]]: tensor<f64>
// CHECK-NEXT:    %[[P:[a-z_0-9]+]], %[[S:[a-z_0-9]+]], %[[T:[a-z_0-9]+]] = mstep.multi_tensor_update <sgd> params(%[[W]] : tensor<3xf32>) grads(%[[G]] : tensor<3xf32>) states(%[[BUF]] : tensor<3xf32>) steps(%[[STEP]]) lr(%[[LR]]) momentum(%[[MOM]]) dampening(%[[DAMP]]){{$}}
// CHECK-NEXT:    return %[[T]], %[[S]], %[[P]] : tensor<i64>, tensor<3xf32>, tensor<3xf32>
func.func @sgd_dampening(%step: tensor<i64> {mstep.aliased_result = 0 : i64, mstep.role = "optimizer_state"},
                         %buf: tensor<3xf32> {mstep.aliased_result = 1 : i64, mstep.role = "optimizer_state"},
                         %w: tensor<3xf32> {mstep.aliased_result = 2 : i64, mstep.role = "parameter"},
                         %g: tensor<3xf32> {mstep.role = "input"},
                         %lr: tensor<f64> {mstep.role = "device_scalar"},
                         %mom: tensor<f64> {mstep.role = "device_scalar"},
                         %damp: tensor<f64> {mstep.role = "device_scalar"}) -> (tensor<i64>, tensor<3xf32>, tensor<3xf32>) {
  %one = mstep.constant 1.000000e+00 : tensor<i64>
  %c1 = mstep.constant 1.000000e+00 : tensor<f64>
  %t = mstep.add %step, %one : tensor<i64>, tensor<i64> -> tensor<i64>
  %tf = mstep.cast %t : tensor<i64> -> tensor<f64>
  %first = mstep.eq %tf, %c1 : tensor<f64>, tensor<f64> -> tensor<i1>
  %full = mstep.full %c1 : tensor<f64> -> tensor<f64>
  %omd = mstep.sub %c1, %damp : tensor<f64>, tensor<f64> -> tensor<f64>
  %coef = mstep.where %first, %full, %omd : tensor<i1>, tensor<f64>, tensor<f64> -> tensor<f64>
  %coef32 = mstep.cast %coef : tensor<f64> -> tensor<f32>
  %mom32 = mstep.cast %mom : tensor<f64> -> tensor<f32>
  %0 = mstep.mul %buf, %mom32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %1 = mstep.mul %coef32, %g : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %nb = mstep.add %0, %1 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %2 = mstep.mul %lr32, %nb : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %2 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %t, %nb, %w1 : tensor<i64>, tensor<3xf32>, tensor<3xf32>
}

// -----

// Adam with amsgrad; the bias corrections read the step counter.
// CHECK-LABEL: func.func @adam_amsgrad(
// CHECK-SAME:      %[[STEP:arg[0-9]+]]: tensor<i64>
// CHECK-SAME:      %[[M:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[V:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[VMAX:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[G:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[LR:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[B1:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[B2:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[EPS:arg[0-9]+]]: tensor<f64>
// CHECK-NEXT:    %[[P:[a-z_0-9]+]], %[[S:[a-z_0-9]+]]:3, %[[T:[a-z_0-9]+]] = mstep.multi_tensor_update <adam> params(%[[W]] : tensor<3xf32>) grads(%[[G]] : tensor<3xf32>) states(%[[M]], %[[V]], %[[VMAX]] : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) steps(%[[STEP]]) lr(%[[LR]]) beta1(%[[B1]]) beta2(%[[B2]]) eps(%[[EPS]]) {amsgrad = true}
// CHECK-NEXT:    return %[[T]], %[[S]]#0, %[[S]]#1, %[[S]]#2, %[[P]]
func.func @adam_amsgrad(%step: tensor<i64> {mstep.aliased_result = 0 : i64, mstep.role = "optimizer_state"},
                        %m: tensor<3xf32> {mstep.aliased_result = 1 : i64, mstep.role = "optimizer_state"},
                        %v: tensor<3xf32> {mstep.aliased_result = 2 : i64, mstep.role = "optimizer_state"},
                        %vmax: tensor<3xf32> {mstep.aliased_result = 3 : i64, mstep.role = "optimizer_state"},
                        %w: tensor<3xf32> {mstep.aliased_result = 4 : i64, mstep.role = "parameter"},
                        %g: tensor<3xf32> {mstep.role = "input"},
                        %lr: tensor<f64> {mstep.role = "device_scalar"},
                        %b1: tensor<f64> {mstep.role = "device_scalar"},
                        %b2: tensor<f64> {mstep.role = "device_scalar"},
                        %eps: tensor<f64> {mstep.role = "device_scalar"})
    -> (tensor<i64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %one = mstep.constant 1.000000e+00 : tensor<i64>
  %c1 = mstep.constant 1.000000e+00 : tensor<f64>
  %t = mstep.add %step, %one : tensor<i64>, tensor<i64> -> tensor<i64>
  %b1_32 = mstep.cast %b1 : tensor<f64> -> tensor<f32>
  %0 = mstep.mul %m, %b1_32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %omb1 = mstep.sub %c1, %b1 : tensor<f64>, tensor<f64> -> tensor<f64>
  %omb1_32 = mstep.cast %omb1 : tensor<f64> -> tensor<f32>
  %1 = mstep.mul %omb1_32, %g : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %m1 = mstep.add %0, %1 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %b2_32 = mstep.cast %b2 : tensor<f64> -> tensor<f32>
  %2 = mstep.mul %v, %b2_32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %omb2 = mstep.sub %c1, %b2 : tensor<f64>, tensor<f64> -> tensor<f64>
  %omb2_32 = mstep.cast %omb2 : tensor<f64> -> tensor<f32>
  %3 = mstep.mul %omb2_32, %g : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %4 = mstep.mul %3, %g : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %v1 = mstep.add %2, %4 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %vmax1 = mstep.maximum %vmax, %v1 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %tf = mstep.cast %t : tensor<i64> -> tensor<f64>
  %5 = mstep.pow %b1, %tf : tensor<f64>, tensor<f64> -> tensor<f64>
  %bc1 = mstep.sub %c1, %5 : tensor<f64>, tensor<f64> -> tensor<f64>
  %6 = mstep.div %lr, %bc1 : tensor<f64>, tensor<f64> -> tensor<f64>
  %step_size = mstep.cast %6 : tensor<f64> -> tensor<f32>
  %7 = mstep.mul %step_size, %m1 : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %8 = mstep.sqrt %vmax1 : tensor<3xf32>
  %9 = mstep.pow %b2, %tf : tensor<f64>, tensor<f64> -> tensor<f64>
  %bc2 = mstep.sub %c1, %9 : tensor<f64>, tensor<f64> -> tensor<f64>
  %10 = mstep.sqrt %bc2 : tensor<f64>
  %11 = mstep.cast %10 : tensor<f64> -> tensor<f32>
  %12 = mstep.div %8, %11 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %eps32 = mstep.cast %eps : tensor<f64> -> tensor<f32>
  %den = mstep.add %12, %eps32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %13 = mstep.div %7, %den : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %13 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %t, %m1, %v1, %vmax1, %w1 : tensor<i64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// AdamW with weight decay on an f64 parameter: no casts to the dtype.
// CHECK-LABEL: func.func @adamw_f64(
// CHECK-SAME:      %[[STEP:arg[0-9]+]]: tensor<i64>
// CHECK-SAME:      %[[M:arg[0-9]+]]: tensor<3xf64>
// CHECK-SAME:      %[[V:arg[0-9]+]]: tensor<3xf64>
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<3xf64>
// CHECK-SAME:      %[[G:arg[0-9]+]]: tensor<3xf64>
// CHECK-SAME:      %[[LR:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[WD:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[B1:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[B2:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[EPS:arg[0-9]+]]: tensor<f64>
// CHECK-NEXT:    %[[P:[a-z_0-9]+]], %[[S:[a-z_0-9]+]]:2, %[[T:[a-z_0-9]+]] = mstep.multi_tensor_update <adamw> params(%[[W]] : tensor<3xf64>) grads(%[[G]] : tensor<3xf64>) states(%[[M]], %[[V]] : tensor<3xf64>, tensor<3xf64>) steps(%[[STEP]]) lr(%[[LR]]) beta1(%[[B1]]) beta2(%[[B2]]) eps(%[[EPS]]) weight_decay(%[[WD]]){{$}}
// CHECK-NEXT:    return %[[T]], %[[S]]#0, %[[S]]#1, %[[P]]
func.func @adamw_f64(%step: tensor<i64> {mstep.aliased_result = 0 : i64, mstep.role = "optimizer_state"},
                     %m: tensor<3xf64> {mstep.aliased_result = 1 : i64, mstep.role = "optimizer_state"},
                     %v: tensor<3xf64> {mstep.aliased_result = 2 : i64, mstep.role = "optimizer_state"},
                     %w: tensor<3xf64> {mstep.aliased_result = 3 : i64, mstep.role = "parameter"},
                     %g: tensor<3xf64> {mstep.role = "input"},
                     %lr: tensor<f64> {mstep.role = "device_scalar"},
                     %wd: tensor<f64> {mstep.role = "device_scalar"},
                     %b1: tensor<f64> {mstep.role = "device_scalar"},
                     %b2: tensor<f64> {mstep.role = "device_scalar"},
                     %eps: tensor<f64> {mstep.role = "device_scalar"})
    -> (tensor<i64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>) {
  %one = mstep.constant 1.000000e+00 : tensor<i64>
  %c1 = mstep.constant 1.000000e+00 : tensor<f64>
  %t = mstep.add %step, %one : tensor<i64>, tensor<i64> -> tensor<i64>
  %0 = mstep.mul %lr, %wd : tensor<f64>, tensor<f64> -> tensor<f64>
  %decay = mstep.sub %c1, %0 : tensor<f64>, tensor<f64> -> tensor<f64>
  %base = mstep.mul %w, %decay : tensor<3xf64>, tensor<f64> -> tensor<3xf64>
  %1 = mstep.mul %m, %b1 : tensor<3xf64>, tensor<f64> -> tensor<3xf64>
  %omb1 = mstep.sub %c1, %b1 : tensor<f64>, tensor<f64> -> tensor<f64>
  %2 = mstep.mul %omb1, %g : tensor<f64>, tensor<3xf64> -> tensor<3xf64>
  %m1 = mstep.add %1, %2 : tensor<3xf64>, tensor<3xf64> -> tensor<3xf64>
  %3 = mstep.mul %v, %b2 : tensor<3xf64>, tensor<f64> -> tensor<3xf64>
  %omb2 = mstep.sub %c1, %b2 : tensor<f64>, tensor<f64> -> tensor<f64>
  %4 = mstep.mul %omb2, %g : tensor<f64>, tensor<3xf64> -> tensor<3xf64>
  %5 = mstep.mul %4, %g : tensor<3xf64>, tensor<3xf64> -> tensor<3xf64>
  %v1 = mstep.add %3, %5 : tensor<3xf64>, tensor<3xf64> -> tensor<3xf64>
  %tf = mstep.cast %t : tensor<i64> -> tensor<f64>
  %6 = mstep.pow %b1, %tf : tensor<f64>, tensor<f64> -> tensor<f64>
  %bc1 = mstep.sub %c1, %6 : tensor<f64>, tensor<f64> -> tensor<f64>
  %step_size = mstep.div %lr, %bc1 : tensor<f64>, tensor<f64> -> tensor<f64>
  %7 = mstep.mul %step_size, %m1 : tensor<f64>, tensor<3xf64> -> tensor<3xf64>
  %8 = mstep.sqrt %v1 : tensor<3xf64>
  %9 = mstep.pow %b2, %tf : tensor<f64>, tensor<f64> -> tensor<f64>
  %bc2 = mstep.sub %c1, %9 : tensor<f64>, tensor<f64> -> tensor<f64>
  %10 = mstep.sqrt %bc2 : tensor<f64>
  %11 = mstep.div %8, %10 : tensor<3xf64>, tensor<f64> -> tensor<3xf64>
  %den = mstep.add %11, %eps : tensor<3xf64>, tensor<f64> -> tensor<3xf64>
  %12 = mstep.div %7, %den : tensor<3xf64>, tensor<3xf64> -> tensor<3xf64>
  %w1 = mstep.sub %base, %12 : tensor<3xf64>, tensor<3xf64> -> tensor<3xf64>
  return %t, %m1, %v1, %w1 : tensor<i64>, tensor<3xf64>, tensor<3xf64>, tensor<3xf64>
}

// -----

// Adadelta after clip_grad_norm_ of its only gradient (no stacking): the
// clip folds; the total norm is returned, the clipped gradient is not.
// CHECK-LABEL: func.func @adadelta_clip(
// CHECK-SAME:      %[[STEP:arg[0-9]+]]: tensor<i64>
// CHECK-SAME:      %[[SQ:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[ACC:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[G:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[LR:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[RHO:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[EPS:arg[0-9]+]]: tensor<f64>
// CHECK-NEXT:    %[[P:[a-z_0-9]+]], %[[S:[a-z_0-9]+]]:2, %[[T:[a-z_0-9]+]], %[[N:[a-z_0-9]+]] = mstep.multi_tensor_update <adadelta> params(%[[W]] : tensor<3xf32>) grads(%[[G]] : tensor<3xf32>) states(%[[SQ]], %[[ACC]] : tensor<3xf32>, tensor<3xf32>) steps(%[[STEP]]) lr(%[[LR]]) rho(%[[RHO]]) eps(%[[EPS]]) {max_grad_norm = 5.000000e-01 : f64} -> total_grad_norm tensor<f32>{{$}}
// CHECK-NEXT:    return %[[T]], %[[S]]#0, %[[S]]#1, %[[P]], %[[N]]
func.func @adadelta_clip(%step: tensor<i64> {mstep.aliased_result = 0 : i64, mstep.role = "optimizer_state"},
                         %sq: tensor<3xf32> {mstep.aliased_result = 1 : i64, mstep.role = "optimizer_state"},
                         %acc: tensor<3xf32> {mstep.aliased_result = 2 : i64, mstep.role = "optimizer_state"},
                         %w: tensor<3xf32> {mstep.aliased_result = 3 : i64, mstep.role = "parameter"},
                         %g: tensor<3xf32> {mstep.role = "input"},
                         %lr: tensor<f64> {mstep.role = "device_scalar"},
                         %rho: tensor<f64> {mstep.role = "device_scalar"},
                         %eps: tensor<f64> {mstep.role = "device_scalar"})
    -> (tensor<i64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>) {
  %one = mstep.constant 1.000000e+00 : tensor<i64>
  %c1 = mstep.constant 1.000000e+00 : tensor<f64>
  %tiny = mstep.constant 9.9999999999999995E-7 : tensor<f32>
  %max = mstep.constant 5.000000e-01 : tensor<f32>
  %ones = mstep.constant 1.000000e+00 : tensor<f32>
  %0 = mstep.mul %g, %g : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %1 = mstep.sum %0 {dims = array<i64: 0>, keepdim = false} : tensor<3xf32> -> tensor<f32>
  %total = mstep.sqrt %1 : tensor<f32>
  %2 = mstep.add %total, %tiny : tensor<f32>, tensor<f32> -> tensor<f32>
  %3 = mstep.div %max, %2 : tensor<f32>, tensor<f32> -> tensor<f32>
  %clamped = mstep.minimum %3, %ones : tensor<f32>, tensor<f32> -> tensor<f32>
  %gc = mstep.mul %g, %clamped : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %t = mstep.add %step, %one : tensor<i64>, tensor<i64> -> tensor<i64>
  %rho32 = mstep.cast %rho : tensor<f64> -> tensor<f32>
  %4 = mstep.mul %sq, %rho32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %omr = mstep.sub %c1, %rho : tensor<f64>, tensor<f64> -> tensor<f64>
  %omr32 = mstep.cast %omr : tensor<f64> -> tensor<f32>
  %5 = mstep.mul %omr32, %gc : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %6 = mstep.mul %5, %gc : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %sq1 = mstep.add %4, %6 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %7 = mstep.mul %acc, %rho32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %eps32 = mstep.cast %eps : tensor<f64> -> tensor<f32>
  %8 = mstep.add %acc, %eps32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %9 = mstep.sqrt %8 : tensor<3xf32>
  %10 = mstep.add %sq1, %eps32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %11 = mstep.sqrt %10 : tensor<3xf32>
  %12 = mstep.div %9, %11 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %delta = mstep.mul %12, %gc : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %13 = mstep.mul %omr32, %delta : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %14 = mstep.mul %13, %delta : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %acc1 = mstep.add %7, %14 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %15 = mstep.mul %lr32, %delta : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %15 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %t, %sq1, %acc1, %w1, %total : tensor<i64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<f32>
}

// -----

// clip_grad_norm_ (inf-norm) over two gradients that the step returns (the
// .grad tensors): the op takes the raw gradients, in the order of the
// stacked norms, and returns the clipped ones.
// CHECK-LABEL: func.func @sgd_clip_returns_grads(
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<4x3xf32>
// CHECK-SAME:      %[[B:arg[0-9]+]]: tensor<4xf32>
// CHECK-SAME:      %[[GW:arg[0-9]+]]: tensor<4x3xf32>
// CHECK-SAME:      %[[GB:arg[0-9]+]]: tensor<4xf32>
// CHECK-SAME:      %[[LR:arg[0-9]+]]: tensor<f64>
// CHECK-NEXT:    %[[P:[a-z_0-9]+]]:2, %[[C:[a-z_0-9]+]]:2, %{{[a-z_0-9]+}} = mstep.multi_tensor_update <sgd> params(%[[B]], %[[W]] : tensor<4xf32>, tensor<4x3xf32>) grads(%[[GB]], %[[GW]] : tensor<4xf32>, tensor<4x3xf32>) lr(%[[LR]]) {grad_norm_type = 0x7FF0000000000000 : f64, max_grad_norm = 2.500000e-01 : f64} -> total_grad_norm tensor<f32> clipped_grads(tensor<4xf32>, tensor<4x3xf32>)
// CHECK-NEXT:    return %[[P]]#1, %[[P]]#0, %[[C]]#0, %[[C]]#1
func.func @sgd_clip_returns_grads(%w: tensor<4x3xf32> {mstep.aliased_result = 0 : i64, mstep.role = "parameter"},
                                  %b: tensor<4xf32> {mstep.aliased_result = 1 : i64, mstep.role = "parameter"},
                                  %gw: tensor<4x3xf32> {mstep.role = "input"}, %gb: tensor<4xf32> {mstep.role = "input"},
                                  %lr: tensor<f64> {mstep.role = "device_scalar"})
    -> (tensor<4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x3xf32>) {
  %tiny = mstep.constant 9.9999999999999995E-7 : tensor<f32>
  %max = mstep.constant 2.500000e-01 : tensor<f32>
  %c1 = mstep.constant 1.000000e+00 : tensor<f32>
  %ones = mstep.full %c1 : tensor<f32> -> tensor<f32>
  %0 = mstep.abs %gb : tensor<4xf32>
  %1 = mstep.max %0 {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
  %2 = mstep.reshape %1 : tensor<f32> -> tensor<1xf32>
  %3 = mstep.abs %gw : tensor<4x3xf32>
  %4 = mstep.max %3 {dims = array<i64: 0, 1>, keepdim = false} : tensor<4x3xf32> -> tensor<f32>
  %5 = mstep.reshape %4 : tensor<f32> -> tensor<1xf32>
  %norms = mstep.cat %2, %5 {dim = 0 : i64} : tensor<1xf32>, tensor<1xf32> -> tensor<2xf32>
  %6 = mstep.abs %norms : tensor<2xf32>
  %total = mstep.max %6 {dims = array<i64: 0>, keepdim = false} : tensor<2xf32> -> tensor<f32>
  %7 = mstep.add %total, %tiny : tensor<f32>, tensor<f32> -> tensor<f32>
  %8 = mstep.div %max, %7 : tensor<f32>, tensor<f32> -> tensor<f32>
  %clamped = mstep.minimum %8, %ones : tensor<f32>, tensor<f32> -> tensor<f32>
  %gwc = mstep.mul %gw, %clamped : tensor<4x3xf32>, tensor<f32> -> tensor<4x3xf32>
  %gbc = mstep.mul %gb, %clamped : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %9 = mstep.mul %lr32, %gwc : tensor<f32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %w1 = mstep.sub %w, %9 : tensor<4x3xf32>, tensor<4x3xf32> -> tensor<4x3xf32>
  %10 = mstep.mul %lr32, %gbc : tensor<f32>, tensor<4xf32> -> tensor<4xf32>
  %b1 = mstep.sub %b, %10 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %w1, %b1, %gbc, %gwc : tensor<4x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x3xf32>
}

// -----

// Two optimizers in one graph: one op per rule.
// CHECK-LABEL: func.func @mixed_optimizers(
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[STEP:arg[0-9]+]]: tensor<i64>
// CHECK-SAME:      %[[BUF:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[B:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[GW:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[GB:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[LR:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[LR2:arg[0-9]+]]: tensor<f64>
// CHECK-SAME:      %[[MOM:arg[0-9]+]]: tensor<f64>
// CHECK-NEXT:    %[[P1:[a-z_0-9]+]] = mstep.multi_tensor_update <sgd> params(%[[W]] : tensor<3xf32>) grads(%[[GW]] : tensor<3xf32>) lr(%[[LR]]){{$}}
// CHECK-NEXT:    %[[P2:[a-z_0-9]+]], %[[S:[a-z_0-9]+]], %[[T:[a-z_0-9]+]] = mstep.multi_tensor_update <sgd> params(%[[B]] : tensor<3xf32>) grads(%[[GB]] : tensor<3xf32>) states(%[[BUF]] : tensor<3xf32>) steps(%[[STEP]]) lr(%[[LR2]]) momentum(%[[MOM]]){{$}}
// CHECK-NEXT:    return %[[P1]], %[[T]], %[[S]], %[[P2]]
func.func @mixed_optimizers(%w: tensor<3xf32> {mstep.aliased_result = 0 : i64, mstep.role = "parameter"},
                            %step: tensor<i64> {mstep.aliased_result = 1 : i64, mstep.role = "optimizer_state"},
                            %buf: tensor<3xf32> {mstep.aliased_result = 2 : i64, mstep.role = "optimizer_state"},
                            %b: tensor<3xf32> {mstep.aliased_result = 3 : i64, mstep.role = "parameter"},
                            %gw: tensor<3xf32> {mstep.role = "input"}, %gb: tensor<3xf32> {mstep.role = "input"},
                            %lr: tensor<f64> {mstep.role = "device_scalar"},
                            %lr2: tensor<f64> {mstep.role = "device_scalar"},
                            %mom: tensor<f64> {mstep.role = "device_scalar"})
    -> (tensor<3xf32>, tensor<i64>, tensor<3xf32>, tensor<3xf32>) {
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %0 = mstep.mul %lr32, %gw : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %0 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %one = mstep.constant 1.000000e+00 : tensor<i64>
  %t = mstep.add %step, %one : tensor<i64>, tensor<i64> -> tensor<i64>
  %mom32 = mstep.cast %mom : tensor<f64> -> tensor<f32>
  %1 = mstep.mul %buf, %mom32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %nb = mstep.add %1, %gb : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %lr2_32 = mstep.cast %lr2 : tensor<f64> -> tensor<f32>
  %2 = mstep.mul %lr2_32, %nb : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %b1 = mstep.sub %b, %2 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %w1, %t, %nb, %b1 : tensor<3xf32>, tensor<i64>, tensor<3xf32>, tensor<3xf32>
}

// -----

// Negative: the weight-decayed gradient is also returned. Fusing would
// compute it twice, so the chain stays as it is.
// CHECK-LABEL: func.func @extra_user(
// CHECK-NOT:     mstep.multi_tensor_update
// CHECK:         %[[D:.*]] = mstep.add
// CHECK:         %[[NEW:.*]] = mstep.sub
// CHECK-NEXT:    return %[[NEW]], %[[D]]
func.func @extra_user(%w: tensor<3xf32> {mstep.aliased_result = 0 : i64, mstep.role = "parameter"},
                      %g: tensor<3xf32> {mstep.role = "input"},
                      %lr: tensor<f64> {mstep.role = "device_scalar"},
                      %wd: tensor<f64> {mstep.role = "device_scalar"}) -> (tensor<3xf32>, tensor<3xf32>) {
  %wd32 = mstep.cast %wd : tensor<f64> -> tensor<f32>
  %0 = mstep.mul %wd32, %w : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %d = mstep.add %g, %0 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %1 = mstep.mul %lr32, %d : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %1 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %w1, %d : tensor<3xf32>, tensor<3xf32>
}

// -----

// Negative: Adadelta without eps under the first square root is no rule
// lib/api/optim records; it stays as it is (and its delta, computed from
// state, is not taken for a gradient of plain SGD).
// CHECK-LABEL: func.func @non_matching(
// CHECK-NOT:     mstep.multi_tensor_update
// CHECK-COUNT-2: mstep.sqrt
// CHECK-NOT:     mstep.multi_tensor_update
// CHECK:         return
func.func @non_matching(%step: tensor<i64> {mstep.aliased_result = 0 : i64, mstep.role = "optimizer_state"},
                        %sq: tensor<3xf32> {mstep.aliased_result = 1 : i64, mstep.role = "optimizer_state"},
                        %acc: tensor<3xf32> {mstep.aliased_result = 2 : i64, mstep.role = "optimizer_state"},
                        %w: tensor<3xf32> {mstep.aliased_result = 3 : i64, mstep.role = "parameter"},
                        %g: tensor<3xf32> {mstep.role = "input"},
                        %lr: tensor<f64> {mstep.role = "device_scalar"},
                        %rho: tensor<f64> {mstep.role = "device_scalar"},
                        %eps: tensor<f64> {mstep.role = "device_scalar"})
    -> (tensor<i64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %one = mstep.constant 1.000000e+00 : tensor<i64>
  %c1 = mstep.constant 1.000000e+00 : tensor<f64>
  %t = mstep.add %step, %one : tensor<i64>, tensor<i64> -> tensor<i64>
  %rho32 = mstep.cast %rho : tensor<f64> -> tensor<f32>
  %0 = mstep.mul %sq, %rho32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %omr = mstep.sub %c1, %rho : tensor<f64>, tensor<f64> -> tensor<f64>
  %omr32 = mstep.cast %omr : tensor<f64> -> tensor<f32>
  %1 = mstep.mul %omr32, %g : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %2 = mstep.mul %1, %g : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %sq1 = mstep.add %0, %2 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %3 = mstep.mul %acc, %rho32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %eps32 = mstep.cast %eps : tensor<f64> -> tensor<f32>
  %4 = mstep.sqrt %acc : tensor<3xf32>
  %5 = mstep.add %sq1, %eps32 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %6 = mstep.sqrt %5 : tensor<3xf32>
  %7 = mstep.div %4, %6 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %delta = mstep.mul %7, %g : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %8 = mstep.mul %omr32, %delta : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %9 = mstep.mul %8, %delta : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %acc1 = mstep.add %3, %9 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %10 = mstep.mul %lr32, %delta : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %10 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %t, %sq1, %acc1, %w1 : tensor<i64>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// Negative for one parameter only: %w's scaled gradient is also returned,
// so %w keeps its chain; %b still fuses.
// CHECK-LABEL: func.func @partial(
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[B:arg[0-9]+]]: tensor<2xf32>
// CHECK-SAME:      %[[GW:arg[0-9]+]]: tensor<3xf32>
// CHECK-SAME:      %[[GB:arg[0-9]+]]: tensor<2xf32>
// CHECK-SAME:      %[[LR:arg[0-9]+]]: tensor<f64>
// CHECK-NEXT:    %[[P:[a-z_0-9]+]] = mstep.multi_tensor_update <sgd> params(%[[B]] : tensor<2xf32>) grads(%[[GB]] : tensor<2xf32>) lr(%[[LR]]){{$}}
// CHECK-NEXT:    %[[LR32:.*]] = mstep.cast %[[LR]] : tensor<f64> -> tensor<f32>
// CHECK-NEXT:    %[[STEP:.*]] = mstep.mul %[[LR32]], %[[GW]]
// CHECK-NEXT:    %[[W1:.*]] = mstep.sub %[[W]], %[[STEP]]
// CHECK-NEXT:    return %[[W1]], %[[P]], %[[STEP]]
func.func @partial(%w: tensor<3xf32> {mstep.aliased_result = 0 : i64, mstep.role = "parameter"},
                   %b: tensor<2xf32> {mstep.aliased_result = 1 : i64, mstep.role = "parameter"},
                   %gw: tensor<3xf32> {mstep.role = "input"}, %gb: tensor<2xf32> {mstep.role = "input"},
                   %lr: tensor<f64> {mstep.role = "device_scalar"})
    -> (tensor<3xf32>, tensor<2xf32>, tensor<3xf32>) {
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %0 = mstep.mul %lr32, %gw : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %0 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  %1 = mstep.mul %lr32, %gb : tensor<f32>, tensor<2xf32> -> tensor<2xf32>
  %b1 = mstep.sub %b, %1 : tensor<2xf32>, tensor<2xf32> -> tensor<2xf32>
  return %w1, %b1, %0 : tensor<3xf32>, tensor<2xf32>, tensor<3xf32>
}

// -----

// Negative for the clip only: its coefficient is also returned, so the
// clip stays and the op takes the clipped gradients.
// CHECK-LABEL: func.func @clip_extra_user(
// CHECK-SAME:      %[[W:arg[0-9]+]]: tensor<3xf32>
// CHECK:         %[[CLAMPED:.*]] = mstep.minimum
// CHECK-NEXT:    %[[GC:.*]] = mstep.mul %{{.*}}, %[[CLAMPED]]
// CHECK-NEXT:    %[[P:[a-z_0-9]+]] = mstep.multi_tensor_update <sgd> params(%[[W]] : tensor<3xf32>) grads(%[[GC]] : tensor<3xf32>) lr(%{{[a-z0-9]+}}){{$}}
// CHECK-NEXT:    return %[[P]], %[[CLAMPED]]
func.func @clip_extra_user(%w: tensor<3xf32> {mstep.aliased_result = 0 : i64, mstep.role = "parameter"},
                           %g: tensor<3xf32> {mstep.role = "input"},
                           %lr: tensor<f64> {mstep.role = "device_scalar"})
    -> (tensor<3xf32>, tensor<f32>) {
  %tiny = mstep.constant 9.9999999999999995E-7 : tensor<f32>
  %max = mstep.constant 1.000000e+00 : tensor<f32>
  %0 = mstep.abs %g : tensor<3xf32>
  %total = mstep.sum %0 {dims = array<i64: 0>, keepdim = false} : tensor<3xf32> -> tensor<f32>
  %1 = mstep.add %total, %tiny : tensor<f32>, tensor<f32> -> tensor<f32>
  %2 = mstep.div %max, %1 : tensor<f32>, tensor<f32> -> tensor<f32>
  %clamped = mstep.minimum %2, %max : tensor<f32>, tensor<f32> -> tensor<f32>
  %gc = mstep.mul %g, %clamped : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %3 = mstep.mul %lr32, %gc : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %3 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %w1, %clamped : tensor<3xf32>, tensor<f32>
}

// -----

// Negative: a parameter the step does not update in place (no
// mstep.aliased_result) has no chain to fuse.
// CHECK-LABEL: func.func @not_in_place(
// CHECK-NOT:     mstep.multi_tensor_update
// CHECK:         mstep.sub
func.func @not_in_place(%w: tensor<3xf32> {mstep.role = "parameter"}, %g: tensor<3xf32> {mstep.role = "input"},
                        %lr: tensor<f64> {mstep.role = "device_scalar"}) -> tensor<3xf32> {
  %lr32 = mstep.cast %lr : tensor<f64> -> tensor<f32>
  %0 = mstep.mul %lr32, %g : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  %w1 = mstep.sub %w, %0 : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return %w1 : tensor<3xf32>
}
