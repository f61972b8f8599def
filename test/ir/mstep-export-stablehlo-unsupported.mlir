// An op with no StableHLO export is an error at the op, naming it; nothing
// is written.
// RUN: not mstep-opt --mstep-export-stablehlo %s -o %t 2>&1 | FileCheck %s
// RUN: not test -s %t
// One module per run: --split-input-file is refused, saying so.
// RUN: not mstep-opt --mstep-export-stablehlo --split-input-file %s 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: mstep-opt: --mstep-export-stablehlo writes one module; run it on each --split-input-file section separately

func.func @step(%img: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32> {
  %r = mstep.relu %img : tensor<1x3x8x8xf32>
  // CHECK: mstep-export-stablehlo-unsupported.mlir:[[@LINE+1]]:8: error: StableHLO export: op 'mstep.conv2d' has no StableHLO export yet
  %y = mstep.conv2d %r, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x8x8xf32>
  return %y : tensor<1x4x8x8xf32>
}
