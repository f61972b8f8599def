// StableHLO in, the pretty op form (what jax.jit(f).lower(...).as_text()
// prints): each supported op's syntax reads into the same mstep ops as its
// generic form (mstep-import-stablehlo.mlir).
// RUN: mstep-opt --mstep-import-stablehlo %s | FileCheck %s

module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  // CHECK-LABEL: func.func @step(
  // CHECK-SAME: %arg0: tensor<2x3x4xf32> {mstep.name = "arg0", mstep.role = "input"}
  // CHECK-SAME: %arg1: tensor<2x4x6xf32> {mstep.aliased_result = 1 : i64
  func.func public @main(%x: tensor<2x3x4xf32>, %w: tensor<2x4x6xf32> {tf.aliasing_output = 1 : i32}, %b: tensor<6xf32>) -> (tensor<2x3xf32> {jax.result_info = "result[0]"}, tensor<2x4x6xf32> {jax.result_info = "result[1]"}, tensor<3x4xi32>) {
    // CHECK: %[[MM:.*]] = mstep.matmul %arg0, %arg1 : tensor<2x3x4xf32>, tensor<2x4x6xf32> -> tensor<2x3x6xf32>
    %0 = stablehlo.dot_general %x, %w, batching_dims = [0] x [0], contracting_dims = [2] x [1], precision = [DEFAULT, DEFAULT] : (tensor<2x3x4xf32>, tensor<2x4x6xf32>) -> tensor<2x3x6xf32>
    // CHECK: %[[B2:.*]] = mstep.expand %arg2 : tensor<6xf32> -> tensor<2x3x6xf32>
    %1 = stablehlo.broadcast_in_dim %b, dims = [2] : (tensor<6xf32>) -> tensor<2x3x6xf32>
    // CHECK: %[[Y:.*]] = mstep.add %[[MM]], %[[B2]] : tensor<2x3x6xf32>, tensor<2x3x6xf32> -> tensor<2x3x6xf32>
    %2 = stablehlo.add %0, %1 : tensor<2x3x6xf32>
    // CHECK: %[[Z:.*]] = mstep.constant 0.000000e+00 : tensor<f32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    // CHECK: %[[ZS:.*]] = mstep.expand %[[Z]] : tensor<f32> -> tensor<2x3x6xf32>
    %3 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<f32>) -> tensor<2x3x6xf32>
    // CHECK: %[[P:.*]] = mstep.ge %[[Y]], %[[ZS]] : tensor<2x3x6xf32>, tensor<2x3x6xf32> -> tensor<2x3x6xi1>
    %4 = stablehlo.compare  GE, %2, %3,  FLOAT : (tensor<2x3x6xf32>, tensor<2x3x6xf32>) -> tensor<2x3x6xi1>
    // CHECK: %[[R:.*]] = mstep.where %[[P]], %[[Y]], %[[ZS]] : tensor<2x3x6xi1>, tensor<2x3x6xf32>, tensor<2x3x6xf32> -> tensor<2x3x6xf32>
    %5 = stablehlo.select %4, %2, %3 : tensor<2x3x6xi1>, tensor<2x3x6xf32>
    // The compact reduce, then the one with its reducer region.
    // CHECK: %[[S:.*]] = mstep.sum %[[R]] {dims = array<i64: 2>, keepdim = false} : tensor<2x3x6xf32> -> tensor<2x3xf32>
    %6 = stablehlo.reduce(%5 init: %cst) applies stablehlo.add across dimensions = [2] : (tensor<2x3x6xf32>, tensor<f32>) -> tensor<2x3xf32>
    %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
    // CHECK: %[[M:.*]] = mstep.max %[[R]] {dims = array<i64: 2>, keepdim = false} : tensor<2x3x6xf32> -> tensor<2x3xf32>
    %7 = stablehlo.reduce(%5 init: %cst_0) across dimensions = [2] : (tensor<2x3x6xf32>, tensor<f32>) -> tensor<2x3xf32>
     reducer(%arg3: tensor<f32>, %arg4: tensor<f32>)  {
      %m = stablehlo.maximum %arg3, %arg4 : tensor<f32>
      stablehlo.return %m : tensor<f32>
    }
    // CHECK: %[[D:.*]] = mstep.div %[[S]], %[[M]] : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %8 = stablehlo.divide %6, %7 : tensor<2x3xf32>
    // CHECK: mstep.slice %arg1 {dim = 2 : i64, end = 6 : i64, start = 0 : i64, step = 2 : i64} : tensor<2x4x6xf32> -> tensor<2x4x3xf32>
    %9 = stablehlo.slice %w [0:2, 0:4, 0:6:2] : (tensor<2x4x6xf32>) -> tensor<2x4x3xf32>
    %10 = stablehlo.slice %w [0:2, 0:4, 1:6:2] : (tensor<2x4x6xf32>) -> tensor<2x4x3xf32>
    // CHECK: mstep.cat %{{.*}}, %{{.*}} {dim = 2 : i64} : tensor<2x4x3xf32>, tensor<2x4x3xf32> -> tensor<2x4x6xf32>
    %11 = stablehlo.concatenate %9, %10, dim = 2 : (tensor<2x4x3xf32>, tensor<2x4x3xf32>) -> tensor<2x4x6xf32>
    // CHECK: mstep.rsqrt %{{.*}} : tensor<2x4x6xf32>
    %12 = stablehlo.rsqrt %11 : tensor<2x4x6xf32>
    // CHECK: mstep.arange {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<4xi32>
    // CHECK: mstep.reshape %{{.*}} : tensor<4xi32> -> tensor<1x4xi32>
    // CHECK: mstep.expand %{{.*}} : tensor<1x4xi32> -> tensor<3x4xi32>
    %13 = stablehlo.iota dim = 1 : tensor<3x4xi32>
    // CHECK: mstep.permute %{{.*}} {perm = array<i64: 1, 0>} : tensor<3x4xi32> -> tensor<4x3xi32>
    %14 = stablehlo.transpose %13, dims = [1, 0] : (tensor<3x4xi32>) -> tensor<4x3xi32>
    // CHECK: mstep.reshape %{{.*}} : tensor<4x3xi32> -> tensor<3x4xi32>
    %15 = stablehlo.reshape %14 : (tensor<4x3xi32>) -> tensor<3x4xi32>
    // A convert to the same type is no op.
    // CHECK-NOT: mstep.cast
    %16 = stablehlo.convert %15 : tensor<3x4xi32>
    // CHECK: return %[[D]], %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x4x6xf32>, tensor<3x4xi32>
    return %8, %12, %16 : tensor<2x3xf32>, tensor<2x4x6xf32>, tensor<3x4xi32>
  }
}
