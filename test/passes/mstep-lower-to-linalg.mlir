// mstep-lower-to-linalg: elementwise ops, fusion regions, reductions and
// matmul to linalg on tensors; every other mstep op stays. mstep-opt
// verifies the output (linalg's shape and map checks included).
// RUN: mstep-opt %s -split-input-file -mstep-lower-to-linalg | FileCheck %s
// The lowered IR prints in a form that parses and verifies again.
// RUN: mstep-opt %s -split-input-file -mstep-lower-to-linalg | mstep-opt -split-input-file | FileCheck %s
// The pass reports no errors of its own: only unsupported ops are left,
// never rejected.

// Float unary: one generic, identity maps, math op in the body.
// CHECK-DAG: #[[$ID2:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @float_unary(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3xf32>)
// CHECK:         %[[INIT:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK:         %[[R:.*]] = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:        ins(%[[X]] : tensor<2x3xf32>) outs(%[[INIT]] : tensor<2x3xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[E:.*]] = math.exp %[[IN]] : f32
// CHECK-NEXT:      linalg.yield %[[E]] : f32
// CHECK:         return %[[R]]
func.func @float_unary(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mstep.exp %x : tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// relu is maximumf with 0 (NaN propagates, as in torch.relu); rsqrt and
// the erf form of gelu: x * 0.5 * (1 + erf(x * (1/sqrt 2))).
// CHECK-LABEL: func.func @relu_rsqrt_gelu(
// CHECK:         linalg.generic
// CHECK:           %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[M:.*]] = arith.maximumf %{{.*}}, %[[Z]] : f32
// CHECK-NEXT:      linalg.yield %[[M]]
// CHECK:         linalg.generic
// CHECK:           math.rsqrt %{{.*}} : f32
// CHECK:         linalg.generic
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %{{.*}}: f32):
// CHECK-DAG:       %[[HALF:.*]] = arith.constant 5.000000e-01 : f32
// CHECK-DAG:       %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-DAG:       %[[RSQRT2:.*]] = arith.constant 0.707106769 : f32
// CHECK:           %[[S:.*]] = arith.mulf %[[X]], %[[RSQRT2]] : f32
// CHECK-NEXT:      %[[ERF:.*]] = math.erf %[[S]] : f32
// CHECK-NEXT:      %[[HX:.*]] = arith.mulf %[[X]], %[[HALF]] : f32
// CHECK-NEXT:      %[[P:.*]] = arith.addf %[[ONE]], %[[ERF]] : f32
// CHECK-NEXT:      %[[G:.*]] = arith.mulf %[[HX]], %[[P]] : f32
// CHECK-NEXT:      linalg.yield %[[G]] : f32
func.func @relu_rsqrt_gelu(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %0 = mstep.relu %x : tensor<4xf32>
  %1 = mstep.rsqrt %x : tensor<4xf32>
  %2 = mstep.gelu %x : tensor<4xf32>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

// bf16 computes in f32 inside the body: extend, compute, round once.
// CHECK-LABEL: func.func @bf16_in_f32(
// CHECK:         linalg.generic
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: bf16, %{{.*}}: bf16):
// CHECK-NEXT:      %[[W:.*]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT:      %[[T:.*]] = math.tanh %[[W]] : f32
// CHECK-NEXT:      %[[N:.*]] = arith.truncf %[[T]] : f32 to bf16
// CHECK-NEXT:      linalg.yield %[[N]] : bf16
// CHECK:         } -> tensor<8xbf16>
func.func @bf16_in_f32(%x: tensor<8xbf16>) -> tensor<8xbf16> {
  %0 = mstep.tanh %x : tensor<8xbf16>
  return %0 : tensor<8xbf16>
}

// -----

