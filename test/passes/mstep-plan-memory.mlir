// mstep-plan-memory: arena offsets, in-place reuse, donated arguments,
// alignment and the reported sizes. Offsets below are worked out by hand
// from the liveness intervals written next to each function (pN = the
// N-th top-level op; slot sizes are rounded up to the alignment).
// RUN: mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file -verify-diagnostics -mstep-plan-memory | FileCheck %s
// RUN: mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file -verify-diagnostics -mstep-plan-memory=alignment=256 | FileCheck %s --check-prefix=ALIGN256
// RUN: not mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file -mstep-plan-memory=alignment=48 2>&1 | FileCheck %s --check-prefix=BADALIGN

// BADALIGN: error: plan-memory: alignment 48 is not a power of two

// A chain of matmuls (never in place): %c reuses %a's bytes once %a is dead.
// a: p0..p1, b: p1..p2, c: p2..p3, d: p3..p4 (returned). Peak: two 1 KiB
// tensors live at once, so arena = bound = 2048.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME: attributes {mstep.arena_alignment = 64 : i64, mstep.arena_size = 2048 : i64, mstep.liveness_bound = 2048 : i64}
// CHECK-NOT: mstep.in_place
// CHECK: mstep.matmul %{{.*}} {mstep.arena_offsets = array<i64: 0>}
// CHECK: mstep.matmul %{{.*}} {mstep.arena_offsets = array<i64: 1024>}
// CHECK: mstep.matmul %{{.*}} {mstep.arena_offsets = array<i64: 0>}
// CHECK: mstep.sum %{{.*}} {dims = array<i64: 0, 1>, keepdim = false, mstep.arena_offsets = array<i64: 1024>}
// CHECK-NOT: mstep.in_place
// CHECK: return
func.func @chain(%x: tensor<16x16xf32> {mstep.role = "input"}) -> tensor<f32> {
  %a = mstep.matmul %x, %x : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %b = mstep.matmul %a, %x : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %c = mstep.matmul %b, %x : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
  %d = mstep.sum %c {dims = array<i64: 0, 1>, keepdim = false} : tensor<16x16xf32> -> tensor<f32>
  return %d : tensor<f32>
}

// -----

// In place: an elementwise result takes the slot of a same-shape operand of
// equal byte size that dies at its op.
// - %n does not reuse %e (still read by %m);
// - %m reuses %e (operand 0; %n also dies but one slot per result);
// - %y cannot reuse %q (broadcast operand) nor %x (an argument): fresh;
// - %i (i32, same bytes) reuses %y; %h (f16, half the bytes) cannot.
// Slots: {e,m} p0..p3, n p1..p2, q p3..p4 (64), {y,i} p4..p6, h p6..p7 (64).
// Peak at p1/p2: 128 + 128 = 256.
// CHECK-LABEL: func.func @in_place(
// CHECK-SAME: mstep.arena_size = 256 : i64, mstep.liveness_bound = 256 : i64
// CHECK: %[[E:.*]] = mstep.exp %{{.*}} {mstep.arena_offsets = array<i64: 0>}
// CHECK: %[[N:.*]] = mstep.neg %[[E]] {mstep.arena_offsets = array<i64: 128>} :
// CHECK: mstep.mul %[[E]], %[[N]] {mstep.arena_offsets = array<i64: 0>, mstep.in_place = array<i64: 0>}
// CHECK: mstep.sum %{{.*}} {dims = array<i64: 0>, keepdim = false, mstep.arena_offsets = array<i64: 128>}
// CHECK: mstep.add %{{.*}}, %{{.*}} {mstep.arena_offsets = array<i64: 0>} :
// CHECK: mstep.cast %{{.*}} {mstep.arena_offsets = array<i64: 0>, mstep.in_place = array<i64: 0>} : tensor<4x8xf32> -> tensor<4x8xi32>
// CHECK: mstep.cast %{{.*}} {mstep.arena_offsets = array<i64: 128>} : tensor<4x8xi32> -> tensor<4x8xf16>
func.func @in_place(%x: tensor<4x8xf32> {mstep.role = "input"}) -> tensor<4x8xf16> {
  %e = mstep.exp %x : tensor<4x8xf32>
  %n = mstep.neg %e : tensor<4x8xf32>
  %m = mstep.mul %e, %n : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %q = mstep.sum %m {dims = array<i64: 0>, keepdim = false} : tensor<4x8xf32> -> tensor<8xf32>
  %y = mstep.add %x, %q : tensor<4x8xf32>, tensor<8xf32> -> tensor<4x8xf32>
  %i = mstep.cast %y : tensor<4x8xf32> -> tensor<4x8xi32>
  %h = mstep.cast %i : tensor<4x8xi32> -> tensor<4x8xf16>
  return %h : tensor<4x8xf16>
}

// -----

