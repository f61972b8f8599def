// StableHLO in: a module in the generic op form JAX prints becomes the
// mstep module of func @step, one or a few mstep ops per StableHLO op; the
// result passes the mstep verifier and the passes given run on it.
// RUN: mstep-opt --mstep-import-stablehlo %s | FileCheck %s
// RUN: mstep-opt --mstep-import-stablehlo %s --mstep-pipeline=ref | FileCheck %s --check-prefix=PIPELINE

// CHECK-LABEL: func.func @step(
// CHECK-SAME: %arg0: tensor<2x3x4xf32> {mstep.name = "x", mstep.role = "input"}
// CHECK-SAME: %arg1: tensor<2x4x5xf32> {mstep.aliased_result = 1 : i64, mstep.name = "arg1", mstep.role = "input"}
// CHECK-SAME: %arg2: tensor<5xf32> {mstep.name = "arg2", mstep.role = "input"}
// CHECK-SAME: -> (tensor<2x5xf32> {mstep.name = "result[0]"}, tensor<2x4x5xf32> {mstep.name = "result1"}, tensor<3xi32> {mstep.name = "result2"})
"builtin.module"() <{sym_name = "jit_f"}> ({
  "func.func"() <{arg_attrs = [{mstep.name = "x"}, {tf.aliasing_output = 1 : i32}, {}], function_type = (tensor<2x3x4xf32>, tensor<2x4x5xf32>, tensor<5xf32>) -> (tensor<2x5xf32>, tensor<2x4x5xf32>, tensor<3xi32>), res_attrs = [{jax.result_info = "result[0]"}, {}, {}], sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%x: tensor<2x3x4xf32>, %w: tensor<2x4x5xf32>, %b: tensor<5xf32>):
    // A batched matmul: batch dims [0] x [0], contracting [2] x [1].
    // CHECK: mstep.matmul %arg0, %arg1 : tensor<2x3x4xf32>, tensor<2x4x5xf32> -> tensor<2x3x5xf32>
    %0 = "stablehlo.dot_general"(%x, %w) <{dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0], rhs_batching_dimensions = [0], lhs_contracting_dimensions = [2], rhs_contracting_dimensions = [1]>, precision_config = [#stablehlo<precision DEFAULT>, #stablehlo<precision DEFAULT>]}> : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
    // [5] -> [2, 3, 5]: expand adds the leading dims.
    // CHECK: %[[BB:.*]] = mstep.expand %arg2 : tensor<5xf32> -> tensor<2x3x5xf32>
    %1 = "stablehlo.broadcast_in_dim"(%b) <{broadcast_dimensions = array<i64: 2>}> : (tensor<5xf32>) -> tensor<2x3x5xf32>
    // CHECK: %[[Y:.*]] = mstep.add %{{.*}}, %[[BB]] : tensor<2x3x5xf32>, tensor<2x3x5xf32> -> tensor<2x3x5xf32>
    %2 = "stablehlo.add"(%0, %1) : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
    // A private function, inlined: relu as compare and select.
    // CHECK: %[[ZERO:.*]] = mstep.constant 0.000000e+00 : tensor<f32>
    // CHECK: %[[ZEROS:.*]] = mstep.full %[[ZERO]] : tensor<f32> -> tensor<2x3x5xf32>
    // CHECK: %[[POS:.*]] = mstep.gt %[[Y]], %[[ZEROS]] : tensor<2x3x5xf32>, tensor<2x3x5xf32> -> tensor<2x3x5xi1>
    // CHECK: %[[RELU:.*]] = mstep.where %[[POS]], %[[Y]], %[[ZEROS]] : tensor<2x3x5xi1>, tensor<2x3x5xf32>, tensor<2x3x5xf32> -> tensor<2x3x5xf32>
    %3 = "func.call"(%2) <{callee = @relu}> : (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
    // max over dim 1 from -inf (its identity: no combine), then a sum from 1.5 (combined).
    // CHECK: %[[MAX:.*]] = mstep.max %[[RELU]] {dims = array<i64: 1>, keepdim = false} : tensor<2x3x5xf32> -> tensor<2x5xf32>
    // CHECK-NOT: mstep.maximum
    %ninf = "stablehlo.constant"() <{value = dense<0xFF800000> : tensor<f32>}> : () -> tensor<f32>
    %4 = "stablehlo.reduce"(%3, %ninf) <{dimensions = array<i64: 1>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %m = "stablehlo.maximum"(%l, %r) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%m) : (tensor<f32>) -> ()
    }) : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x5xf32>
    // CHECK: %[[INIT:.*]] = mstep.constant 1.500000e+00 : tensor<f32>
    // CHECK: %[[SUM:.*]] = mstep.sum %[[RELU]] {dims = array<i64: 1>, keepdim = false} : tensor<2x3x5xf32> -> tensor<2x5xf32>
    // CHECK: %[[INITS:.*]] = mstep.expand %[[INIT]] : tensor<f32> -> tensor<2x5xf32>
    // CHECK: mstep.add %[[SUM]], %[[INITS]] : tensor<2x5xf32>, tensor<2x5xf32> -> tensor<2x5xf32>
    %init = "stablehlo.constant"() <{value = dense<1.5> : tensor<f32>}> : () -> tensor<f32>
    %5 = "stablehlo.reduce"(%3, %init) <{dimensions = array<i64: 1>}> ({
    ^bb0(%l: tensor<f32>, %r: tensor<f32>):
      %s = "stablehlo.add"(%r, %l) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) : (tensor<2x3x5xf32>, tensor<f32>) -> tensor<2x5xf32>
    %6 = "stablehlo.subtract"(%5, %4) : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
    // broadcast_in_dim with dims out of order: a permute first.
    // CHECK: mstep.permute %{{.*}} {perm = array<i64: 1, 0>} : tensor<2x5xf32> -> tensor<5x2xf32>
    // CHECK: mstep.expand %{{.*}} : tensor<5x2xf32> -> tensor<3x5x2xf32>
    %7 = "stablehlo.broadcast_in_dim"(%6) <{broadcast_dimensions = array<i64: 2, 1>}> : (tensor<2x5xf32>) -> tensor<3x5x2xf32>
    // CHECK: mstep.permute %{{.*}} {perm = array<i64: 2, 1, 0>} : tensor<3x5x2xf32> -> tensor<2x5x3xf32>
    %8 = "stablehlo.transpose"(%7) <{permutation = array<i64: 2, 1, 0>}> : (tensor<3x5x2xf32>) -> tensor<2x5x3xf32>
    // CHECK: mstep.slice %{{.*}} {dim = 2 : i64, end = 1 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x5x3xf32> -> tensor<2x5x1xf32>
    %9 = "stablehlo.slice"(%8) <{start_indices = array<i64: 0, 0, 0>, limit_indices = array<i64: 2, 5, 1>, strides = array<i64: 1, 1, 1>}> : (tensor<2x5x3xf32>) -> tensor<2x5x1xf32>
    // CHECK: mstep.reshape %{{.*}} : tensor<2x5x1xf32> -> tensor<2x5xf32>
    %10 = "stablehlo.reshape"(%9) : (tensor<2x5x1xf32>) -> tensor<2x5xf32>
    // SGD on the donated argument: w - 0.5 * w.
    %half = "stablehlo.constant"() <{value = dense<0.5> : tensor<2x4x5xf32>}> : () -> tensor<2x4x5xf32>
    %11 = "stablehlo.multiply"(%half, %w) : (tensor<2x4x5xf32>, tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
    %12 = "stablehlo.subtract"(%w, %11) : (tensor<2x4x5xf32>, tensor<2x4x5xf32>) -> tensor<2x4x5xf32>
    // iota + a non-splat constant, converted to i32.
    // CHECK: mstep.arange {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<3xf32>
    %13 = "stablehlo.iota"() <{iota_dimension = 0 : i64}> : () -> tensor<3xf32>
    // CHECK: %[[C0:.*]] = mstep.constant 1.000000e+00 : tensor<f32>
    // CHECK: %[[E0:.*]] = mstep.reshape %[[C0]] : tensor<f32> -> tensor<1xf32>
    // CHECK: %[[C1:.*]] = mstep.constant 2.000000e+00 : tensor<f32>
    // CHECK: %[[E1:.*]] = mstep.reshape %[[C1]] : tensor<f32> -> tensor<1xf32>
    // CHECK: %[[C2:.*]] = mstep.constant -3.500000e+00 : tensor<f32>
    // CHECK: %[[E2:.*]] = mstep.reshape %[[C2]] : tensor<f32> -> tensor<1xf32>
    // CHECK: mstep.cat %[[E0]], %[[E1]], %[[E2]] {dim = 0 : i64} : tensor<1xf32>, tensor<1xf32>, tensor<1xf32> -> tensor<3xf32>
    %14 = "stablehlo.constant"() <{value = dense<[1.0, 2.0, -3.5]> : tensor<3xf32>}> : () -> tensor<3xf32>
    %15 = "stablehlo.multiply"(%13, %14) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    // CHECK: mstep.cast %{{.*}} : tensor<3xf32> -> tensor<3xi32>
    %16 = "stablehlo.convert"(%15) : (tensor<3xf32>) -> tensor<3xi32>
    // CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x5xf32>, tensor<2x4x5xf32>, tensor<3xi32>
    "func.return"(%10, %12, %16) : (tensor<2x5xf32>, tensor<2x4x5xf32>, tensor<3xi32>) -> ()
  }) : () -> ()
  "func.func"() <{function_type = (tensor<2x3x5xf32>) -> tensor<2x3x5xf32>, sym_name = "relu", sym_visibility = "private"}> ({
  ^bb0(%y: tensor<2x3x5xf32>):
    %z = "stablehlo.constant"() <{value = dense<0.0> : tensor<2x3x5xf32>}> : () -> tensor<2x3x5xf32>
    %p = "stablehlo.compare"(%y, %z) <{compare_type = #stablehlo<comparison_type FLOAT>, comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xi1>
    %r = "stablehlo.select"(%p, %y, %z) : (tensor<2x3x5xi1>, tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<2x3x5xf32>
    "func.return"(%r) : (tensor<2x3x5xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// PIPELINE-LABEL: func.func @step(
// PIPELINE: mstep.matmul
