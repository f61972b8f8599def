// mstep-verify-backend-contract: a module in the normalized form passes
// unchanged (also after mstep-plan-memory); each rule C1-C8 of
// docs/backend-contract.md has a case that breaks it.
// RUN: mstep-opt %s -split-input-file -verify-diagnostics -mstep-verify-backend-contract | FileCheck %s
// The first case again, planned first (sed keeps the text before the
// first split marker):
// RUN: sed -n '1,/^\/\/ -----/p' %s | mstep-opt -mstep-plan-memory -mstep-verify-backend-contract | FileCheck %s --check-prefix=PLANNED

// A top-level mstep.constant may feed a fusion; non-fusible ops stay at the
// top level; every argument has a role; %w is donated to result 1.
// CHECK-LABEL: func.func @valid(
// CHECK-SAME: %{{.*}}: tensor<8x8xf32> {mstep.aliased_result = 1 : i64, mstep.role = "parameter"}
// CHECK-NEXT: %[[C:.*]] = mstep.constant 2.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[M:.*]] = mstep.matmul
// CHECK-NEXT: %[[F:.*]] = mstep.fusion ins(%[[M]], %[[C]] : tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32> {
// CHECK:      mstep.mul
// CHECK-NEXT: mstep.yield
// CHECK:      mstep.sum %[[F]]
// CHECK-NEXT: mstep.permute
// CHECK-NEXT: mstep.matmul
// CHECK-NEXT: mstep.multi_tensor_update <sgd>
// CHECK-NEXT: return
// Slots after planning: c p0..p2 (64), {m,f} p1..p5 (128), s p3..p7 (64),
// xT p4..p5 (128), g p5..p6 (256); peak at p5: 64 + 128 + 128 + 256 = 576.
// PLANNED-LABEL: func.func @valid(
// PLANNED-SAME: mstep.arena_size = 576 : i64, mstep.liveness_bound = 576 : i64
// PLANNED: mstep.fusion {{.*}} attributes {mstep.arena_offsets = array<i64: 256>, mstep.in_place = array<i64: 0>}
// PLANNED: mstep.multi_tensor_update <sgd> {{.*}} {mstep.aliases_arg = array<i64: 1>, mstep.arena_offsets = array<i64: -1>}
func.func @valid(%x: tensor<4x8xf32> {mstep.role = "input"},
                 %w: tensor<8x8xf32> {mstep.aliased_result = 1 : i64, mstep.role = "parameter"},
                 %rng: tensor<2xi64> {mstep.role = "rng_state"},
                 %lr: tensor<f64> {mstep.role = "device_scalar"}) -> (tensor<f32>, tensor<8x8xf32>) {
  %c = mstep.constant 2.0 : tensor<f32>
  %m = mstep.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %f = mstep.fusion ins(%m, %c : tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<f32>):
    %p = mstep.mul %a, %b : tensor<4x8xf32>, tensor<f32> -> tensor<4x8xf32>
    mstep.yield %p : tensor<4x8xf32>
  }
  %s = mstep.sum %f {dims = array<i64: 0, 1>, keepdim = false} : tensor<4x8xf32> -> tensor<f32>
  %xt = mstep.permute %x {perm = array<i64: 1, 0>} : tensor<4x8xf32> -> tensor<8x4xf32>
  %g = mstep.matmul %xt, %f : tensor<8x4xf32>, tensor<4x8xf32> -> tensor<8x8xf32>
  %w2 = mstep.multi_tensor_update <sgd> params(%w : tensor<8x8xf32>) grads(%g : tensor<8x8xf32>) lr(%lr)
  return %s, %w2 : tensor<f32>, tensor<8x8xf32>
}

// -----