// A reshape keeps the bytes as they are: it takes the slot of an operand
// that dies at it (%r over %e), never of one still read later (%s: %r is
// read by %m after it), and never an argument's.
// e: p0..p1, r: p1..p3 (in %e's slot), s: p2.. (returned), m: p3 (in %r's).
// CHECK-LABEL: func.func @reshape_in_place(
// CHECK: %[[E:.*]] = mstep.exp %{{.*}} {mstep.arena_offsets = array<i64: 0>}
// CHECK: %[[R:.*]] = mstep.reshape %[[E]] {mstep.arena_offsets = array<i64: 0>, mstep.in_place = array<i64: 0>, shape = array<i64: 32>}
// CHECK: %[[S:.*]] = mstep.reshape %[[R]] {mstep.arena_offsets = array<i64: 128>, shape = array<i64: 8, 4>}
// CHECK: mstep.neg %[[R]] {mstep.arena_offsets = array<i64: 0>, mstep.in_place = array<i64: 0>}
// CHECK: return
func.func @reshape_in_place(%x: tensor<4x8xf32> {mstep.role = "input"}) -> (tensor<32xf32>, tensor<8x4xf32>) {
  %e = mstep.exp %x : tensor<4x8xf32>
  %r = mstep.reshape %e {shape = array<i64: 32>} : tensor<4x8xf32> -> tensor<32xf32>
  %s = mstep.reshape %r {shape = array<i64: 8, 4>} : tensor<32xf32> -> tensor<8x4xf32>
  %m = mstep.neg %r : tensor<32xf32>
  return %m, %s : tensor<32xf32>, tensor<8x4xf32>
}

// -----

// Donated arguments: %w2 is written into %w (its op reads %w elementwise and
// nothing reads %w later). %v2 is not written into %v (%o reads %v after
// it), and %u2 not into %u (a matmul cannot write over its operand): both
// get arena slots and live to the return (p5), like %o.
// Slots: g p0..p1, v2 p2..p5, o p3..p5, u2 p4..p5: peak 3 x 256 = 768.
// CHECK-LABEL: func.func @donated(
// CHECK-SAME: mstep.arena_size = 768 : i64, mstep.liveness_bound = 768 : i64
// CHECK: mstep.mul %{{.*}}, %{{.*}} {mstep.arena_offsets = array<i64: 0>}
// CHECK: mstep.sub %{{.*}}, %{{.*}} {mstep.aliases_arg = array<i64: 0>, mstep.arena_offsets = array<i64: -1>}
// CHECK: mstep.add %{{.*}}, %{{.*}} {mstep.arena_offsets = array<i64: 0>} :
// CHECK: mstep.mul %{{.*}}, %{{.*}} {mstep.arena_offsets = array<i64: 256>} :
// CHECK: mstep.matmul %{{.*}}, %{{.*}} {mstep.arena_offsets = array<i64: 512>} :
func.func @donated(%w: tensor<8x8xf32> {mstep.aliased_result = 1 : i64, mstep.role = "parameter"},
                   %v: tensor<8x8xf32> {mstep.aliased_result = 2 : i64, mstep.role = "parameter"},
                   %u: tensor<8x8xf32> {mstep.aliased_result = 3 : i64, mstep.role = "parameter"},
                   %x: tensor<8x8xf32> {mstep.role = "input"})
    -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %g = mstep.mul %w, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %w2 = mstep.sub %w, %g : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %v2 = mstep.add %v, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %o = mstep.mul %v, %x : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  %u2 = mstep.matmul %u, %u : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
  return %o, %w2, %v2, %u2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Alignment: a 12-byte tensor takes a 64-byte slot (256 with
// alignment=256); %b reuses %a in place (same 12 bytes, same shape).
// Slots: {a,b} p0..p3, s p1..p2.
// CHECK-LABEL: func.func @alignment(
// CHECK-SAME: attributes {mstep.arena_alignment = 64 : i64, mstep.arena_size = 128 : i64, mstep.liveness_bound = 128 : i64}
// CHECK: mstep.exp %{{.*}} {mstep.arena_offsets = array<i64: 0>}
// CHECK: mstep.sum %{{.*}} {dims = array<i64: 0>, keepdim = false, mstep.arena_offsets = array<i64: 64>}
// CHECK: mstep.mul %{{.*}}, %{{.*}} {mstep.arena_offsets = array<i64: 0>, mstep.in_place = array<i64: 0>}
// ALIGN256-LABEL: func.func @alignment(
// ALIGN256-SAME: attributes {mstep.arena_alignment = 256 : i64, mstep.arena_size = 512 : i64, mstep.liveness_bound = 512 : i64}
// ALIGN256: mstep.exp %{{.*}} {mstep.arena_offsets = array<i64: 0>}
// ALIGN256: mstep.sum %{{.*}} {dims = array<i64: 0>, keepdim = false, mstep.arena_offsets = array<i64: 256>}
// ALIGN256: mstep.mul %{{.*}}, %{{.*}} {mstep.arena_offsets = array<i64: 0>, mstep.in_place = array<i64: 0>}
func.func @alignment(%x: tensor<3xf32> {mstep.role = "input"}) -> tensor<3xf32> {
  %a = mstep.exp %x : tensor<3xf32>
  %s = mstep.sum %a {dims = array<i64: 0>, keepdim = false} : tensor<3xf32> -> tensor<f32>
  %b = mstep.mul %a, %s : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  return %b : tensor<3xf32>
}

// -----

// Multi-result ops and a fusion: one entry per result. The fusion's first
// result reuses its dying input %e; its second (i1, 32 bytes) gets a fresh
// 64-byte slot; nothing inside the region is planned. The optimizer update
// writes every result into its donated argument (params, states, steps).
// Slots: {e,f#0} p0..p2 (128), f#1 p1..p3 (64).
// CHECK-LABEL: func.func @multi_result(
// CHECK-SAME: mstep.arena_size = 192 : i64, mstep.liveness_bound = 192 : i64
// CHECK: mstep.exp %{{.*}} {mstep.arena_offsets = array<i64: 0>}
// CHECK: mstep.fusion ins(%{{.*}}, %{{.*}} : tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>, tensor<4x8xi1> attributes {mstep.arena_offsets = array<i64: 0, 128>, mstep.in_place = array<i64: 0, -1>}
// CHECK-NOT: mstep.arena_offsets
// CHECK: mstep.yield
// CHECK: mstep.multi_tensor_update <adam>
// CHECK-SAME: {mstep.aliases_arg = array<i64: 0, 1, 2, 3>, mstep.arena_offsets = array<i64: -1, -1, -1, -1>}
func.func @multi_result(%w: tensor<4x8xf32> {mstep.aliased_result = 0 : i64, mstep.role = "parameter"},
                        %m: tensor<4x8xf32> {mstep.aliased_result = 1 : i64, mstep.role = "optimizer_state"},
                        %v: tensor<4x8xf32> {mstep.aliased_result = 2 : i64, mstep.role = "optimizer_state"},
                        %t: tensor<i64> {mstep.aliased_result = 3 : i64, mstep.role = "optimizer_state"},
                        %x: tensor<4x8xf32> {mstep.role = "input"},
                        %lr: tensor<f64> {mstep.role = "device_scalar"},
                        %b1: tensor<f64> {mstep.role = "device_scalar"},
                        %b2: tensor<f64> {mstep.role = "device_scalar"},
                        %eps: tensor<f64> {mstep.role = "device_scalar"})
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<4x8xi1>) {
  %e = mstep.exp %x : tensor<4x8xf32>
  %f:2 = mstep.fusion ins(%e, %w : tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>, tensor<4x8xi1> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>):
    %p = mstep.mul %a, %b : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
    %z = mstep.constant 0.0 : tensor<f32>
    %g = mstep.gt %p, %z : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xi1>
    mstep.yield %p, %g : tensor<4x8xf32>, tensor<4x8xi1>
  }
  %p2, %s:2, %t2 = mstep.multi_tensor_update <adam> params(%w : tensor<4x8xf32>) grads(%f#0 : tensor<4x8xf32>) states(%m, %v : tensor<4x8xf32>, tensor<4x8xf32>) steps(%t) lr(%lr) beta1(%b1) beta2(%b2) eps(%eps)
  return %p2, %s#0, %s#1, %t2, %f#1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<i64>, tensor<4x8xi1>
}

