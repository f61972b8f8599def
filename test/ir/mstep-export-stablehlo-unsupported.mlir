// An op with no StableHLO export is an error at the op, naming it and what
// to do; nothing is written.
// RUN: not mstep-opt --load-plugin %custom_ops_plugin --mstep-export-stablehlo %s -o %t 2>&1 | FileCheck %s
// RUN: not test -s %t
// One module per run: --split-input-file is refused, saying so.
// RUN: not mstep-opt --mstep-export-stablehlo --split-input-file %s 2>&1 | FileCheck %s --check-prefix=SPLIT
// SPLIT: mstep-opt: --mstep-export-stablehlo writes one module; run it on each --split-input-file section separately

func.func @step(%img: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %r = mstep.relu %img : tensor<2x3xf32>
  // CHECK: mstep-export-stablehlo-unsupported.mlir:[[@LINE+1]]:8: error: StableHLO export: custom op 'scaled_softplus' (mstep.custom) has no StableHLO export: its kernels are mstep's, which a StableHLO consumer cannot call; write it with built-in ops for the export, or export the step without it
  %y = mstep.custom "scaled_softplus"(%r) {user_attrs = {beta = 2.0 : f64}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}
