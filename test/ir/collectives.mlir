// The collectives (CollectiveOps.td): round trip in the custom and the
// generic form; CSE never merges two of them and canonicalization never
// drops one (they talk to the other ranks); the cpu pipeline fuses the
// elementwise work on either side apart from them and plans their results
// in the arena.
// RUN: mstep-opt %s -split-input-file | mstep-opt -split-input-file | FileCheck %s
// RUN: mstep-opt %s -split-input-file -mlir-print-op-generic | mstep-opt -split-input-file | FileCheck %s
// RUN: mstep-opt %s -split-input-file -canonicalize -cse | FileCheck %s --check-prefix=CSE
// RUN: mstep-opt %s -split-input-file --mstep-pipeline=cpu | FileCheck %s --check-prefix=CPU

// CHECK-LABEL: func.func @collectives(
// CHECK: mstep.all_reduce %{{.*}} {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: mstep.all_reduce %{{.*}} {reduce_op = #mstep.reduce_op<mean>, world_size = 2 : i64}
// CHECK: mstep.all_gather %{{.*}} {dim = 1 : i64, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<8x8xf32>
// CHECK: mstep.broadcast %{{.*}} {root = 1 : i64, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
// CHECK: mstep.reduce_scatter %{{.*}} {dim = 0 : i64, reduce_op = #mstep.reduce_op<max>, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CSE-LABEL: func.func @collectives(
// CSE-COUNT-2: mstep.all_reduce %arg0 {reduce_op = #mstep.reduce_op<sum>
// CSE: mstep.all_reduce %arg0 {reduce_op = #mstep.reduce_op<mean>
// CSE: mstep.all_gather
// CSE: mstep.broadcast
// CSE: mstep.reduce_scatter
func.func @collectives(%x: tensor<8x4xf32> {mstep.role = "input"}) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %a = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
  %b = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
  %unused = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<mean>, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
  %g = mstep.all_gather %x {dim = 1 : i64, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<8x8xf32>
  %c = mstep.broadcast %x {root = 1 : i64, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
  %s = mstep.reduce_scatter %x {dim = 0 : i64, reduce_op = #mstep.reduce_op<max>, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
  return %a, %b : tensor<8x4xf32>, tensor<8x4xf32>
}

// -----

// Elementwise work before and after an all_reduce: two fusions, the
// collective between them, its result at an arena offset.
// CHECK-LABEL: func.func @step(
// CPU-LABEL: func.func @step(
// CPU: mstep.fusion
// CPU: mstep.all_reduce %{{.*}} {mstep.arena_offsets = array<i64: {{[0-9]+}}>, reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64}
// CPU: mstep.fusion
func.func @step(%x: tensor<16xf32> {mstep.role = "input"}, %y: tensor<16xf32> {mstep.role = "input"}) -> tensor<16xf32> {
  %0 = mstep.mul %x, %y : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %1 = mstep.exp %0 : tensor<16xf32>
  %2 = mstep.all_reduce %1 {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<16xf32> -> tensor<16xf32>
  %3 = mstep.add %2, %x : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  %4 = mstep.tanh %3 : tensor<16xf32>
  return %4 : tensor<16xf32>
}