// Integer and bool binaries; broadcasting maps drop the missing leading dim
// and read a 0-d operand with an empty map.
// CHECK-DAG: #[[$ID2:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-DAG: #[[$SCALAR:.+]] = affine_map<(d0, d1) -> ()>
// CHECK-LABEL: func.func @int_binary(
// CHECK-SAME:      %[[A:[a-z0-9_]+]]: tensor<2x3xi64>, %[[B:[a-z0-9_]+]]: tensor<3xi64>, %[[S:[a-z0-9_]+]]: tensor<i64>, %[[P:[a-z0-9_]+]]: tensor<4xi1>
// CHECK:         linalg.generic {indexing_maps = [#[[$ID2]], #[[$ROW]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:        ins(%[[A]], %[[B]] : tensor<2x3xi64>, tensor<3xi64>)
// CHECK:           arith.addi %{{.*}}, %{{.*}} : i64
// CHECK:         linalg.generic {indexing_maps = [#[[$ID2]], #[[$SCALAR]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:        ins(%[[A]], %[[S]] : tensor<2x3xi64>, tensor<i64>)
// CHECK:           math.ipowi %{{.*}}, %{{.*}} : i64
// CHECK:         linalg.generic
// CHECK:           arith.maxsi %{{.*}}, %{{.*}} : i64
// Bool add is or, bool mul is and (PyTorch's bool arithmetic).
// CHECK:         linalg.generic
// CHECK:           arith.ori %{{.*}}, %{{.*}} : i1
// CHECK:         linalg.generic
// CHECK:           arith.andi %{{.*}}, %{{.*}} : i1
func.func @int_binary(%a: tensor<2x3xi64>, %b: tensor<3xi64>, %s: tensor<i64>, %p: tensor<4xi1>)
    -> (tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<4xi1>, tensor<4xi1>) {
  %0 = mstep.add %a, %b : tensor<2x3xi64>, tensor<3xi64> -> tensor<2x3xi64>
  %1 = mstep.pow %a, %s : tensor<2x3xi64>, tensor<i64> -> tensor<2x3xi64>
  %2 = mstep.maximum %a, %b : tensor<2x3xi64>, tensor<3xi64> -> tensor<2x3xi64>
  %3 = mstep.add %p, %p : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  %4 = mstep.mul %p, %p : tensor<4xi1>, tensor<4xi1> -> tensor<4xi1>
  return %0, %1, %2, %3, %4 : tensor<2x3xi64>, tensor<2x3xi64>, tensor<2x3xi64>, tensor<4xi1>, tensor<4xi1>
}

// -----

// A size-1 dim that the result grows reads index 0.
// CHECK-DAG: #[[$COL:.+]] = affine_map<(d0, d1) -> (d0, 0)>
// CHECK-DAG: #[[$ONEROW:.+]] = affine_map<(d0, d1) -> (0, d1)>
// CHECK-DAG: #[[$ID2:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @broadcast_size_one(
// CHECK:         linalg.generic {indexing_maps = [#[[$COL]], #[[$ONEROW]], #[[$ID2]]]
// CHECK-SAME:        ins(%{{.*}}, %{{.*}} : tensor<4x1xf32>, tensor<1x5xf32>) outs(%{{.*}} : tensor<4x5xf32>)
// CHECK:           arith.subf
func.func @broadcast_size_one(%a: tensor<4x1xf32>, %b: tensor<1x5xf32>) -> tensor<4x5xf32> {
  %0 = mstep.sub %a, %b : tensor<4x1xf32>, tensor<1x5xf32> -> tensor<4x5xf32>
  return %0 : tensor<4x5xf32>
}

// -----

// Comparisons: ordered float predicates except ne (unordered, true on NaN);
// signed ints; unsigned bools (false < true).
// CHECK-LABEL: func.func @compare(
// CHECK:         arith.cmpf olt, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.cmpf une, %{{.*}}, %{{.*}} : f32
// CHECK:         arith.cmpi sge, %{{.*}}, %{{.*}} : i32
// CHECK:         arith.cmpi ult, %{{.*}}, %{{.*}} : i1
// CHECK:         arith.cmpf uno, %[[V:.*]], %[[V]] : f32
func.func @compare(%a: tensor<3xf32>, %b: tensor<3xf32>, %i: tensor<3xi32>, %p: tensor<3xi1>)
    -> (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>) {
  %0 = mstep.lt %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  %1 = mstep.ne %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  %2 = mstep.ge %i, %i : tensor<3xi32>, tensor<3xi32> -> tensor<3xi1>
  %3 = mstep.lt %p, %p : tensor<3xi1>, tensor<3xi1> -> tensor<3xi1>
  %4 = mstep.isnan %a : tensor<3xf32> -> tensor<3xi1>
  return %0, %1, %2, %3, %4 : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xi1>
}

// -----

