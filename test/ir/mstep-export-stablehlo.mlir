// mstep-opt --mstep-export-stablehlo: a small training step (linear, relu,
// dropout, log_softmax, nll_loss, an SGD update of the donated weight) as
// StableHLO text. The consumers (XLA, IREE) are run by the interop tests
// (test/interop); this checks the text: the ops, their broadcasts, the
// reduce regions and the aliasing of the donated argument.
// RUN: mstep-opt --mstep-export-stablehlo %s | FileCheck %s

// CHECK-LABEL: module @mstep {
// The only function is @main (XLA runs @main); the donated weight aliases
// result 1, as JAX marks donated buffers.
// CHECK: func.func public @main(%arg0: tensor<4x3xf32> {mstep.role = "input"}, %arg1: tensor<2x3xf32> {tf.aliasing_output = 1 : i32, mstep.role = "parameter"}, %arg2: tensor<4xi64> {mstep.role = "input"}, %arg3: tensor<2xi64> {mstep.role = "rng_state"}, %arg4: tensor<f32> {mstep.role = "device_scalar"}) -> (tensor<f32>, tensor<2x3xf32>) {
func.func @step(%x: tensor<4x3xf32> {mstep.role = "input"},
                %w: tensor<2x3xf32> {mstep.role = "parameter", mstep.aliased_result = 1 : i64},
                %y: tensor<4xi64> {mstep.role = "input"},
                %rng: tensor<2xi64> {mstep.role = "rng_state"},
                %lr: tensor<f32> {mstep.role = "device_scalar"}) -> (tensor<f32>, tensor<2x3xf32>) {
  // CHECK: %[[WT:.*]] = "stablehlo.transpose"(%arg1) {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %wt = mstep.permute %w {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  // CHECK: %[[H:.*]] = "stablehlo.dot_general"(%arg0, %[[WT]]) {dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>
  // CHECK-SAME: -> tensor<4x2xf32>
  %h = mstep.matmul %x, %wt : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  // relu: max with a zero splat.
  // CHECK: %[[ZERO:.*]] = "stablehlo.constant"() {value = dense<0x00000000> : tensor<f32>}
  // CHECK: %[[ZEROS:.*]] = "stablehlo.broadcast_in_dim"(%[[ZERO]]) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<4x2xf32>
  // CHECK: %[[R:.*]] = "stablehlo.maximum"(%[[H]], %[[ZEROS]])
  %r = mstep.relu %h : tensor<4x2xf32>
  // dropout: Philox4x32-10 on (seed, offset + 5 + i), ten rounds of
  // 32x32->64-bit products, kept where (word >> 8) >= ceil(p * 2^24).
  // CHECK: "stablehlo.bitcast_convert"(%arg3) : (tensor<2xi64>) -> tensor<2xui64>
  // CHECK: value = dense<5> : tensor<ui64>
  // CHECK: "stablehlo.iota"() {iota_dimension = 0 : i64} : () -> tensor<8xui64>
  // The multipliers 0xD2511F53, 0xCD9E8D57 and key increments 0x9E3779B9,
  // 0xBB67AE85 of Philox4x32 (core/Philox.h), then two products a round.
  // CHECK: value = dense<3528531795> : tensor<ui64>
  // CHECK: value = dense<3449720151> : tensor<ui64>
  // CHECK: value = dense<2654435769> : tensor<ui32>
  // CHECK: value = dense<3144134277> : tensor<ui32>
  // CHECK-COUNT-20: "stablehlo.multiply"({{.*}}) : (tensor<8xui64>, tensor<8xui64>) -> tensor<8xui64>
  // CHECK: value = dense<8388608> : tensor<ui32>
  // CHECK: "stablehlo.compare"({{.*}}) {compare_type = #stablehlo<comparison_type UNSIGNED>, comparison_direction = #stablehlo<comparison_direction GE>} : (tensor<8xui32>, tensor<8xui32>) -> tensor<8xi1>
  // CHECK: %[[KEEP:.*]] = "stablehlo.reshape"({{.*}}) : (tensor<8xi1>) -> tensor<4x2xi1>
  // The scale 1 / (1 - 0.5) = 2.
  // CHECK: value = dense<0x40000000> : tensor<f32>
  // CHECK: %[[SCALE:.*]] = "stablehlo.select"(%[[KEEP]],
  // CHECK: %[[D:.*]] = "stablehlo.multiply"(%[[R]], %[[SCALE]])
  %d = mstep.dropout %r, %rng {offset = 5 : i64, p = 5.000000e-01 : f64} : tensor<4x2xf32>
  // log_softmax over dim 1: max-reduce, subtract, exp, sum-reduce, log.
  // CHECK: %[[M:.*]] = "stablehlo.reduce"(%[[D]], %{{.*}}) ({
  // CHECK-NEXT: ^bb0(%lhs: tensor<f32>, %rhs: tensor<f32>):
  // CHECK-NEXT: %r = "stablehlo.maximum"(%lhs, %rhs) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK-NEXT: "stablehlo.return"(%r) : (tensor<f32>) -> ()
  // CHECK-NEXT: }) {dimensions = array<i64: 1>} : (tensor<4x2xf32>, tensor<f32>) -> tensor<4xf32>
  // CHECK: "stablehlo.broadcast_in_dim"(%[[M]]) {broadcast_dimensions = array<i64: 0>} : (tensor<4xf32>) -> tensor<4x2xf32>
  // CHECK: "stablehlo.exponential"
  // CHECK: "stablehlo.add"(%lhs, %rhs)
  // CHECK: "stablehlo.log"
  %lp = mstep.log_softmax %d {dim = 1 : i64} : tensor<4x2xf32>
  // nll_loss: the target's column picked by iota == target, ignored rows
  // masked, the mean over the rows that count.
  // CHECK: "stablehlo.iota"() {iota_dimension = 1 : i64} : () -> tensor<4x2xi64>
  // CHECK: comparison_direction = #stablehlo<comparison_direction EQ>
  // CHECK: value = dense<-100> : tensor<i64>
  // CHECK: comparison_direction = #stablehlo<comparison_direction NE>
  // CHECK: "stablehlo.negate"
  // CHECK: %[[LOSS:.*]] = "stablehlo.divide"({{.*}}) : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %loss = mstep.nll_loss %lp, %y {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<4x2xf32>, tensor<4xi64> -> tensor<f32>
  // The update w - lr * w (a stand-in for the gradient): the 0-d rate is
  // broadcast to the weight's shape.
  // CHECK: %[[LRB:.*]] = "stablehlo.broadcast_in_dim"(%arg4) {broadcast_dimensions = array<i64>} : (tensor<f32>) -> tensor<2x3xf32>
  // CHECK: %[[STEP:.*]] = "stablehlo.multiply"(%arg1, %[[LRB]])
  // CHECK: %[[NEW:.*]] = "stablehlo.subtract"(%arg1, %[[STEP]])
  %s = mstep.mul %w, %lr : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %nw = mstep.sub %w, %s : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: return %[[LOSS]], %[[NEW]] : tensor<f32>, tensor<2x3xf32>
  return %loss, %nw : tensor<f32>, tensor<2x3xf32>
}
