// mstep-sink-collective-readers: the pure readers of a collective's result
// move down to their first user, so an asynchronous collective (the cpu
// executable waits right before the first reader) overlaps the ops in
// between; everything else keeps its place.
// RUN: mstep-opt %s -split-input-file -mstep-sink-collective-readers | FileCheck %s
// RUN: mstep-opt %s -split-input-file --mstep-pipeline=cpu | FileCheck %s --check-prefix=CPU

// DDP's shape: a bucket's all_reduce, its gradient views (slice, reshape)
// right after it in the tracer's order, then more backward work. The views
// go after the matmul, each before its first user; the chain keeps its order.
// CHECK-LABEL: func.func @bucket_views(
// CHECK: %[[R:.*]] = mstep.all_reduce
// CHECK-NEXT: %[[M:.*]] = mstep.matmul
// CHECK-NEXT: %[[S:.*]] = mstep.slice %[[R]]
// CHECK-NEXT: %[[V:.*]] = mstep.reshape %[[S]]
// CHECK-NEXT: return %[[V]], %[[M]]
func.func @bucket_views(%g: tensor<8xf32> {mstep.role = "input"}, %a: tensor<64x64xf32> {mstep.role = "input"}) -> (tensor<2x2xf32>, tensor<64x64xf32>) {
  %r = mstep.all_reduce %g {reduce_op = #mstep.reduce_op<mean>, world_size = 2 : i64} : tensor<8xf32> -> tensor<8xf32>
  %s = mstep.slice %r {dim = 0 : i64, end = 4 : i64, start = 0 : i64, step = 1 : i64} : tensor<8xf32> -> tensor<4xf32>
  %v = mstep.reshape %s : tensor<4xf32> -> tensor<2x2xf32>
  %m = mstep.matmul %a, %a : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  return %v, %m : tensor<2x2xf32>, tensor<64x64xf32>
}

// -----

// A reader whose result feeds work that does not otherwise need the
// collective goes right before that work; a reader that another
// collective reads stops there (the second all_reduce never moves, nor do
// the ops that do not read a collective).
// CHECK-LABEL: func.func @first_user(
// CHECK: %[[R:.*]] = mstep.all_reduce %arg0
// CHECK-NEXT: %[[E:.*]] = mstep.exp %arg1
// CHECK-NEXT: %[[N:.*]] = mstep.neg %[[R]]
// CHECK-NEXT: %[[R2:.*]] = mstep.all_reduce %[[N]]
// CHECK-NEXT: %[[T:.*]] = mstep.tanh %[[E]]
// CHECK-NEXT: %[[A:.*]] = mstep.add %[[R2]], %[[T]]
// CHECK-NEXT: return %[[A]]
func.func @first_user(%x: tensor<16xf32> {mstep.role = "input"}, %y: tensor<16xf32> {mstep.role = "input"}) -> tensor<16xf32> {
  %r = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<16xf32> -> tensor<16xf32>
  %n = mstep.neg %r : tensor<16xf32>
  %e = mstep.exp %y : tensor<16xf32>
  %r2 = mstep.all_reduce %n {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<16xf32> -> tensor<16xf32>
  %t = mstep.tanh %e : tensor<16xf32>
  %a = mstep.add %r2, %t : tensor<16xf32>, tensor<16xf32> -> tensor<16xf32>
  return %a : tensor<16xf32>
}

// -----

// No collective: nothing moves.
// CHECK-LABEL: func.func @no_collective(
// CHECK: mstep.neg
// CHECK-NEXT: mstep.matmul
// CHECK-NEXT: mstep.exp
func.func @no_collective(%x: tensor<4x4xf32> {mstep.role = "input"}) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %n = mstep.neg %x : tensor<4x4xf32>
  %m = mstep.matmul %x, %x : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %e = mstep.exp %n : tensor<4x4xf32>
  return %e, %m : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// In the cpu pipeline the pass runs before the arena plan: the planned
// step has the matmul between the all_reduce and its reader.
// CPU-LABEL: func.func @planned(
// CPU: mstep.all_reduce %{{.*}} {mstep.arena_offsets
// CPU-NEXT: mstep.matmul
// CPU: mstep.reshape
// CPU: return
func.func @planned(%g: tensor<64xf32> {mstep.role = "input"}, %a: tensor<64x64xf32> {mstep.role = "input"}) -> (tensor<8x8xf32>, tensor<64x64xf32>) {
  %r = mstep.all_reduce %g {reduce_op = #mstep.reduce_op<mean>, world_size = 2 : i64} : tensor<64xf32> -> tensor<64xf32>
  %v = mstep.reshape %r : tensor<64xf32> -> tensor<8x8xf32>
  %m = mstep.matmul %a, %a : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  return %v, %m : tensor<8x8xf32>, tensor<64x64xf32>
}
