// The trivial folders of the mstep dialect, run through -canonicalize.
// RUN: mstep-opt %s -split-input-file -canonicalize | FileCheck %s

// CHECK-LABEL: func.func @reshape_to_same_shape(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK-NEXT: return %[[X]]
func.func @reshape_to_same_shape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mstep.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_of_reshape(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK-NEXT: %[[R:.*]] = mstep.reshape %[[X]] : tensor<2x3xf32> -> tensor<3x2xf32>
// CHECK-NEXT: return %[[R]]
func.func @reshape_of_reshape(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = mstep.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %1 = mstep.reshape %0 : tensor<6xf32> -> tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}

// -----

// CHECK-LABEL: func.func @cast_to_same_type(
// CHECK-SAME: %[[X:.*]]: tensor<4xbf16>
// CHECK-NEXT: return %[[X]]
func.func @cast_to_same_type(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = mstep.cast %x : tensor<4xbf16> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

// -----

// CHECK-LABEL: func.func @cast_is_kept(
// CHECK-NEXT: mstep.cast
func.func @cast_is_kept(%x: tensor<4xbf16>) -> tensor<4xf32> {
  %0 = mstep.cast %x : tensor<4xbf16> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @identity_permute(
// CHECK-SAME: %[[X:.*]]: tensor<2x3x4xf32>
// CHECK-NEXT: return %[[X]]
func.func @identity_permute(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = mstep.permute %x {perm = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// CHECK-LABEL: func.func @expand_to_same_shape(
// CHECK-SAME: %[[X:.*]]: tensor<2x3xf32>
// CHECK-NEXT: return %[[X]]
func.func @expand_to_same_shape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mstep.expand %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// Constants are uniqued per value and type (ConstantLike).
// CHECK-LABEL: func.func @constants_are_uniqued(
// CHECK-DAG: %[[C:.*]] = mstep.constant 2.000000e+00 : tensor<f32>
// CHECK-DAG: %[[D:.*]] = mstep.constant 2.000000e+00 : tensor<f64>
// CHECK: mstep.mul %{{.*}}, %[[C]]
// CHECK: mstep.mul %{{.*}}, %[[C]]
// CHECK: return {{.*}}, %[[D]]
func.func @constants_are_uniqued(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<f64>) {
  %c0 = mstep.constant 2.0 : tensor<f32>
  %0 = mstep.mul %x, %c0 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %c1 = mstep.constant 2.0 : tensor<f32>
  %1 = mstep.mul %0, %c1 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %c2 = mstep.constant 2.0 : tensor<f64>
  return %1, %c2 : tensor<3xf32>, tensor<f64>
}
