// Malformed and ill-typed input: a located diagnostic and exit code 1, not a
// crash (`not` fails on a crash).
// RUN: not mstep-opt %s --split-input-file 2>&1 | FileCheck %s

// CHECK: malformed.mlir{{.*}}:{{[0-9]+}}:{{[0-9]+}}: error: use of value '%x' expects different type than prior uses
func.func @mismatched_use(%x: tensor<2xf32>) {
  %0 = mstep.exp %x : tensor<3xf32>
  return
}

// -----

// CHECK: malformed.mlir{{.*}}:{{[0-9]+}}:{{[0-9]+}}: error: 'mstep.add' op lhs of shape [2] and rhs of shape [3] do not broadcast
func.func @bad_broadcast(%a: tensor<2xf32>, %b: tensor<3xf32>) {
  %0 = mstep.add %a, %b : tensor<2xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

// CHECK: malformed.mlir{{.*}}:{{[0-9]+}}:{{[0-9]+}}: error: custom op 'mstep.no_such_op' is unknown
func.func @unknown_op(%a: tensor<2xf32>) {
  %0 = mstep.no_such_op %a : tensor<2xf32>
  return
}

// -----

// CHECK: malformed.mlir{{.*}}:{{[0-9]+}}:{{[0-9]+}}: error: expected
func.func @truncated(%a: tensor<2xf32>) {
  %0 = mstep.exp