// C1: only func.func ops at module level.
func.func @c1_ok(%x: tensor<4xf32> {mstep.role = "input"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
// expected-error @+1 {{backend contract: 'builtin.module' at module level; a module holds only func.func ops, one per graph (C1)}}
module {}

// -----

// C1: a declaration has no graph.
// expected-error @+1 {{backend contract: @c1_declaration has no body; every func.func defines its graph (C1)}}
func.func private @c1_declaration(tensor<4xf32>) -> tensor<4xf32>

// -----

// C1: one block per graph.
// expected-error @+1 {{backend contract: @c1_two_blocks has 2 blocks; a graph is one block of ops in program order (C1)}}
func.func @c1_two_blocks(%x: tensor<4xf32> {mstep.role = "input"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
^bb1(%y: tensor<4xf32>):
  return %y : tensor<4xf32>
}

// -----

// C2: only mstep ops and func.return at the top level.
func.func @c2_foreign_op(%x: tensor<4xf32> {mstep.role = "input"}) -> tensor<4xf32> {
  // expected-error @+1 {{backend contract: 'tensor.empty' at the top level of @c2_foreign_op is not an mstep op; a graph holds only mstep ops and func.return}}
  %e = tensor.empty() : tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

// C3: static ranked tensors of the mstep element types, no memrefs, no
// bare scalars, in the signature too.
// expected-error @+1 {{backend contract: result #0 of @c3_types has type 'f32', which is not a tensor; a device scalar is a 0-d tensor (C3)}}
func.func @c3_types(
    // expected-error @+1 {{backend contract: argument #0 of @c3_types has type 'tensor<?xf32>', which has a dynamic dimension; shapes are static}}
    %dynamic: tensor<?xf32> {mstep.role = "input"},
    // expected-error @+1 {{backend contract: argument #1 of @c3_types has type 'memref<4xf32>', which is a memref; values have value semantics}}
    %buffer: memref<4xf32> {mstep.role = "input"},
    // expected-error @+1 {{backend contract: argument #2 of @c3_types has type 'tensor<*xf32>', which is unranked}}
    %unranked: tensor<*xf32> {mstep.role = "input"},
    // expected-error @+1 {{backend contract: argument #3 of @c3_types has type 'tensor<4xui8>', which has an element type other than f32, f64, bf16, f16, i32, i64 and i1}}
    %bytes: tensor<4xui8> {mstep.role = "input"},
    // expected-error @+1 {{backend contract: argument #4 of @c3_types has type 'f32', which is not a tensor; a device scalar is a 0-d tensor}}
    %scalar: f32 {mstep.role = "device_scalar"}) -> f32 {
  return %scalar : f32
}

// -----

// C4: a fusible op at the top level; a lone one still goes into a fusion.
func.func @c4_unfused(%x: tensor<4xf32> {mstep.role = "input"}) -> tensor<4xf32> {
  // expected-error @+1 {{backend contract: 'mstep.exp' at the top level of @c4_unfused is fusible but not inside an mstep.fusion; run -mstep-fuse-elementwise first (C4)}}
  %e = mstep.exp %x : tensor<4xf32>
  %c = mstep.constant 1.0 : tensor<f32>
  // expected-error @+1 {{backend contract: 'mstep.full' at the top level of @c4_unfused is fusible}}
  %f = mstep.full %c : tensor<f32> -> tensor<4xf32>
  return %f : tensor<4xf32>
}

// -----

// C5: only fusible ops in a fusion region. The mstep.fusion verifier
// enforces it, so the module is rejected as soon as it is parsed.
func.func @c5_matmul_in_fusion(%x: tensor<4x4xf32> {mstep.role = "input"}) -> tensor<4x4xf32> {
  // expected-error @+1 {{'mstep.fusion' op body holds 'mstep.matmul', which is not fusible}}
  %f = mstep.fusion ins(%x : tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    %m = mstep.matmul %a, %a : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
    mstep.yield %m : tensor<4x4xf32>
  }
  return %f : tensor<4x4xf32>
}

// -----

// C6: every argument has a known mstep.role string.
func.func @c6_roles(
    // expected-error @+1 {{backend contract: argument #0 of @c6_roles has no mstep.role; the importer gives every argument one of input, parameter, optimizer_state, rng_state or device_scalar (C6)}}
    %none: tensor<4xf32>,
    // expected-error @+1 {{backend contract: argument #1 of @c6_roles has mstep.role "weights"; it must be the string input, parameter, optimizer_state, rng_state or device_scalar (C6)}}
    %unknown: tensor<4xf32> {mstep.role = "weights"},
    // expected-error @+1 {{backend contract: argument #2 of @c6_roles has mstep.role 1 : i64; it must be the string}}
    %number: tensor<4xf32> {mstep.role = 1 : i64}) {
  return
}

// -----

// C7: donations name a result in range, of the argument's type, once.
func.func @c7_donations(
    // expected-error @+1 {{backend contract: argument #0 of @c7_donations has mstep.aliased_result = 2 : i64 but @c7_donations has 2 results; it must be the index of the result that is the argument's new value (C7)}}
    %out_of_range: tensor<4xf32> {mstep.aliased_result = 2 : i64, mstep.role = "parameter"},
    // expected-error @+1 {{backend contract: argument #1 of @c7_donations ('tensor<8xf32>') is donated to result #0 of type 'tensor<4xf32>'; a donated buffer only takes a result of its own type (C7)}}
    %wrong_type: tensor<8xf32> {mstep.aliased_result = 0 : i64, mstep.role = "parameter"},
    %first: tensor<4xf32> {mstep.aliased_result = 1 : i64, mstep.role = "parameter"},
    // expected-error @+1 {{backend contract: arguments #2 and #3 of @c7_donations are both donated to result #1; a result is written into at most one donated argument (C7)}}
    %second: tensor<4xf32> {mstep.aliased_result = 1 : i64, mstep.role = "parameter"})
    -> (tensor<4xf32>, tensor<4xf32>) {
  return %out_of_range, %first : tensor<4xf32>, tensor<4xf32>
}

// -----

// C8: in a planned function every top-level result has a place.
func.func @c8_plan(%x: tensor<4xf32> {mstep.role = "input"},
                   %w: tensor<f32> {mstep.role = "parameter"})
    -> (tensor<f32>, tensor<f32>, tensor<f32>) attributes {mstep.arena_size = 64 : i64} {
  // expected-error @+1 {{backend contract: 'mstep.sum' in planned @c8_plan has no mstep.arena_offsets with one entry per result (1); run -mstep-plan-memory after every pass that changes the graph (C8)}}
  %a = mstep.sum %x {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
  // expected-error @+1 {{backend contract: result #0 of 'mstep.sum' occupies [64, 68) beyond the 64-byte arena of @c8_plan}}
  %b = mstep.sum %x {dims = array<i64: 0>, keepdim = false, mstep.arena_offsets = array<i64: 64>} : tensor<4xf32> -> tensor<f32>
  // expected-error @+1 {{backend contract: result #0 of 'mstep.sum' has arena offset -1 but no mstep.aliases_arg entry naming an argument donated to it}}
  %c = mstep.sum %x {dims = array<i64: 0>, keepdim = false, mstep.arena_offsets = array<i64: -1>, mstep.aliases_arg = array<i64: 1>} : tensor<4xf32> -> tensor<f32>
  return %a, %b, %c : tensor<f32>, tensor<f32>, tensor<f32>
}
