// mstep-opt's plumbing: the registered dialects (mstep, func, arith, tensor,
// linalg) parse side by side, and upstream passes run from --pass-pipeline
// with --mlir-print-ir-after-all showing each step.
// RUN: mstep-opt %s --pass-pipeline='builtin.module(func.func(canonicalize),cse,symbol-dce)' \
// RUN:   --mlir-print-ir-after-all -o /dev/null 2>&1 | FileCheck %s

// Canonicalize folds the no-op reshape; the duplicate exp stays.
// CHECK-LABEL: IR Dump After Canonicalizer (canonicalize)
// CHECK:       func.func @mixed(%[[X:[a-z0-9]+]]: tensor<2x3xf32>
// CHECK:         mstep.exp %[[X]]
// CHECK:         mstep.exp %[[X]]
// CHECK-NOT:     mstep.reshape
// CHECK:         return %[[X]], %{{.*}} : tensor<2x3xf32>, tensor<6xf32>

// CSE merges the two exps.
// CHECK-LABEL: IR Dump After CSE (cse)
// CHECK:         %[[E:[a-z0-9]+]] = mstep.exp
// CHECK-NOT:     mstep.exp
// CHECK:         tensor.empty
// CHECK:         linalg.add ins(%[[E]], %[[E]] : tensor<2x3xf32>, tensor<2x3xf32>)
// CHECK:         tensor.collapse_shape
// CHECK:       func.func private @unused

// symbol-dce drops the unused private function.
// CHECK-LABEL: IR Dump After SymbolDCE (symbol-dce)
// CHECK:       func.func @mixed
// CHECK-NOT:   @unused

func.func @mixed(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<6xf32>) {
  %e0 = mstep.exp %x : tensor<2x3xf32>
  %e1 = mstep.exp %x : tensor<2x3xf32>
  %init = tensor.empty() : tensor<2x3xf32>
  %sum = linalg.add ins(%e0, %e1 : tensor<2x3xf32>, tensor<2x3xf32>) outs(%init : tensor<2x3xf32>) -> tensor<2x3xf32>
  %flat = tensor.collapse_shape %sum [[0, 1]] : tensor<2x3xf32> into tensor<6xf32>
  %c = arith.constant 0 : index
  %keep = mstep.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %keep, %flat : tensor<2x3xf32>, tensor<6xf32>
}

func.func private @unused() {
  return
}
