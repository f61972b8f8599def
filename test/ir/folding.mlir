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

// -----

// CHECK-LABEL: func.func @multiply_by_one(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3xf32>
// CHECK-NEXT: return %[[X]], %[[X]], %[[X]], %[[X]]
func.func @multiply_by_one(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %one = mstep.constant 1.0 : tensor<f32>
  %zero = mstep.constant 0.0 : tensor<f32>
  %0 = mstep.mul %x, %one : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %1 = mstep.mul %one, %x : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = mstep.div %x, %one : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %3 = mstep.sub %x, %zero : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// Not folded: adding +0 turns -0 into +0; a constant that broadcasts x to a
// larger shape; dividing 1 by x.
// CHECK-LABEL: func.func @identities_that_do_not_fold(
// CHECK: mstep.add
// CHECK: mstep.mul
// CHECK: mstep.div
func.func @identities_that_do_not_fold(%x: tensor<3xf32>, %one: tensor<2x3xf32>) -> (tensor<3xf32>, tensor<2x3xf32>, tensor<3xf32>) {
  %zero = mstep.constant 0.0 : tensor<f32>
  %c1 = mstep.constant 1.0 : tensor<f32>
  %ones = mstep.expand %c1 : tensor<f32> -> tensor<2x3xf32>
  %0 = mstep.add %x, %zero : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %1 = mstep.mul %x, %ones : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = mstep.div %c1, %x : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  return %0, %1, %2 : tensor<3xf32>, tensor<2x3xf32>, tensor<3xf32>
}

// -----

// CHECK-LABEL: func.func @double_negation(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xi32>
// CHECK-NEXT: return %[[X]]
func.func @double_negation(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = mstep.neg %x : tensor<4xi32>
  %1 = mstep.neg %0 : tensor<4xi32>
  return %1 : tensor<4xi32>
}

// -----

// An exact widening followed by a cast is one cast; a narrowing is kept.
// CHECK-LABEL: func.func @cast_chains(
// CHECK-SAME: %[[X:[^:]*]]: tensor<4xbf16>
// CHECK-NEXT: %[[H:.*]] = mstep.cast %[[X]] : tensor<4xbf16> -> tensor<4xf16>
// CHECK-NEXT: %[[N:.*]] = mstep.cast %[[H]] : tensor<4xf16> -> tensor<4xbf16>
// CHECK-NEXT: return %[[X]], %[[H]], %[[N]]
func.func @cast_chains(%x: tensor<4xbf16>) -> (tensor<4xbf16>, tensor<4xf16>, tensor<4xbf16>) {
  %0 = mstep.cast %x : tensor<4xbf16> -> tensor<4xf32>
  %1 = mstep.cast %0 : tensor<4xf32> -> tensor<4xbf16>
  %2 = mstep.cast %0 : tensor<4xf32> -> tensor<4xf16>
  %3 = mstep.cast %2 : tensor<4xf16> -> tensor<4xbf16>
  return %1, %2, %3 : tensor<4xbf16>, tensor<4xf16>, tensor<4xbf16>
}

// -----

// CHECK-LABEL: func.func @permute_chains(
// CHECK-SAME: %[[X:[^:]*]]: tensor<2x3x4xf32>
// CHECK-NEXT: %[[P:.*]] = mstep.permute %[[X]] {perm = array<i64: 2, 0, 1>}
// CHECK-NEXT: return %[[X]], %[[P]]
func.func @permute_chains(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>) {
  %0 = mstep.permute %x {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = mstep.permute %0 {perm = array<i64: 1, 0, 2>} : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  %2 = mstep.permute %0 {perm = array<i64: 2, 1, 0>} : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  return %1, %2 : tensor<2x3x4xf32>, tensor<4x2x3xf32>
}

// -----

// CHECK-LABEL: func.func @expand_chain(
// CHECK-SAME: %[[X:[^:]*]]: tensor<3xf32>
// CHECK-NEXT: %[[E:.*]] = mstep.expand %[[X]] : tensor<3xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT: return %[[E]]
func.func @expand_chain(%x: tensor<3xf32>) -> tensor<4x2x3xf32> {
  %0 = mstep.expand %x : tensor<3xf32> -> tensor<2x3xf32>
  %1 = mstep.expand %0 : tensor<2x3xf32> -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}
