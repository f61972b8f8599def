// mstep-fuse-elementwise: fusible ops grouped into convex mstep.fusion
// regions. The output is verified by mstep-opt (dominance, region rules).
// RUN: mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file -mstep-fuse-elementwise | FileCheck %s
// Idempotence: a second run changes nothing, so the same checks hold.
// RUN: mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file -mstep-fuse-elementwise -mstep-fuse-elementwise | FileCheck %s
// The input limit (only @input_limit has LIMIT checks).
// RUN: mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file -mstep-fuse-elementwise="max-inputs=3" | FileCheck %s --check-prefix=LIMIT
// An op that alone reads more than max-inputs tensors is an error.
// RUN: mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file -verify-diagnostics -mstep-fuse-elementwise="max-inputs=2" -o /dev/null

// A chain becomes one region with one input and one result.
// CHECK-LABEL: func.func @chain(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[F:.*]] = mstep.fusion ins(%[[X]] : tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%[[A:[a-z0-9_]+]]: tensor<4xf32>):
// CHECK-NEXT:      %[[E:.*]] = mstep.exp %[[A]] : tensor<4xf32>
// CHECK-NEXT:      %[[N:.*]] = mstep.neg %[[E]] : tensor<4xf32>
// CHECK-NEXT:      %[[R:.*]] = mstep.relu %[[N]] : tensor<4xf32>
// CHECK-NEXT:      mstep.yield %[[R]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F]] : tensor<4xf32>
func.func @chain(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mstep.exp %x : tensor<4xf32>
  %1 = mstep.neg %0 : tensor<4xf32>
  %2 = mstep.relu %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}

// -----

// A diamond: %a is computed once, inside the region; only %d leaves it.
// CHECK-LABEL: func.func @diamond(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[F:.*]] = mstep.fusion ins(%[[X]] : tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%[[A:[a-z0-9_]+]]: tensor<4xf32>):
// CHECK-NEXT:      %[[E:.*]] = mstep.exp %[[A]]
// CHECK-NEXT:      %[[N:.*]] = mstep.neg %[[E]]
// CHECK-NEXT:      %[[B:.*]] = mstep.abs %[[E]]
// CHECK-NEXT:      %[[S:.*]] = mstep.add %[[N]], %[[B]]
// CHECK-NEXT:      mstep.yield %[[S]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F]]
// CHECK-NOT:     mstep.exp
func.func @diamond(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = mstep.exp %x : tensor<4xf32>
  %b = mstep.neg %a : tensor<4xf32>
  %c = mstep.abs %a : tensor<4xf32>
  %d = mstep.add %b, %c : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %d : tensor<4xf32>
}

// -----