// Casts: float to bool is "nonzero" (une 0, so NaN is true), float to int
// truncates, ints sign-extend, bools zero-extend, bf16 <-> f16 goes through
// f32.
// CHECK-LABEL: func.func @cast(
// CHECK:         ^bb0(%[[F:.*]]: f32, %{{.*}}: i1):
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[B:.*]] = arith.cmpf une, %[[F]], %[[Z]] : f32
// CHECK-NEXT:      linalg.yield %[[B]] : i1
// CHECK:         arith.fptosi %{{.*}} : f32 to i32
// CHECK:         arith.extsi %{{.*}} : i32 to i64
// CHECK:         arith.sitofp %{{.*}} : i32 to f64
// CHECK:         arith.extui %{{.*}} : i1 to i64
// CHECK:         arith.cmpi ne, %{{.*}}, %{{.*}} : i32
// CHECK:         ^bb0(%[[H:.*]]: bf16, %{{.*}}: f16):
// CHECK-NEXT:      %[[W:.*]] = arith.extf %[[H]] : bf16 to f32
// CHECK-NEXT:      %[[N:.*]] = arith.truncf %[[W]] : f32 to f16
// CHECK-NEXT:      linalg.yield %[[N]] : f16
func.func @cast(%f: tensor<2xf32>, %i: tensor<2xi32>, %p: tensor<2xi1>, %h: tensor<2xbf16>)
    -> (tensor<2xi1>, tensor<2xi32>, tensor<2xi64>, tensor<2xf64>, tensor<2xi64>, tensor<2xi1>, tensor<2xf16>) {
  %0 = mstep.cast %f : tensor<2xf32> -> tensor<2xi1>
  %1 = mstep.cast %f : tensor<2xf32> -> tensor<2xi32>
  %2 = mstep.cast %i : tensor<2xi32> -> tensor<2xi64>
  %3 = mstep.cast %i : tensor<2xi32> -> tensor<2xf64>
  %4 = mstep.cast %p : tensor<2xi1> -> tensor<2xi64>
  %5 = mstep.cast %i : tensor<2xi32> -> tensor<2xi1>
  %6 = mstep.cast %h : tensor<2xbf16> -> tensor<2xf16>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<2xi1>, tensor<2xi32>, tensor<2xi64>, tensor<2xf64>, tensor<2xi64>, tensor<2xi1>, tensor<2xf16>
}

// -----

// Creation and broadcasting outside a fusion: constant is a dense splat,
// full and expand are generics that read through a broadcasting map,
// where selects.
// CHECK-DAG: #[[$SCALAR:.+]] = affine_map<(d0, d1) -> ()>
// CHECK-DAG: #[[$ID2:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$EXPAND:.+]] = affine_map<(d0, d1, d2) -> (d1, 0)>
// CHECK-DAG: #[[$ID3:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @creation(
// CHECK-SAME:      %[[V:[a-z0-9_]+]]: tensor<f32>, %[[C:[a-z0-9_]+]]: tensor<2x1xf32>, %[[M:[a-z0-9_]+]]: tensor<2x3xi1>
// CHECK:         %[[K:.*]] = arith.constant dense<-2.500000e+00> : tensor<f32>
// CHECK:         %[[FULL:.*]] = linalg.generic {indexing_maps = [#[[$SCALAR]], #[[$ID2]]]
// CHECK-SAME:        ins(%[[V]] : tensor<f32>) outs(%{{.*}} : tensor<2x3xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      linalg.yield %[[IN]] : f32
// CHECK:         linalg.generic {indexing_maps = [#[[$EXPAND]], #[[$ID3]]]
// CHECK-SAME:        ins(%[[C]] : tensor<2x1xf32>) outs(%{{.*}} : tensor<4x2x3xf32>)
// CHECK:         linalg.generic {indexing_maps = [#[[$ID2]], #[[$ID2]], #[[$SCALAR]], #[[$ID2]]]
// CHECK-SAME:        ins(%[[M]], %[[FULL]], %[[K]] : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32>)
// CHECK-NEXT:    ^bb0(%[[B:.*]]: i1, %[[T:.*]]: f32, %[[F:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.select %[[B]], %[[T]], %[[F]] : f32
func.func @creation(%v: tensor<f32>, %c: tensor<2x1xf32>, %m: tensor<2x3xi1>)
    -> (tensor<4x2x3xf32>, tensor<2x3xf32>) {
  %k = mstep.constant -2.5 : tensor<f32>
  %f = mstep.full %v : tensor<f32> -> tensor<2x3xf32>
  %e = mstep.expand %c : tensor<2x1xf32> -> tensor<4x2x3xf32>
  %w = mstep.where %m, %f, %k : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  return %e, %w : tensor<4x2x3xf32>, tensor<2x3xf32>
}