// -----

// Re-planning replaces the old plan (stale attributes go), and a dead
// value still takes its bytes at its op. y: p0..p2, dead: p1 only.
// CHECK-LABEL: func.func @replan(
// CHECK-SAME: mstep.arena_size = 128 : i64, mstep.liveness_bound = 128 : i64
// CHECK: mstep.neg %{{.*}} {mstep.arena_offsets = array<i64: 0>} :
// CHECK: mstep.exp %{{.*}} {mstep.arena_offsets = array<i64: 64>} :
func.func @replan(%x: tensor<4xf32> {mstep.role = "input"}) -> tensor<4xf32>
    attributes {mstep.arena_size = 7 : i64} {
  %y = mstep.neg %x : tensor<4xf32>
  %dead = mstep.exp %x {mstep.arena_offsets = array<i64: 99>, mstep.in_place = array<i64: 0>} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// A custom op is never in place: its kernel may read any operand element
// after writing any result element. a: p0..p1, c: p1..p2 (returned).
// CHECK-LABEL: func.func @custom_op(
// CHECK-SAME: mstep.arena_size = 128 : i64
// CHECK: mstep.neg %{{.*}} {mstep.arena_offsets = array<i64: 0>} :
// CHECK-NOT: mstep.in_place
// CHECK: mstep.custom "scaled_softplus"{{.*}}mstep.arena_offsets = array<i64: 64>
// CHECK-NOT: mstep.in_place
// CHECK: return
func.func @custom_op(%x: tensor<4xf32> {mstep.role = "input"}) -> tensor<4xf32> {
  %a = mstep.neg %x : tensor<4xf32>
  %c = mstep.custom "scaled_softplus"(%a) {user_attrs = {beta = 2.0 : f64}} : (tensor<4xf32>) -> tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// A result that is not a statically shaped tensor cannot be planned.
func.func @not_a_tensor(%x: tensor<4xf32> {mstep.role = "input"}) -> tensor<4xf32> {
  // expected-error @+1 {{plan-memory: result #0 of 'arith.constant' has type 'i32', which has no static size; every result must be a statically shaped ranked tensor}}
  %c = arith.constant 1 : i32
  return %x : tensor<4xf32>
}