// Multi-output: %a is read by a reduction and %b by the return, so the
// region yields both, in program order. The region takes the place of its
// last op (%b), so the sum that read %a moves after it.
// CHECK-LABEL: func.func @multi_output(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[F:.*]]:2 = mstep.fusion ins(%[[X]] : tensor<4xf32>) -> tensor<4xf32>, tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%[[A:[a-z0-9_]+]]: tensor<4xf32>):
// CHECK-NEXT:      %[[E:.*]] = mstep.exp %[[A]]
// CHECK-NEXT:      %[[N:.*]] = mstep.neg %[[E]]
// CHECK-NEXT:      mstep.yield %[[E]], %[[N]] : tensor<4xf32>, tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S:.*]] = mstep.sum %[[F]]#0
// CHECK-NEXT:    return %[[S]], %[[F]]#1 : tensor<f32>, tensor<4xf32>
func.func @multi_output(%x: tensor<4xf32>) -> (tensor<f32>, tensor<4xf32>) {
  %a = mstep.exp %x : tensor<4xf32>
  %s = mstep.sum %a {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
  %b = mstep.neg %a : tensor<4xf32>
  return %s, %b : tensor<f32>, tensor<4xf32>
}

// -----

// Broadcast through mstep.expand is fused; inputs are deduplicated (%x is
// read twice) and ordered by first use.
// CHECK-LABEL: func.func @broadcast(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<2x3xf32>, %[[B:[a-z0-9_]+]]: tensor<3xf32>)
// CHECK-NEXT:    %[[F:.*]] = mstep.fusion ins(%[[B]], %[[X]] : tensor<3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32> {
// CHECK-NEXT:    ^bb0(%[[BB:[a-z0-9_]+]]: tensor<3xf32>, %[[XX:[a-z0-9_]+]]: tensor<2x3xf32>):
// CHECK-NEXT:      %[[E:.*]] = mstep.expand %[[BB]] : tensor<3xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[S:.*]] = mstep.add %[[XX]], %[[E]]
// CHECK-NEXT:      %[[M:.*]] = mstep.mul %[[S]], %[[XX]]
// CHECK-NEXT:      mstep.yield %[[M]] : tensor<2x3xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F]]
func.func @broadcast(%x: tensor<2x3xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %e = mstep.expand %b : tensor<3xf32> -> tensor<2x3xf32>
  %s = mstep.add %x, %e : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %m = mstep.mul %s, %x : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  return %m : tensor<2x3xf32>
}

// -----

// Casts are fused like any elementwise op.
// CHECK-LABEL: func.func @casts(
// CHECK-SAME:      %[[I:[a-z0-9_]+]]: tensor<4xi64>, %[[Y:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[F:.*]] = mstep.fusion ins(%[[I]], %[[Y]] : tensor<4xi64>, tensor<4xf32>) -> tensor<4xbf16> {
// CHECK-NEXT:    ^bb0(%[[II:[a-z0-9_]+]]: tensor<4xi64>, %[[YY:[a-z0-9_]+]]: tensor<4xf32>):
// CHECK-NEXT:      %[[C:.*]] = mstep.cast %[[II]] : tensor<4xi64> -> tensor<4xf32>
// CHECK-NEXT:      %[[M:.*]] = mstep.mul %[[C]], %[[YY]]
// CHECK-NEXT:      %[[H:.*]] = mstep.cast %[[M]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT:      mstep.yield %[[H]] : tensor<4xbf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F]]
func.func @casts(%i: tensor<4xi64>, %y: tensor<4xf32>) -> tensor<4xbf16> {
  %c = mstep.cast %i : tensor<4xi64> -> tensor<4xf32>
  %m = mstep.mul %c, %y : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %h = mstep.cast %m : tensor<4xf32> -> tensor<4xbf16>
  return %h : tensor<4xbf16>
}

// -----

// A constant is cloned into each region that reads it, never an input. %c
// has no user left and is erased; %k is still read by the return and stays.
// CHECK-LABEL: func.func @constants_cloned(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[K:.*]] = mstep.constant 3.000000e+00 : tensor<f32>
// CHECK-NEXT:    %[[F0:.*]] = mstep.fusion ins(%[[X]] : tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%[[A:[a-z0-9_]+]]: tensor<4xf32>):
// CHECK-NEXT:      %[[C0:.*]] = mstep.constant 2.000000e+00 : tensor<f32>
// CHECK-NEXT:      %[[K0:.*]] = mstep.constant 3.000000e+00 : tensor<f32>
// CHECK-NEXT:      %[[M:.*]] = mstep.mul %[[A]], %[[C0]]
// CHECK-NEXT:      %[[P:.*]] = mstep.add %[[M]], %[[K0]]
// CHECK-NEXT:      mstep.yield %[[P]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S:.*]] = mstep.sum %[[F0]]
// CHECK-NEXT:    %[[F1:.*]] = mstep.fusion ins(%[[S]] : tensor<f32>) -> tensor<f32> {
// CHECK-NEXT:    ^bb0(%[[B:[a-z0-9_]+]]: tensor<f32>):
// CHECK-NEXT:      %[[C1:.*]] = mstep.constant 2.000000e+00 : tensor<f32>
// CHECK-NEXT:      %[[D:.*]] = mstep.div %[[B]], %[[C1]]
// CHECK-NEXT:      mstep.yield %[[D]] : tensor<f32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F1]], %[[K]] : tensor<f32>, tensor<f32>
func.func @constants_cloned(%x: tensor<4xf32>) -> (tensor<f32>, tensor<f32>) {
  %k = mstep.constant 3.0 : tensor<f32>
  %c = mstep.constant 2.0 : tensor<f32>
  %m = mstep.mul %x, %c : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %p = mstep.add %m, %k : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %s = mstep.sum %p {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
  %d = mstep.div %s, %c : tensor<f32>, tensor<f32> -> tensor<f32>
  return %d, %k : tensor<f32>, tensor<f32>
}

// -----

// mstep.full of a constant: a region with no inputs at all.
// CHECK-LABEL: func.func @full_no_inputs(
// CHECK-NEXT:    %[[F:.*]] = mstep.fusion ins() -> tensor<4xf16> {
// CHECK-NEXT:      %[[C:.*]] = mstep.constant 1.000000e+00 : tensor<f16>
// CHECK-NEXT:      %[[L:.*]] = mstep.full %[[C]] : tensor<f16> -> tensor<4xf16>
// CHECK-NEXT:      %[[E:.*]] = mstep.exp %[[L]]
// CHECK-NEXT:      mstep.yield %[[E]] : tensor<4xf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F]]
func.func @full_no_inputs() -> tensor<4xf16> {
  %c = mstep.constant 1.0 : tensor<f16>
  %f = mstep.full %c : tensor<f16> -> tensor<4xf16>
  %e = mstep.exp %f : tensor<4xf16>
  return %e : tensor<4xf16>
}

// -----

// a -> b, a -> matmul -> c, (b, c) -> d: a and d must not share a region
// (the matmul would both read from and feed it: a cycle). d joins c instead,
// and the first region yields a for the matmul and b for d.
// CHECK-LABEL: func.func @non_fusible_in_the_middle(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<4x4xf32>, %[[W:[a-z0-9_]+]]: tensor<4x4xf32>)
// CHECK-NEXT:    %[[F0:.*]]:2 = mstep.fusion ins(%[[X]] : tensor<4x4xf32>) -> tensor<4x4xf32>, tensor<4x4xf32> {
// CHECK-NEXT:    ^bb0(%[[XX:[a-z0-9_]+]]: tensor<4x4xf32>):
// CHECK-NEXT:      %[[A:.*]] = mstep.exp %[[XX]]
// CHECK-NEXT:      %[[B:.*]] = mstep.neg %[[A]]
// CHECK-NEXT:      mstep.yield %[[A]], %[[B]] : tensor<4x4xf32>, tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[M:.*]] = mstep.matmul %[[F0]]#0, %[[W]]
// CHECK-NEXT:    %[[F1:.*]] = mstep.fusion ins(%[[M]], %[[F0]]#1 : tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:    ^bb0(%[[MM:[a-z0-9_]+]]: tensor<4x4xf32>, %[[BB:[a-z0-9_]+]]: tensor<4x4xf32>):
// CHECK-NEXT:      %[[C:.*]] = mstep.relu %[[MM]]
// CHECK-NEXT:      %[[D:.*]] = mstep.add %[[BB]], %[[C]]
// CHECK-NEXT:      mstep.yield %[[D]] : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F1]]
func.func @non_fusible_in_the_middle(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = mstep.exp %x : tensor<4x4xf32>
  %b = mstep.neg %a : tensor<4x4xf32>
  %m = mstep.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %c = mstep.relu %m : tensor<4x4xf32>
  %d = mstep.add %b, %c : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}

// -----

// The same with a single consumer: c = a + sum(a) cannot join a's region, a
// later user of a (neg) can. The region of a takes the place of the neg,
// after the add's region, which therefore moves after it (dominance).
// CHECK-LABEL: func.func @region_order(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[F0:.*]]:2 = mstep.fusion ins(%[[X]] : tensor<4xf32>) -> tensor<4xf32>, tensor<4xf32> {
// CHECK:           mstep.exp
// CHECK-NEXT:      mstep.neg
// CHECK-NEXT:      mstep.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[S:.*]] = mstep.sum %[[F0]]#0
// CHECK-NEXT:    %[[F1:.*]] = mstep.fusion ins(%[[F0]]#0, %[[S]] : tensor<4xf32>, tensor<f32>) -> tensor<4xf32> {
// CHECK:           mstep.add
// CHECK-NEXT:      mstep.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F1]], %[[F0]]#1
func.func @region_order(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = mstep.exp %x : tensor<4xf32>
  %s = mstep.sum %a {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
  %c = mstep.add %a, %s : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %n = mstep.neg %a : tensor<4xf32>
  return %c, %n : tensor<4xf32>, tensor<4xf32>
}

// -----

// Each region below is convex on its own, yet {p, b2, b1} together with
// {a1, a2} would be a cycle: a1 -> %m -> b1 and b2 -> %n -> a2. Merging b1
// would need the region between %m and %n, which come in the other order,
// so b1 stays alone and a2 joins a1 (after %n, before %m).
// CHECK-LABEL: func.func @no_cycle_through_siblings(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<4xf32>, %[[Y:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[P:.*]]:2 = mstep.fusion ins(%[[Y]] : tensor<4xf32>) -> tensor<4xf32>, tensor<4xf32> {
// CHECK:           mstep.exp
// CHECK-NEXT:      mstep.neg
// CHECK-NEXT:      mstep.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[N:.*]] = mstep.sum %[[P]]#1
// CHECK-NEXT:    %[[A:.*]]:2 = mstep.fusion ins(%[[X]], %[[N]] : tensor<4xf32>, tensor<f32>) -> tensor<4xf32>, tensor<4xf32> {
// CHECK:           mstep.exp
// CHECK-NEXT:      mstep.add
// CHECK-NEXT:      mstep.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[M:.*]] = mstep.sum %[[A]]#0
// CHECK-NEXT:    %[[B:.*]] = mstep.fusion ins(%[[P]]#0, %[[M]] : tensor<4xf32>, tensor<f32>) -> tensor<4xf32> {
// CHECK:           mstep.add
// CHECK-NEXT:      mstep.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[B]], %[[A]]#1
func.func @no_cycle_through_siblings(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a1 = mstep.exp %x : tensor<4xf32>
  %p = mstep.exp %y : tensor<4xf32>
  %b2 = mstep.neg %p : tensor<4xf32>
  %n = mstep.sum %b2 {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
  %m = mstep.sum %a1 {dims = array<i64: 0>, keepdim = false} : tensor<4xf32> -> tensor<f32>
  %b1 = mstep.add %p, %m : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %a2 = mstep.add %a1, %n : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  return %b1, %a2 : tensor<4xf32>, tensor<4xf32>
}

// -----

// Softmax, layer_norm and reductions are not fusible: they stay single ops
// between regions, and a lone elementwise op still gets a region.
// CHECK-LABEL: func.func @not_fusible(
// CHECK-NEXT:    %[[F0:.*]] = mstep.fusion ins(%{{.*}} : tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK:           mstep.exp
// CHECK-NEXT:      mstep.yield
// CHECK:         %[[SM:.*]] = mstep.softmax %[[F0]] {dim = 1 : i64} : tensor<2x4xf32>
// CHECK-NEXT:    %[[LN:.*]] = mstep.layer_norm %[[SM]]
// CHECK-NEXT:    %[[F1:.*]] = mstep.fusion ins(%[[LN]] : tensor<2x4xf32>) -> tensor<2x4xf32> {
// CHECK:           mstep.neg
// CHECK-NEXT:      mstep.yield
// CHECK:         %[[MX:.*]] = mstep.max %[[F1]]
// CHECK-NEXT:    return %[[MX]]
func.func @not_fusible(%x: tensor<2x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<2x1xf32> {
  %e = mstep.exp %x : tensor<2x4xf32>
  %s = mstep.softmax %e {dim = 1 : i64} : tensor<2x4xf32>
  %l = mstep.layer_norm %s weight(%w : tensor<4xf32>) bias(%b : tensor<4xf32>) {eps = 1.0e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  %n = mstep.neg %l : tensor<2x4xf32>
  %m = mstep.max %n {dims = array<i64: 1>, keepdim = true} : tensor<2x4xf32> -> tensor<2x1xf32>
  return %m : tensor<2x1xf32>
}

// -----

// Unconnected chains are separate regions (no sibling fusion), each in the
// place of its last op.
// CHECK-LABEL: func.func @independent_chains(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<4xf32>, %[[Y:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[F0:.*]] = mstep.fusion ins(%[[X]] : tensor<4xf32>)
// CHECK:           mstep.exp
// CHECK-NEXT:      mstep.relu
// CHECK-NEXT:      mstep.yield
// CHECK:         %[[F1:.*]] = mstep.fusion ins(%[[Y]] : tensor<4xf32>)
// CHECK:           mstep.neg
// CHECK-NEXT:      mstep.abs
// CHECK-NEXT:      mstep.yield
// CHECK:         return %[[F0]], %[[F1]]
func.func @independent_chains(%x: tensor<4xf32>, %y: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %a = mstep.exp %x : tensor<4xf32>
  %b = mstep.neg %y : tensor<4xf32>
  %c = mstep.relu %a : tensor<4xf32>
  %d = mstep.abs %b : tensor<4xf32>
  return %c, %d : tensor<4xf32>, tensor<4xf32>
}

// -----

// Dead fusible ops are erased, not given a region.
// CHECK-LABEL: func.func @dead(
// CHECK-NOT:     mstep.
// CHECK:         return
func.func @dead(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c = mstep.constant 2.0 : tensor<f32>
  %a = mstep.mul %x, %c : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
  %b = mstep.exp %a : tensor<4xf32>
  return %x : tensor<4xf32>
}

// -----

// Five inputs fit the default limit (16) in one region. With max-inputs=3
// the third add would make a fourth input, so it starts a new region, which
// the fourth add joins (inputs: the first region's result, %a3, %a4).
// CHECK-LABEL: func.func @input_limit(
// CHECK-NEXT:    %[[F:.*]] = mstep.fusion ins(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
// CHECK-COUNT-4:   mstep.add
// CHECK-NEXT:      mstep.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F]]
// LIMIT-LABEL: func.func @input_limit(
// LIMIT-SAME:      %[[A0:[a-z0-9_]+]]: tensor<4xf32>, %[[A1:[a-z0-9_]+]]: tensor<4xf32>, %[[A2:[a-z0-9_]+]]: tensor<4xf32>, %[[A3:[a-z0-9_]+]]: tensor<4xf32>, %[[A4:[a-z0-9_]+]]: tensor<4xf32>)
// LIMIT-NEXT:    %[[F0:.*]] = mstep.fusion ins(%[[A0]], %[[A1]], %[[A2]] : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
// LIMIT-COUNT-2:   mstep.add
// LIMIT-NEXT:      mstep.yield
// LIMIT-NEXT:    }
// LIMIT-NEXT:    %[[F1:.*]] = mstep.fusion ins(%[[F0]], %[[A3]], %[[A4]] : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
// LIMIT-COUNT-2:   mstep.add
// LIMIT-NEXT:      mstep.yield
// LIMIT-NEXT:    }
// LIMIT-NEXT:    return %[[F1]]
func.func @input_limit(%a0: tensor<4xf32>, %a1: tensor<4xf32>, %a2: tensor<4xf32>, %a3: tensor<4xf32>, %a4: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mstep.add %a0, %a1 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %1 = mstep.add %0, %a2 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %2 = mstep.add %1, %a3 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  %3 = mstep.add %2, %a4 : tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %3 : tensor<4xf32>
}

// -----

// An existing region is left alone; loose ops after it get a new region
// that reads its result (not merged into it).
// CHECK-LABEL: func.func @already_fused(
// CHECK-SAME:      %[[X:[a-z0-9_]+]]: tensor<4xf32>)
// CHECK-NEXT:    %[[F0:.*]] = mstep.fusion ins(%[[X]] : tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%[[A:[a-z0-9_]+]]: tensor<4xf32>):
// CHECK-NEXT:      %[[C:.*]] = mstep.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT:      %[[S:.*]] = mstep.add %[[A]], %[[C]]
// CHECK-NEXT:      mstep.yield %[[S]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %[[F1:.*]] = mstep.fusion ins(%[[F0]] : tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT:    ^bb0(%[[B:[a-z0-9_]+]]: tensor<4xf32>):
// CHECK-NEXT:      %[[T:.*]] = mstep.tanh %[[B]]
// CHECK-NEXT:      mstep.yield %[[T]] : tensor<4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    return %[[F1]]
func.func @already_fused(%x: tensor<4xf32>) -> tensor<4xf32> {
  %f = mstep.fusion ins(%x : tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %c = mstep.constant 1.0 : tensor<f32>
    %s = mstep.add %a, %c : tensor<4xf32>, tensor<f32> -> tensor<4xf32>
    mstep.yield %s : tensor<4xf32>
  }
  %t = mstep.tanh %f : tensor<4xf32>
  return %t : tensor<4xf32>
}

// -----

// With max-inputs=2 (the -verify-diagnostics RUN line) a where of three
// tensors cannot have a region of its own.
// CHECK-LABEL: func.func @where_three_inputs(
// CHECK:         mstep.fusion ins(%{{.*}}, %{{.*}}, %{{.*}} : tensor<4xi1>, tensor<4xf32>, tensor<4xf32>)
// CHECK:           mstep.where
func.func @where_three_inputs(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'mstep.where' reads 3 tensors but mstep-fuse-elementwise was given max-inputs=2; every fusible op needs a region of its own, so raise max-inputs to at least 3}}
  %w = mstep.where %c, %a, %b : tensor<4xi1>, tensor<4xf32>, tensor<4xf32> -> tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

// A custom op is a fusion boundary: the elementwise ops before and after it
// form two regions, and it stays at the top level between them.
// CHECK-LABEL: func.func @custom_op_boundary(
// CHECK-NEXT:    %[[F0:.*]] = mstep.fusion ins(
// CHECK:           mstep.exp
// CHECK:         }
// CHECK-NEXT:    %[[C:.*]] = mstep.custom "scaled_softplus"(%[[F0]]) {user_attrs = {beta = 2.000000e+00 : f64}} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %[[F1:.*]] = mstep.fusion ins(%[[C]] : tensor<4xf32>) -> tensor<4xf32> {
// CHECK:           mstep.neg
// CHECK:         }
// CHECK-NEXT:    return %[[F1]] : tensor<4xf32>
func.func @custom_op_boundary(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = mstep.exp %x : tensor<4xf32>
  %1 = mstep.custom "scaled_softplus"(%0) {user_attrs = {beta = 2.0 : f64}} : (tensor<4xf32>) -> tensor<4xf32>
  %2 = mstep.neg %1 : tensor<4xf32>
  return %2 : tensor<4xf32>
}