// -----

// A fusion region with two results of one shape is ONE linalg.generic with
// two outs; inputs of smaller shapes get broadcasting maps; the expand
// inside is only a map; the constant is a scalar in the body.
// CHECK-DAG: #[[$ID2:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @fusion_multi_output(
// CHECK-SAME:      %[[A:[a-z0-9_]+]]: tensor<2x3xf32>, %[[B:[a-z0-9_]+]]: tensor<3xf32>
// CHECK-NOT:     mstep.
// CHECK:         %[[E0:.*]] = tensor.empty() : tensor<2x3xf32>
// CHECK-NEXT:    %[[E1:.*]] = tensor.empty() : tensor<2x3xi1>
// CHECK-NEXT:    %[[R:.*]]:2 = linalg.generic {indexing_maps = [#[[$ID2]], #[[$ROW]], #[[$ID2]], #[[$ID2]]], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME:        ins(%[[A]], %[[B]] : tensor<2x3xf32>, tensor<3xf32>) outs(%[[E0]], %[[E1]] : tensor<2x3xf32>, tensor<2x3xi1>)
// CHECK-NEXT:    ^bb0(%[[X:.*]]: f32, %[[Y:.*]]: f32, %{{.*}}: f32, %{{.*}}: i1):
// CHECK-NEXT:      %[[EXP:.*]] = math.exp %[[Y]] : f32
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[X]], %[[EXP]] : f32
// CHECK-NEXT:      %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:      %[[GT:.*]] = arith.cmpf ogt, %[[S]], %[[Z]] : f32
// CHECK-NEXT:      linalg.yield %[[S]], %[[GT]] : f32, i1
// CHECK-NEXT:    } -> (tensor<2x3xf32>, tensor<2x3xi1>)
// CHECK-NEXT:    return %[[R]]#0, %[[R]]#1
func.func @fusion_multi_output(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>) {
  %r:2 = mstep.fusion ins(%a, %b : tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>, tensor<2x3xi1> {
  ^bb0(%x: tensor<2x3xf32>, %y: tensor<3xf32>):
    %e = mstep.exp %y : tensor<3xf32>
    %ee = mstep.expand %e : tensor<3xf32> -> tensor<2x3xf32>
    %s = mstep.add %x, %ee : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %z = mstep.constant 0.000000e+00 : tensor<f32>
    %m = mstep.gt %s, %z : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    mstep.yield %s, %m : tensor<2x3xf32>, tensor<2x3xi1>
  }
  return %r#0, %r#1 : tensor<2x3xf32>, tensor<2x3xi1>
}

// -----

// Results of different shapes: the region is lowered op by op, one generic
// per op, and the smaller result is shared.
// CHECK-DAG: #[[$ID1:.+]] = affine_map<(d0) -> (d0)>
// CHECK-LABEL: func.func @fusion_mixed_shapes(
// CHECK-SAME:      %[[A:[a-z0-9_]+]]: tensor<2x3xf32>, %[[B:[a-z0-9_]+]]: tensor<3xf32>
// CHECK:         %[[E:.*]] = linalg.generic {indexing_maps = [#[[$ID1]], #[[$ID1]]], iterator_types = ["parallel"]} ins(%[[B]] : tensor<3xf32>)
// CHECK:           math.exp
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[E]] : tensor<2x3xf32>, tensor<3xf32>)
// CHECK:           arith.addf
// CHECK:         return %[[S]], %[[E]] : tensor<2x3xf32>, tensor<3xf32>
func.func @fusion_mixed_shapes(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<3xf32>) {
  %r:2 = mstep.fusion ins(%a, %b : tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>, tensor<3xf32> {
  ^bb0(%x: tensor<2x3xf32>, %y: tensor<3xf32>):
    %e = mstep.exp %y : tensor<3xf32>
    %s = mstep.add %x, %e : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    mstep.yield %s, %e : tensor<2x3xf32>, tensor<3xf32>
  }
  return %r#0, %r#1 : tensor<2x3xf32>, tensor<3xf32>
}

// -----

// sum without keepdim: fill 0, reduction iterator over dim 1, the output
// map drops it.
// CHECK-DAG: #[[$ID3:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$DROP1:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @sum(
// CHECK-SAME:      %[[X:.*]]: tensor<2x3x4xf32>)
// CHECK:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<2x4xf32>
// CHECK-NEXT:    %[[I:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E]] : tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.generic {indexing_maps = [#[[$ID3]], #[[$DROP1]]], iterator_types = ["parallel", "reduction", "parallel"]}
// CHECK-SAME:        ins(%[[X]] : tensor<2x3x4xf32>) outs(%[[I]] : tensor<2x4xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[IN]], %[[ACC]] : f32
// CHECK-NEXT:      linalg.yield %[[S]] : f32
// CHECK:         return %[[R]] : tensor<2x4xf32>
func.func @sum(%x: tensor<2x3x4xf32>) -> tensor<2x4xf32> {
  %0 = mstep.sum %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// max with keepdim: the accumulator starts at the type's minimum and
// tensor.expand_shape puts the reduced dims back as 1. A full reduction
// has a 0-d accumulator; min starts at +inf.
// CHECK-LABEL: func.func @max_min_keepdim(
// CHECK:         %[[LOW:.*]] = arith.constant -2147483648 : i32
// CHECK:         linalg.fill ins(%[[LOW]] : i32) outs(%{{.*}} : tensor<3xi32>)
// CHECK:         %[[M:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction"]
// CHECK:           arith.maxsi %{{.*}}, %{{.*}} : i32
// CHECK:         tensor.expand_shape %[[M]] {{\[}}[0, 1, 2]] output_shape [1, 3, 1] : tensor<3xi32> into tensor<1x3x1xi32>
// CHECK:         %[[INF:.*]] = arith.constant 0x7F800000 : f32
// CHECK:         linalg.fill ins(%[[INF]] : f32) outs(%{{.*}} : tensor<f32>)
// CHECK:         %[[N:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "reduction"]
// CHECK:           arith.minimumf %{{.*}}, %{{.*}} : f32
// CHECK:         tensor.expand_shape %[[N]] [] output_shape [1, 1] : tensor<f32> into tensor<1x1xf32>
func.func @max_min_keepdim(%i: tensor<2x3x4xi32>, %f: tensor<5x6xf32>) -> (tensor<1x3x1xi32>, tensor<1x1xf32>) {
  %0 = mstep.max %i {dims = array<i64: 0, 2>, keepdim = true} : tensor<2x3x4xi32> -> tensor<1x3x1xi32>
  %1 = mstep.min %f {dims = array<i64: 0, 1>, keepdim = true} : tensor<5x6xf32> -> tensor<1x1xf32>
  return %0, %1 : tensor<1x3x1xi32>, tensor<1x1xf32>
}

// -----

// mean: a sum, then a division by the number of reduced elements (2 * 4).
// A bf16 mean accumulates in f32 and rounds once, after the division.
// CHECK-LABEL: func.func @mean(
// CHECK:         %[[S:.*]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel", "reduction"]
// CHECK:           arith.addf
// CHECK:         linalg.generic {{.*}} ins(%[[S]] : tensor<3xf32>) outs(%{{.*}} : tensor<3xf32>)
// CHECK-NEXT:    ^bb0(%[[IN:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[N:.*]] = arith.constant 8.000000e+00 : f32
// CHECK-NEXT:      %[[D:.*]] = arith.divf %[[IN]], %[[N]] : f32
// CHECK-NEXT:      linalg.yield %[[D]] : f32
// CHECK:         linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<2xf32>)
// CHECK:         %[[H:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<2x5xbf16>) outs(%{{.*}} : tensor<2xf32>)
// CHECK-NEXT:    ^bb0(%[[B:.*]]: bf16, %[[ACC:.*]]: f32):
// CHECK-NEXT:      %[[W:.*]] = arith.extf %[[B]] : bf16 to f32
// CHECK-NEXT:      arith.addf %[[W]], %[[ACC]] : f32
// CHECK:         linalg.generic {{.*}} ins(%[[H]] : tensor<2xf32>) outs(%{{.*}} : tensor<2xbf16>)
// CHECK:           arith.divf
// CHECK-NEXT:      arith.truncf %{{.*}} : f32 to bf16
// CHECK:         tensor.expand_shape %{{.*}} {{\[}}[0, 1]] output_shape [2, 1] : tensor<2xbf16> into tensor<2x1xbf16>
func.func @mean(%x: tensor<2x3x4xf32>, %h: tensor<2x5xbf16>) -> (tensor<3xf32>, tensor<2x1xbf16>) {
  %0 = mstep.mean %x {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<3xf32>
  %1 = mstep.mean %h {dims = array<i64: 1>, keepdim = true} : tensor<2x5xbf16> -> tensor<2x1xbf16>
  return %0, %1 : tensor<3xf32>, tensor<2x1xbf16>
}

// -----

// 2-D matmul: linalg.matmul into a zero-filled accumulator.
// CHECK-LABEL: func.func @matmul_2d(
// CHECK-SAME:      %[[A:[a-z0-9_]+]]: tensor<2x3xf32>, %[[B:[a-z0-9_]+]]: tensor<3x5xf32>
// CHECK:         %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:    %[[E:.*]] = tensor.empty() : tensor<2x5xf32>
// CHECK-NEXT:    %[[I:.*]] = linalg.fill ins(%[[Z]] : f32) outs(%[[E]] : tensor<2x5xf32>) -> tensor<2x5xf32>
// CHECK-NEXT:    %[[R:.*]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<2x3xf32>, tensor<3x5xf32>) outs(%[[I]] : tensor<2x5xf32>) -> tensor<2x5xf32>
// CHECK-NEXT:    return %[[R]]
func.func @matmul_2d(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) -> tensor<2x5xf32> {
  %0 = mstep.matmul %a, %b : tensor<2x3xf32>, tensor<3x5xf32> -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// Batched matmul with equal batch dims: linalg.batch_matmul.
// CHECK-LABEL: func.func @matmul_batched(
// CHECK-SAME:      %[[A:[a-z0-9_]+]]: tensor<4x2x3xf32>, %[[B:[a-z0-9_]+]]: tensor<4x3x5xf32>
// CHECK:         %[[I:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%{{.*}} : tensor<4x2x5xf32>)
// CHECK-NEXT:    %[[R:.*]] = linalg.batch_matmul ins(%[[A]], %[[B]] : tensor<4x2x3xf32>, tensor<4x3x5xf32>) outs(%[[I]] : tensor<4x2x5xf32>) -> tensor<4x2x5xf32>
// CHECK-NEXT:    return %[[R]]
func.func @matmul_batched(%a: tensor<4x2x3xf32>, %b: tensor<4x3x5xf32>) -> tensor<4x2x5xf32> {
  %0 = mstep.matmul %a, %b : tensor<4x2x3xf32>, tensor<4x3x5xf32> -> tensor<4x2x5xf32>
  return %0 : tensor<4x2x5xf32>
}

// -----

// A 2-D rhs: lhs's batch dims fold into its rows. Broadcast batch dims
// (7x1 vs 6): both operands broadcast to 7x6, the batch dims collapse to
// 42, one batch_matmul, then the result splits back. bf16 accumulates in
// f32 and rounds at the end.
// CHECK-DAG: #[[$BCAST_L:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, 0, d2, d3)>
// CHECK-DAG: #[[$BCAST_R:.+]] = affine_map<(d0, d1, d2, d3) -> (d1, d2, d3)>
// CHECK-LABEL: func.func @matmul_broadcast(
// CHECK-SAME:      %[[A:[a-z0-9_]+]]: tensor<4x2x3xf32>, %[[B:[a-z0-9_]+]]: tensor<3x5xf32>, %[[C:[a-z0-9_]+]]: tensor<7x1x2x3xbf16>, %[[D:[a-z0-9_]+]]: tensor<6x3x5xbf16>
// CHECK:         %[[ROWS:.*]] = tensor.collapse_shape %[[A]] {{\[}}[0, 1], [2]] : tensor<4x2x3xf32> into tensor<8x3xf32>
// CHECK:         %[[P:.*]] = linalg.matmul ins(%[[ROWS]], %[[B]] : tensor<8x3xf32>, tensor<3x5xf32>) outs(%{{.*}} : tensor<8x5xf32>)
// CHECK:         %[[R0:.*]] = tensor.expand_shape %[[P]] {{\[}}[0, 1], [2]] output_shape [4, 2, 5] : tensor<8x5xf32> into tensor<4x2x5xf32>
// CHECK:         %[[CB:.*]] = linalg.generic {indexing_maps = [#[[$BCAST_L]], {{.*}}]{{.*}} ins(%[[C]] : tensor<7x1x2x3xbf16>) outs(%{{.*}} : tensor<7x6x2x3xbf16>)
// CHECK:         %[[C3:.*]] = tensor.collapse_shape %[[CB]] {{\[}}[0, 1], [2], [3]] : tensor<7x6x2x3xbf16> into tensor<42x2x3xbf16>
// CHECK:         %[[DB:.*]] = linalg.generic {indexing_maps = [#[[$BCAST_R]], {{.*}}]{{.*}} ins(%[[D]] : tensor<6x3x5xbf16>) outs(%{{.*}} : tensor<7x6x3x5xbf16>)
// CHECK:         %[[D3:.*]] = tensor.collapse_shape %[[DB]] {{\[}}[0, 1], [2], [3]] : tensor<7x6x3x5xbf16> into tensor<42x3x5xbf16>
// CHECK:         %[[Q:.*]] = linalg.batch_matmul ins(%[[C3]], %[[D3]] : tensor<42x2x3xbf16>, tensor<42x3x5xbf16>) outs(%{{.*}} : tensor<42x2x5xf32>)
// CHECK:         %[[Q4:.*]] = tensor.expand_shape %[[Q]] {{\[}}[0, 1], [2], [3]] output_shape [7, 6, 2, 5] : tensor<42x2x5xf32> into tensor<7x6x2x5xf32>
// CHECK:         %[[R1:.*]] = linalg.generic {{.*}} ins(%[[Q4]] : tensor<7x6x2x5xf32>) outs(%{{.*}} : tensor<7x6x2x5xbf16>)
// CHECK:           arith.truncf %{{.*}} : f32 to bf16
// CHECK:         return %[[R0]], %[[R1]]
func.func @matmul_broadcast(%a: tensor<4x2x3xf32>, %b: tensor<3x5xf32>, %c: tensor<7x1x2x3xbf16>, %d: tensor<6x3x5xbf16>)
    -> (tensor<4x2x5xf32>, tensor<7x6x2x5xbf16>) {
  %0 = mstep.matmul %a, %b : tensor<4x2x3xf32>, tensor<3x5xf32> -> tensor<4x2x5xf32>
  %1 = mstep.matmul %c, %d : tensor<7x1x2x3xbf16>, tensor<6x3x5xbf16> -> tensor<7x6x2x5xbf16>
  return %0, %1 : tensor<4x2x5xf32>, tensor<7x6x2x5xbf16>
}

// -----

// Unsupported ops stay as mstep ops (softmax, argmax, logsumexp); the
// elementwise op that reads one is lowered around it.
// CHECK-LABEL: func.func @unsupported_left_in_place(
// CHECK-SAME:      %[[X:.*]]: tensor<2x4xf32>)
// CHECK:         %[[S:.*]] = mstep.softmax %[[X]] {dim = 1 : i64} : tensor<2x4xf32>
// CHECK:         %[[E:.*]] = linalg.generic {{.*}} ins(%[[S]] : tensor<2x4xf32>)
// CHECK:           math.exp
// CHECK:         %[[A:.*]] = mstep.argmax %[[E]] {dims = array<i64: 1>, keepdim = false} : tensor<2x4xf32> -> tensor<2xi64>
// CHECK:         %[[L:.*]] = mstep.logsumexp %[[X]] {dims = array<i64: 1>, keepdim = false} : tensor<2x4xf32> -> tensor<2xf32>
// CHECK:         return %[[A]], %[[L]]
func.func @unsupported_left_in_place(%x: tensor<2x4xf32>) -> (tensor<2xi64>, tensor<2xf32>) {
  %0 = mstep.softmax %x {dim = 1 : i64} : tensor<2x4xf32>
  %1 = mstep.exp %0 : tensor<2x4xf32>
  %2 = mstep.argmax %1 {dims = array<i64: 1>, keepdim = false} : tensor<2x4xf32> -> tensor<2xi64>
  %3 = mstep.logsumexp %x {dims = array<i64: 1>, keepdim = false} : tensor<2x4xf32> -> tensor<2xf32>
  return %2, %3 : tensor<2xi64>, tensor<2xf32>
}
