// mstep-fuse-attention: hand-written attention (and the backward autograd
// records for it) rewritten into mstep.sdpa / mstep.sdpa_backward. The
// output is verified by mstep-opt (the sdpa verifiers, dominance).
// RUN: mstep-opt %s -split-input-file -mstep-fuse-attention | FileCheck %s
// Idempotence: a second run changes nothing, so the same checks hold.
// RUN: mstep-opt %s -split-input-file -mstep-fuse-attention -mstep-fuse-attention | FileCheck %s

// No mask, the scale on the scores, k transposed in the graph. Every op of
// the chain and the constant go; sdpa takes k itself.
// CHECK-LABEL: func.func @no_mask(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[K:[a-z0-9_]+]]: tensor<2x6x8xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>)
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64} : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
// CHECK-NEXT:    return %[[O]] : tensor<2x4x5xf32>
func.func @no_mask(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>) -> tensor<2x4x5xf32> {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %y = mstep.mul %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %y {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// A constant lower triangle (tril of all-true, diagonal 0) under
// where(mask, scores, -inf) is is_causal; the mask ops go too. L = 4, S = 6.
// CHECK-LABEL: func.func @causal(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[K:[a-z0-9_]+]]: tensor<2x6x8xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>)
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] {is_causal = true, scale = 1.250000e-01 : f64}
// CHECK-NEXT:    return %[[O]]
func.func @causal(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>) -> tensor<2x4x5xf32> {
  %t = mstep.constant 1.000000e+00 : tensor<i1>
  %ones = mstep.full %t : tensor<i1> -> tensor<4x6xi1>
  %tri = mstep.tril %ones {diagonal = 0 : i64} : tensor<4x6xi1>
  %tri3 = mstep.reshape %tri : tensor<4x6xi1> -> tensor<1x4x6xi1>
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %y = mstep.mul %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %ninf = mstep.constant 0xFFF0000000000000 : tensor<f32>
  %x = mstep.where %tri3, %y, %ninf : tensor<1x4x6xi1>, tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %x {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// A triangle with diagonal 1 is not causal: it stays, as the mask operand.
// CHECK-LABEL: func.func @shifted_triangle(
// CHECK:         %[[TRI:.*]] = mstep.tril %{{.*}} {diagonal = 1 : i64} : tensor<4x6xi1>
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %{{.*}}, %{{.*}}, %{{.*}} mask(%[[TRI]] : tensor<4x6xi1>) {scale = 1.000000e+00 : f64}
// CHECK-NEXT:    return %[[O]]
func.func @shifted_triangle(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>) -> tensor<2x4x5xf32> {
  %t = mstep.constant 1.000000e+00 : tensor<i1>
  %ones = mstep.full %t : tensor<i1> -> tensor<4x6xi1>
  %tri = mstep.tril %ones {diagonal = 1 : i64} : tensor<4x6xi1>
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %ninf = mstep.constant 0xFFF0000000000000 : tensor<f32>
  %x = mstep.where %tri, %s, %ninf : tensor<4x6xi1>, tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %x {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// A bool mask from outside (here [B, 1, S], a key padding mask), the -inf
// through mstep.full; the scale as a division.
// CHECK-LABEL: func.func @bool_mask(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[K:[a-z0-9_]+]]: tensor<2x6x8xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>, %[[M:[a-z0-9_]+]]: tensor<2x1x6xi1>)
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<2x1x6xi1>) {scale = 2.500000e-01 : f64}
// CHECK-NEXT:    return %[[O]]
func.func @bool_mask(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>, %m: tensor<2x1x6xi1>) -> tensor<2x4x5xf32> {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %c = mstep.constant 4.000000e+00 : tensor<f32>
  %y = mstep.div %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %ninf = mstep.constant 0xFFF0000000000000 : tensor<f32>
  %fill = mstep.full %ninf : tensor<f32> -> tensor<f32>
  %x = mstep.where %m, %y, %fill : tensor<2x1x6xi1>, tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %x {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// A float mask added to the scores (either operand order).
// CHECK-LABEL: func.func @float_mask(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[K:[a-z0-9_]+]]: tensor<2x6x8xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>, %[[M:[a-z0-9_]+]]: tensor<4x6xf32>)
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<4x6xf32>) {scale = 1.250000e-01 : f64}
// CHECK-NEXT:    return %[[O]]
func.func @float_mask(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>, %m: tensor<4x6xf32>) -> tensor<2x4x5xf32> {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %y = mstep.mul %c, %s : tensor<f32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %x = mstep.add %m, %y : tensor<4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %x {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// Dropout on the probabilities: sdpa draws with the same RNG state and
// offset (the same Philox counter per element of [..., L, S]).
// CHECK-LABEL: func.func @dropout(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[K:[a-z0-9_]+]]: tensor<2x6x8xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>, %[[RNG:[a-z0-9_]+]]: tensor<2xi64>)
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] rng(%[[RNG]]) {dropout_p = 1.000000e-01 : f64, rng_offset = 16 : i64, scale = 1.250000e-01 : f64}
// CHECK-NEXT:    return %[[O]]
func.func @dropout(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>, %rng: tensor<2xi64>) -> tensor<2x4x5xf32> {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %y = mstep.mul %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %y {dim = 2 : i64} : tensor<2x4x6xf32>
  %pd = mstep.dropout %p, %rng {offset = 16 : i64, p = 1.000000e-01 : f64} : tensor<2x4x6xf32>
  %o = mstep.matmul %pd, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// The key arrives already transposed ([.., E, S]): sdpa reads it transposed
// back, through a new permute placed right after it.
// CHECK-LABEL: func.func @key_pre_transposed(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[KT:[a-z0-9_]+]]: tensor<2x8x6xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>)
// CHECK-NEXT:    %[[K:.*]] = mstep.permute %[[KT]] {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64}
// CHECK-NEXT:    return %[[O]]
func.func @key_pre_transposed(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x6xf32>, %v: tensor<2x6x5xf32>) -> tensor<2x4x5xf32> {
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %y = mstep.mul %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %y {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// The scale on q (constant first) and on k before its transpose (a
// division): 0.5 * (1 / 4) folds into one scale; the scores are unscaled.
// CHECK-LABEL: func.func @scale_on_q_and_k(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[K:[a-z0-9_]+]]: tensor<2x6x8xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>)
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64}
// CHECK-NEXT:    return %[[O]]
func.func @scale_on_q_and_k(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>) -> tensor<2x4x5xf32> {
  %half = mstep.constant 5.000000e-01 : tensor<f32>
  %four = mstep.constant 4.000000e+00 : tensor<f32>
  %qs = mstep.mul %half, %q : tensor<f32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %ks = mstep.div %k, %four : tensor<2x6x8xf32>, tensor<f32> -> tensor<2x6x8xf32>
  %kt = mstep.permute %ks {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %qs, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %s {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// q scaled before its head permute: the scale folds in, and sdpa reads q
// through a new permute of the unscaled tensor; the old mul and permute go.
// CHECK-LABEL: func.func @scale_under_head_permute(
// CHECK-SAME:      %[[Q4:[a-z0-9_]+]]: tensor<1x4x2x8xf32>, %[[K:[a-z0-9_]+]]: tensor<1x2x6x8xf32>, %[[V:[a-z0-9_]+]]: tensor<1x2x6x5xf32>)
// CHECK-NEXT:    %[[Q:.*]] = mstep.permute %[[Q4]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64}
// CHECK-NEXT:    return %[[O]]
func.func @scale_under_head_permute(%q4: tensor<1x4x2x8xf32>, %k: tensor<1x2x6x8xf32>, %v: tensor<1x2x6x5xf32>) -> tensor<1x2x4x5xf32> {
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %qs = mstep.mul %q4, %c : tensor<1x4x2x8xf32>, tensor<f32> -> tensor<1x4x2x8xf32>
  %q = mstep.permute %qs {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %kt = mstep.permute %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x6x8xf32> -> tensor<1x2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x6xf32> -> tensor<1x2x4x6xf32>
  %p = mstep.softmax %s {dim = 3 : i64} : tensor<1x2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<1x2x4x6xf32>, tensor<1x2x6x5xf32> -> tensor<1x2x4x5xf32>
  return %o : tensor<1x2x4x5xf32>
}

// -----

// The backward of a float mask (it passes the gradient through unchanged)
// and of k scaled before its transpose (a division: dk = permute(dkT) / 4).
// CHECK-LABEL: func.func @backward_float_mask_scaled_k(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[K:[a-z0-9_]+]]: tensor<2x6x8xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>, %[[M:[a-z0-9_]+]]: tensor<4x6xf32>, %[[G:[a-z0-9_]+]]: tensor<2x4x5xf32>)
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<4x6xf32>) {scale = 2.500000e-01 : f64}
// CHECK-NEXT:    %[[DQ:[a-z0-9_]+]], %[[DK:[a-z0-9_]+]], %[[DV:[a-z0-9_]+]] = mstep.sdpa_backward %[[G]], %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<4x6xf32>) {scale = 2.500000e-01 : f64}
// CHECK-NEXT:    return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @backward_float_mask_scaled_k(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>, %m: tensor<4x6xf32>, %g: tensor<2x4x5xf32>)
    -> (tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32>) {
  %four = mstep.constant 4.000000e+00 : tensor<f32>
  %ks = mstep.div %k, %four : tensor<2x6x8xf32>, tensor<f32> -> tensor<2x6x8xf32>
  %kt = mstep.permute %ks {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %x = mstep.add %s, %m : tensor<2x4x6xf32>, tensor<4x6xf32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %x {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  %pt = mstep.permute %p {perm = array<i64: 0, 2, 1>} : tensor<2x4x6xf32> -> tensor<2x6x4xf32>
  %dv = mstep.matmul %pt, %g : tensor<2x6x4xf32>, tensor<2x4x5xf32> -> tensor<2x6x5xf32>
  %vt = mstep.permute %v {perm = array<i64: 0, 2, 1>} : tensor<2x6x5xf32> -> tensor<2x5x6xf32>
  %dp = mstep.matmul %g, %vt : tensor<2x4x5xf32>, tensor<2x5x6xf32> -> tensor<2x4x6xf32>
  %t1 = mstep.mul %dp, %p : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %t2 = mstep.sum %t1 {dims = array<i64: 2>, keepdim = true} : tensor<2x4x6xf32> -> tensor<2x4x1xf32>
  %t3 = mstep.sub %dp, %t2 : tensor<2x4x6xf32>, tensor<2x4x1xf32> -> tensor<2x4x6xf32>
  %dx = mstep.mul %p, %t3 : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %ktt = mstep.permute %kt {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
  %dq = mstep.matmul %dx, %ktt : tensor<2x4x6xf32>, tensor<2x6x8xf32> -> tensor<2x4x8xf32>
  %qt = mstep.permute %q {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %dkt = mstep.matmul %qt, %dx : tensor<2x8x4xf32>, tensor<2x4x6xf32> -> tensor<2x8x6xf32>
  %dks = mstep.permute %dkt {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
  %dk = mstep.div %dks, %four : tensor<2x6x8xf32>, tensor<f32> -> tensor<2x6x8xf32>
  return %o, %dq, %dk, %dv : tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32>
}

// -----

// The backward autograd records for attention with a bool mask, dropout
// and the scale on the scores becomes one sdpa_backward, with the same
// options, at the place of the chain's first op. dO flows in; dq, dk, dv
// flow out. The transposes and fills only the chains read go too.
// CHECK-LABEL: func.func @backward(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[K:[a-z0-9_]+]]: tensor<2x6x8xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>, %[[M:[a-z0-9_]+]]: tensor<2x1x6xi1>, %[[RNG:[a-z0-9_]+]]: tensor<2xi64>, %[[G:[a-z0-9_]+]]: tensor<2x4x5xf32>)
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<2x1x6xi1>) rng(%[[RNG]]) {dropout_p = 1.000000e-01 : f64, rng_offset = 16 : i64, scale = 1.250000e-01 : f64} : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
// CHECK-NEXT:    %[[DQ:[a-z0-9_]+]], %[[DK:[a-z0-9_]+]], %[[DV:[a-z0-9_]+]] = mstep.sdpa_backward %[[G]], %[[Q]], %[[K]], %[[V]] mask(%[[M]] : tensor<2x1x6xi1>) rng(%[[RNG]]) {dropout_p = 1.000000e-01 : f64, rng_offset = 16 : i64, scale = 1.250000e-01 : f64} : tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32>
// CHECK-NEXT:    return %[[O]], %[[DQ]], %[[DK]], %[[DV]]
func.func @backward(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>, %m: tensor<2x1x6xi1>, %rng: tensor<2xi64>, %g: tensor<2x4x5xf32>)
    -> (tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32>) {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %y = mstep.mul %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %ninf = mstep.constant 0xFFF0000000000000 : tensor<f32>
  %x = mstep.where %m, %y, %ninf : tensor<2x1x6xi1>, tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %x {dim = 2 : i64} : tensor<2x4x6xf32>
  %pd = mstep.dropout %p, %rng {offset = 16 : i64, p = 1.000000e-01 : f64} : tensor<2x4x6xf32>
  %o = mstep.matmul %pd, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  // dv = pd^T @ dO; dPd = dO @ v^T; dP = dropout(dPd) replayed.
  %pdt = mstep.permute %pd {perm = array<i64: 0, 2, 1>} : tensor<2x4x6xf32> -> tensor<2x6x4xf32>
  %dv = mstep.matmul %pdt, %g : tensor<2x6x4xf32>, tensor<2x4x5xf32> -> tensor<2x6x5xf32>
  %vt = mstep.permute %v {perm = array<i64: 0, 2, 1>} : tensor<2x6x5xf32> -> tensor<2x5x6xf32>
  %dpd = mstep.matmul %g, %vt : tensor<2x4x5xf32>, tensor<2x5x6xf32> -> tensor<2x4x6xf32>
  %dp = mstep.dropout %dpd, %rng {offset = 16 : i64, p = 1.000000e-01 : f64} : tensor<2x4x6xf32>
  // Softmax backward: p * (dP - sum(dP * p)).
  %t1 = mstep.mul %dp, %p : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %t2 = mstep.sum %t1 {dims = array<i64: 2>, keepdim = true} : tensor<2x4x6xf32> -> tensor<2x4x1xf32>
  %t3 = mstep.sub %dp, %t2 : tensor<2x4x6xf32>, tensor<2x4x1xf32> -> tensor<2x4x6xf32>
  %dx = mstep.mul %p, %t3 : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  // where and mul backward.
  %zero = mstep.constant 0.000000e+00 : tensor<f32>
  %zeros = mstep.full %zero : tensor<f32> -> tensor<2x4x6xf32>
  %dy = mstep.where %m, %dx, %zeros : tensor<2x1x6xi1>, tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %ds = mstep.mul %dy, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  // matmul backward, then the transpose's.
  %ktt = mstep.permute %kt {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
  %dq = mstep.matmul %ds, %ktt : tensor<2x4x6xf32>, tensor<2x6x8xf32> -> tensor<2x4x8xf32>
  %qt = mstep.permute %q {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %dkt = mstep.matmul %qt, %ds : tensor<2x8x4xf32>, tensor<2x4x6xf32> -> tensor<2x8x6xf32>
  %dk = mstep.permute %dkt {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
  return %o, %dq, %dk, %dv : tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32>
}

// -----

// GPT's form after canonicalize: heads split by one permute each, and k's
// head permute composed with its transpose ([0, 2, 3, 1]); a causal mask.
// sdpa's key is k permuted [0, 2, 1, 3]; dk goes back through the inverse.
// dq and dv feed the heads' merge as before.
// CHECK-LABEL: func.func @backward_heads(
// CHECK-SAME:      %[[Q4:[a-z0-9_]+]]: tensor<1x4x2x8xf32>, %[[K4:[a-z0-9_]+]]: tensor<1x4x2x8xf32>, %[[V:[a-z0-9_]+]]: tensor<1x2x4x8xf32>, %[[G:[a-z0-9_]+]]: tensor<1x2x4x8xf32>)
// CHECK-NEXT:    %[[K:.*]] = mstep.permute %[[K4]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NEXT:    %[[Q:.*]] = mstep.permute %[[Q4]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] {is_causal = true, scale = 0.35355338454246521 : f64}
// CHECK-NEXT:    %[[DQ:[a-z0-9_]+]], %[[DK:[a-z0-9_]+]], %[[DV:[a-z0-9_]+]] = mstep.sdpa_backward %[[G]], %[[Q]], %[[K]], %[[V]] {is_causal = true, scale = 0.35355338454246521 : f64}
// CHECK-NEXT:    %[[DK4:.*]] = mstep.permute %[[DK]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
// CHECK-NEXT:    %[[DQ4:.*]] = mstep.permute %[[DQ]] {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
// CHECK-NEXT:    return %[[O]], %[[DQ4]], %[[DK4]], %[[DV]]
func.func @backward_heads(%q4: tensor<1x4x2x8xf32>, %k4: tensor<1x4x2x8xf32>, %v: tensor<1x2x4x8xf32>, %g: tensor<1x2x4x8xf32>)
    -> (tensor<1x2x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4x8xf32>) {
  %q = mstep.permute %q4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %kt = mstep.permute %k4 {perm = array<i64: 0, 2, 3, 1>} : tensor<1x4x2x8xf32> -> tensor<1x2x8x4xf32>
  %s = mstep.matmul %q, %kt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %c = mstep.constant 0.35355339059327373 : tensor<f32>
  %y = mstep.mul %s, %c : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %t = mstep.constant 1.000000e+00 : tensor<i1>
  %ones = mstep.full %t : tensor<i1> -> tensor<4x4xi1>
  %tri = mstep.tril %ones {diagonal = 0 : i64} : tensor<4x4xi1>
  %ninf = mstep.constant 0xFFF0000000000000 : tensor<f32>
  %x = mstep.where %tri, %y, %ninf : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %p = mstep.softmax %x {dim = 3 : i64} : tensor<1x2x4x4xf32>
  %o = mstep.matmul %p, %v : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  %pt = mstep.permute %p {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %dv = mstep.matmul %pt, %g : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  %vt = mstep.permute %v {perm = array<i64: 0, 1, 3, 2>} : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %dp = mstep.matmul %g, %vt : tensor<1x2x4x8xf32>, tensor<1x2x8x4xf32> -> tensor<1x2x4x4xf32>
  %t1 = mstep.mul %dp, %p : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %t2 = mstep.sum %t1 {dims = array<i64: 3>, keepdim = true} : tensor<1x2x4x4xf32> -> tensor<1x2x4x1xf32>
  %t3 = mstep.sub %dp, %t2 : tensor<1x2x4x4xf32>, tensor<1x2x4x1xf32> -> tensor<1x2x4x4xf32>
  %dx = mstep.mul %p, %t3 : tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %zero = mstep.constant 0.000000e+00 : tensor<f32>
  %zeros = mstep.full %zero : tensor<f32> -> tensor<1x2x4x4xf32>
  %dy = mstep.where %tri, %dx, %zeros : tensor<4x4xi1>, tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x4x4xf32>
  %ds = mstep.mul %dy, %c : tensor<1x2x4x4xf32>, tensor<f32> -> tensor<1x2x4x4xf32>
  %kview = mstep.permute %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x8xf32> -> tensor<1x2x4x8xf32>
  %dq = mstep.matmul %ds, %kview : tensor<1x2x4x4xf32>, tensor<1x2x4x8xf32> -> tensor<1x2x4x8xf32>
  %dq4 = mstep.permute %dq {perm = array<i64: 0, 2, 1, 3>} : tensor<1x2x4x8xf32> -> tensor<1x4x2x8xf32>
  %qt = mstep.permute %q4 {perm = array<i64: 0, 2, 3, 1>} : tensor<1x4x2x8xf32> -> tensor<1x2x8x4xf32>
  %dkt = mstep.matmul %qt, %ds : tensor<1x2x8x4xf32>, tensor<1x2x4x4xf32> -> tensor<1x2x8x4xf32>
  %dk4 = mstep.permute %dkt {perm = array<i64: 0, 3, 1, 2>} : tensor<1x2x8x4xf32> -> tensor<1x4x2x8xf32>
  return %o, %dq4, %dk4, %dv : tensor<1x2x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4x8xf32>
}

// -----

// The backward of a scaled q and a key that arrived transposed: dq is the
// gradient of q (the scale's backward goes too), and kT's gradient is
// sdpa_backward's dk transposed back.
// CHECK-LABEL: func.func @backward_scaled_q_pre_transposed_key(
// CHECK-SAME:      %[[Q:[a-z0-9_]+]]: tensor<2x4x8xf32>, %[[KT:[a-z0-9_]+]]: tensor<2x8x6xf32>, %[[V:[a-z0-9_]+]]: tensor<2x6x5xf32>, %[[G:[a-z0-9_]+]]: tensor<2x4x5xf32>)
// CHECK-NEXT:    %[[K:.*]] = mstep.permute %[[KT]] {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
// CHECK-NEXT:    %[[O:.*]] = mstep.sdpa %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64}
// CHECK-NEXT:    %[[DQ:[a-z0-9_]+]], %[[DK:[a-z0-9_]+]], %[[DV:[a-z0-9_]+]] = mstep.sdpa_backward %[[G]], %[[Q]], %[[K]], %[[V]] {scale = 1.250000e-01 : f64}
// CHECK-NEXT:    %[[DKT:.*]] = mstep.permute %[[DK]] {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
// CHECK-NEXT:    return %[[O]], %[[DQ]], %[[DKT]], %[[DV]]
func.func @backward_scaled_q_pre_transposed_key(%q: tensor<2x4x8xf32>, %kt: tensor<2x8x6xf32>, %v: tensor<2x6x5xf32>, %g: tensor<2x4x5xf32>)
    -> (tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x8x6xf32>, tensor<2x6x5xf32>) {
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %qs = mstep.mul %q, %c : tensor<2x4x8xf32>, tensor<f32> -> tensor<2x4x8xf32>
  %s = mstep.matmul %qs, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %s {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  %pt = mstep.permute %p {perm = array<i64: 0, 2, 1>} : tensor<2x4x6xf32> -> tensor<2x6x4xf32>
  %dv = mstep.matmul %pt, %g : tensor<2x6x4xf32>, tensor<2x4x5xf32> -> tensor<2x6x5xf32>
  %vt = mstep.permute %v {perm = array<i64: 0, 2, 1>} : tensor<2x6x5xf32> -> tensor<2x5x6xf32>
  %dp = mstep.matmul %g, %vt : tensor<2x4x5xf32>, tensor<2x5x6xf32> -> tensor<2x4x6xf32>
  %t1 = mstep.mul %p, %dp : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %t2 = mstep.sum %t1 {dims = array<i64: 2>, keepdim = true} : tensor<2x4x6xf32> -> tensor<2x4x1xf32>
  %t3 = mstep.sub %dp, %t2 : tensor<2x4x6xf32>, tensor<2x4x1xf32> -> tensor<2x4x6xf32>
  %dx = mstep.mul %t3, %p : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %ktt = mstep.permute %kt {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
  %dqs = mstep.matmul %dx, %ktt : tensor<2x4x6xf32>, tensor<2x6x8xf32> -> tensor<2x4x8xf32>
  %dq = mstep.mul %dqs, %c : tensor<2x4x8xf32>, tensor<f32> -> tensor<2x4x8xf32>
  %qst = mstep.permute %qs {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %dkt = mstep.matmul %qst, %dx : tensor<2x8x4xf32>, tensor<2x4x6xf32> -> tensor<2x8x6xf32>
  return %o, %dq, %dkt, %dv : tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x8x6xf32>, tensor<2x6x5xf32>
}

// -----

// Two attentions in one function (two layers): each forward pairs with its
// own backward, and each keeps its own options.
// CHECK-LABEL: func.func @two_layers(
// CHECK:         mstep.sdpa %{{.*}} {scale = 1.250000e-01 : f64}
// CHECK:         mstep.sdpa %{{.*}} {scale = 2.500000e-01 : f64}
// CHECK:         mstep.sdpa_backward %{{.*}} {scale = 2.500000e-01 : f64}
// CHECK:         mstep.sdpa_backward %{{.*}} {scale = 1.250000e-01 : f64}
// CHECK-NOT:     mstep.softmax
// CHECK-NOT:     mstep.matmul
func.func @two_layers(%x: tensor<2x4x8xf32>, %g: tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %c1 = mstep.constant 1.250000e-01 : tensor<f32>
  %xt = mstep.permute %x {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %s1 = mstep.matmul %x, %xt : tensor<2x4x8xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %y1 = mstep.mul %s1, %c1 : tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
  %p1 = mstep.softmax %y1 {dim = 2 : i64} : tensor<2x4x4xf32>
  %o1 = mstep.matmul %p1, %x : tensor<2x4x4xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %c2 = mstep.constant 2.500000e-01 : tensor<f32>
  %ot = mstep.permute %o1 {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %s2 = mstep.matmul %o1, %ot : tensor<2x4x8xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %y2 = mstep.mul %s2, %c2 : tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
  %p2 = mstep.softmax %y2 {dim = 2 : i64} : tensor<2x4x4xf32>
  %o2 = mstep.matmul %p2, %o1 : tensor<2x4x4xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  // Layer 2 backward: q, k and v are all o1; their gradients add up.
  %p2t = mstep.permute %p2 {perm = array<i64: 0, 2, 1>} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %dv2 = mstep.matmul %p2t, %g : tensor<2x4x4xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %dp2 = mstep.matmul %g, %ot : tensor<2x4x8xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %a2 = mstep.mul %dp2, %p2 : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %b2 = mstep.sum %a2 {dims = array<i64: 2>, keepdim = true} : tensor<2x4x4xf32> -> tensor<2x4x1xf32>
  %e2 = mstep.sub %dp2, %b2 : tensor<2x4x4xf32>, tensor<2x4x1xf32> -> tensor<2x4x4xf32>
  %dx2 = mstep.mul %p2, %e2 : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %ds2 = mstep.mul %dx2, %c2 : tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
  %dq2 = mstep.matmul %ds2, %o1 : tensor<2x4x4xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %dkt2 = mstep.matmul %ot, %ds2 : tensor<2x8x4xf32>, tensor<2x4x4xf32> -> tensor<2x8x4xf32>
  %dk2 = mstep.permute %dkt2 {perm = array<i64: 0, 2, 1>} : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
  %do1a = mstep.add %dq2, %dk2 : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %do1 = mstep.add %do1a, %dv2 : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  // Layer 1 backward.
  %p1t = mstep.permute %p1 {perm = array<i64: 0, 2, 1>} : tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %dv1 = mstep.matmul %p1t, %do1 : tensor<2x4x4xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  %dp1 = mstep.matmul %do1, %xt : tensor<2x4x8xf32>, tensor<2x8x4xf32> -> tensor<2x4x4xf32>
  %a1 = mstep.mul %dp1, %p1 : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %b1 = mstep.sum %a1 {dims = array<i64: 2>, keepdim = true} : tensor<2x4x4xf32> -> tensor<2x4x1xf32>
  %e1 = mstep.sub %dp1, %b1 : tensor<2x4x4xf32>, tensor<2x4x1xf32> -> tensor<2x4x4xf32>
  %dx1 = mstep.mul %p1, %e1 : tensor<2x4x4xf32>, tensor<2x4x4xf32> -> tensor<2x4x4xf32>
  %ds1 = mstep.mul %dx1, %c1 : tensor<2x4x4xf32>, tensor<f32> -> tensor<2x4x4xf32>
  %dq1 = mstep.matmul %ds1, %x : tensor<2x4x4xf32>, tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  return %o2, %dq1 : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Negative: a scale that is not a constant (a device scalar) is not folded
// into sdpa, so nothing matches.
// CHECK-LABEL: func.func @non_constant_scale(
// CHECK:         mstep.softmax
// CHECK-NOT:     mstep.sdpa
func.func @non_constant_scale(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>, %c: tensor<f32>) -> tensor<2x4x5xf32> {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %y = mstep.mul %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %y {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// Negative: softmax over the query dim, not the key dim.
// CHECK-LABEL: func.func @softmax_wrong_dim(
// CHECK:         mstep.softmax %{{.*}} {dim = 1 : i64}
// CHECK-NOT:     mstep.sdpa
func.func @softmax_wrong_dim(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>) -> tensor<2x4x5xf32> {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %s {dim = 1 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// Negative: the scaled scores are also returned; they would disappear.
// CHECK-LABEL: func.func @scores_read_elsewhere(
// CHECK:         mstep.softmax
// CHECK-NOT:     mstep.sdpa
func.func @scores_read_elsewhere(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>) -> (tensor<2x4x5xf32>, tensor<2x4x6xf32>) {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %y = mstep.mul %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %y {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o, %y : tensor<2x4x5xf32>, tensor<2x4x6xf32>
}

// -----

// The probabilities are read elsewhere: sdpa returns them
// (return_attn_probs) and the other reader takes that result.
// CHECK-LABEL: func.func @probs_read_elsewhere(
// CHECK-NEXT:    %[[O:[a-z0-9_]+]], %[[P:[a-z0-9_]+]] = mstep.sdpa %{{.*}} {return_attn_probs = true, scale = 1.250000e-01 : f64} : tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32> probs tensor<2x4x6xf32>
// CHECK-NEXT:    %[[E:.*]] = mstep.sum %[[P]]
// CHECK-NEXT:    return %[[O]], %[[E]]
func.func @probs_read_elsewhere(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>) -> (tensor<2x4x5xf32>, tensor<2x4xf32>) {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %c = mstep.constant 1.250000e-01 : tensor<f32>
  %y = mstep.mul %s, %c : tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %y {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  %e = mstep.sum %p {dims = array<i64: 2>, keepdim = false} : tensor<2x4x6xf32> -> tensor<2x4xf32>
  return %o, %e : tensor<2x4x5xf32>, tensor<2x4xf32>
}

// -----

// Negative: with dropout, sdpa can return only the probabilities after
// dropout; a reader of those before it blocks fusion.
// CHECK-LABEL: func.func @pre_dropout_probs_read_elsewhere(
// CHECK:         mstep.softmax
// CHECK-NOT:     mstep.sdpa
func.func @pre_dropout_probs_read_elsewhere(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>, %rng: tensor<2xi64>) -> (tensor<2x4x5xf32>, tensor<2x4x6xf32>) {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %s {dim = 2 : i64} : tensor<2x4x6xf32>
  %pd = mstep.dropout %p, %rng {offset = 0 : i64, p = 1.000000e-01 : f64} : tensor<2x4x6xf32>
  %o = mstep.matmul %pd, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o, %p : tensor<2x4x5xf32>, tensor<2x4x6xf32>
}

// -----

// A backward that differs from autograd's (dS is also returned) stays
// unfused; the forward is fused and hands it the probabilities. kT stays
// too: the unfused backward reads it.
// CHECK-LABEL: func.func @backward_not_matched(
// CHECK-NEXT:    %[[KT:.*]] = mstep.permute
// CHECK-NEXT:    %[[O:[a-z0-9_]+]], %[[P:[a-z0-9_]+]] = mstep.sdpa %{{.*}} {return_attn_probs = true, scale = 1.000000e+00 : f64}
// CHECK-NOT:     mstep.sdpa_backward
// CHECK:         mstep.permute %[[P]]
// CHECK:         mstep.mul %{{.*}}, %[[P]]
// CHECK:         mstep.permute %[[KT]]
func.func @backward_not_matched(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>, %g: tensor<2x4x5xf32>)
    -> (tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x6x5xf32>, tensor<2x4x6xf32>) {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %s {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  %pt = mstep.permute %p {perm = array<i64: 0, 2, 1>} : tensor<2x4x6xf32> -> tensor<2x6x4xf32>
  %dv = mstep.matmul %pt, %g : tensor<2x6x4xf32>, tensor<2x4x5xf32> -> tensor<2x6x5xf32>
  %vt = mstep.permute %v {perm = array<i64: 0, 2, 1>} : tensor<2x6x5xf32> -> tensor<2x5x6xf32>
  %dp = mstep.matmul %g, %vt : tensor<2x4x5xf32>, tensor<2x5x6xf32> -> tensor<2x4x6xf32>
  %t1 = mstep.mul %dp, %p : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %t2 = mstep.sum %t1 {dims = array<i64: 2>, keepdim = true} : tensor<2x4x6xf32> -> tensor<2x4x1xf32>
  %t3 = mstep.sub %dp, %t2 : tensor<2x4x6xf32>, tensor<2x4x1xf32> -> tensor<2x4x6xf32>
  %ds = mstep.mul %p, %t3 : tensor<2x4x6xf32>, tensor<2x4x6xf32> -> tensor<2x4x6xf32>
  %ktt = mstep.permute %kt {perm = array<i64: 0, 2, 1>} : tensor<2x8x6xf32> -> tensor<2x6x8xf32>
  %dq = mstep.matmul %ds, %ktt : tensor<2x4x6xf32>, tensor<2x6x8xf32> -> tensor<2x4x8xf32>
  return %o, %dq, %dv, %ds : tensor<2x4x5xf32>, tensor<2x4x8xf32>, tensor<2x6x5xf32>, tensor<2x4x6xf32>
}

// -----

// Negative: kT broadcasts over the batch (rank 2) while q has rank 3; sdpa
// needs q, k and v with identical leading dims.
// CHECK-LABEL: func.func @broadcast_key(
// CHECK:         mstep.softmax
// CHECK-NOT:     mstep.sdpa
func.func @broadcast_key(%q: tensor<2x4x8xf32>, %kt: tensor<8x6xf32>, %v: tensor<2x6x5xf32>) -> tensor<2x4x5xf32> {
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<8x6xf32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %s {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// Negative: v's batch differs (1 broadcast to 2).
// CHECK-LABEL: func.func @broadcast_value(
// CHECK:         mstep.softmax
// CHECK-NOT:     mstep.sdpa
func.func @broadcast_value(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<1x6x5xf32>) -> tensor<2x4x5xf32> {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %s {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<1x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}

// -----

// Negative: masking with a large finite value instead of -inf differs from
// sdpa on fully masked rows; not fused.
// CHECK-LABEL: func.func @finite_mask_fill(
// CHECK:         mstep.softmax
// CHECK-NOT:     mstep.sdpa
func.func @finite_mask_fill(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x6x5xf32>, %m: tensor<2x1x6xi1>) -> tensor<2x4x5xf32> {
  %kt = mstep.permute %k {perm = array<i64: 0, 2, 1>} : tensor<2x6x8xf32> -> tensor<2x8x6xf32>
  %s = mstep.matmul %q, %kt : tensor<2x4x8xf32>, tensor<2x8x6xf32> -> tensor<2x4x6xf32>
  %big = mstep.constant -1.000000e+09 : tensor<f32>
  %x = mstep.where %m, %s, %big : tensor<2x1x6xi1>, tensor<2x4x6xf32>, tensor<f32> -> tensor<2x4x6xf32>
  %p = mstep.softmax %x {dim = 2 : i64} : tensor<2x4x6xf32>
  %o = mstep.matmul %p, %v : tensor<2x4x6xf32>, tensor<2x6x5xf32> -> tensor<2x4x5xf32>
  return %o : tensor<2x4x5xf32>
}
