// Round trip of every mstep op, one --split-input-file section per op
// family: custom syntax -> print -> parse again, and the same through the
// generic form (which also round-trips the properties).
// RUN: mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file | mstep-opt --load-plugin %custom_ops_plugin -split-input-file | FileCheck %s
// RUN: mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file -mlir-print-op-generic | mstep-opt --load-plugin %custom_ops_plugin -split-input-file | FileCheck %s

//===----------------------------------------------------------------------===//
// Creation
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @creation(
func.func @creation(%v: tensor<f32>, %rng: tensor<2xi64>) {
  // CHECK: mstep.constant 2.500000e+00 : tensor<f32>
  %c = mstep.constant 2.5 : tensor<f32>
  // CHECK: mstep.constant -3.000000e+00 : tensor<i64>
  %ci = mstep.constant -3.0 : tensor<i64>
  // CHECK: mstep.constant 1.000000e+00 : tensor<i1>
  %cb = mstep.constant 1.0 : tensor<i1>
  // CHECK: mstep.full %{{.*}} : tensor<f32> -> tensor<2x3xf32>
  %f = mstep.full %v : tensor<f32> -> tensor<2x3xf32>
  // CHECK: mstep.arange {start = 0.000000e+00 : f64, step = 2.000000e+00 : f64} : tensor<5xi64>
  %a = mstep.arange {start = 0.0 : f64, step = 2.0 : f64} : tensor<5xi64>
  // CHECK: mstep.rand %{{.*}} {offset = 0 : i64} : tensor<3x4xf32>
  %r = mstep.rand %rng {offset = 0 : i64} : tensor<3x4xf32>
  // CHECK: mstep.randn %{{.*}} {offset = 12 : i64} : tensor<3x4xbf16>
  %n = mstep.randn %rng {offset = 12 : i64} : tensor<3x4xbf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @unary(
func.func @unary(%f: tensor<2x3xf32>, %h: tensor<4xf16>, %i: tensor<2x3xi32>, %b: tensor<2x3xi1>) {
  // CHECK: mstep.neg %{{.*}} : tensor<2x3xi32>
  %0 = mstep.neg %i : tensor<2x3xi32>
  // CHECK: mstep.abs %{{.*}} : tensor<2x3xf32>
  %1 = mstep.abs %f : tensor<2x3xf32>
  // CHECK: mstep.exp %{{.*}} : tensor<2x3xf32>
  %2 = mstep.exp %f : tensor<2x3xf32>
  // CHECK: mstep.log %{{.*}} : tensor<4xf16>
  %3 = mstep.log %h : tensor<4xf16>
  // CHECK: mstep.log1p %{{.*}} : tensor<2x3xf32>
  %4 = mstep.log1p %f : tensor<2x3xf32>
  // CHECK: mstep.sqrt %{{.*}} : tensor<2x3xf32>
  %5 = mstep.sqrt %f : tensor<2x3xf32>
  // CHECK: mstep.rsqrt %{{.*}} : tensor<2x3xf32>
  %6 = mstep.rsqrt %f : tensor<2x3xf32>
  // CHECK: mstep.sin %{{.*}} : tensor<2x3xf32>
  %7 = mstep.sin %f : tensor<2x3xf32>
  // CHECK: mstep.cos %{{.*}} : tensor<2x3xf32>
  %8 = mstep.cos %f : tensor<2x3xf32>
  // CHECK: mstep.tanh %{{.*}} : tensor<2x3xf32>
  %9 = mstep.tanh %f : tensor<2x3xf32>
  // CHECK: mstep.sigmoid %{{.*}} : tensor<2x3xf32>
  %10 = mstep.sigmoid %f : tensor<2x3xf32>
  // CHECK: mstep.relu %{{.*}} : tensor<2x3xi32>
  %11 = mstep.relu %i : tensor<2x3xi32>
  // CHECK: mstep.gelu %{{.*}} : tensor<2x3xf32>
  %12 = mstep.gelu %f : tensor<2x3xf32>
  // CHECK: mstep.gelu %{{.*}} {approximate = #mstep.gelu_approximation<tanh>} : tensor<2x3xf32>
  %13 = mstep.gelu %f {approximate = #mstep.gelu_approximation<tanh>} : tensor<2x3xf32>
  // CHECK: mstep.silu %{{.*}} : tensor<2x3xf32>
  %14 = mstep.silu %f : tensor<2x3xf32>
  // CHECK: mstep.erf %{{.*}} : tensor<2x3xf32>
  %15 = mstep.erf %f : tensor<2x3xf32>
  // CHECK: mstep.reciprocal %{{.*}} : tensor<2x3xf32>
  %16 = mstep.reciprocal %f : tensor<2x3xf32>
  // CHECK: mstep.isnan %{{.*}} : tensor<2x3xf32> -> tensor<2x3xi1>
  %17 = mstep.isnan %f : tensor<2x3xf32> -> tensor<2x3xi1>
  // CHECK: mstep.isfinite %{{.*}} : tensor<4xf16> -> tensor<4xi1>
  %18 = mstep.isfinite %h : tensor<4xf16> -> tensor<4xi1>
  // CHECK: mstep.logical_not %{{.*}} : tensor<2x3xi1>
  %19 = mstep.logical_not %b : tensor<2x3xi1>
  // CHECK: mstep.cast %{{.*}} : tensor<2x3xi32> -> tensor<2x3xf32>
  %20 = mstep.cast %i : tensor<2x3xi32> -> tensor<2x3xf32>
  return
}

// CHECK-LABEL: func.func @binary(
func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %s: tensor<f32>, %i: tensor<4x1xi64>, %j: tensor<5xi64>, %p: tensor<2x3xi1>, %q: tensor<1x3xi1>) {
  // CHECK: mstep.add %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %0 = mstep.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: mstep.sub %{{.*}}, %{{.*}} : tensor<4x1xi64>, tensor<5xi64> -> tensor<4x5xi64>
  %1 = mstep.sub %i, %j : tensor<4x1xi64>, tensor<5xi64> -> tensor<4x5xi64>
  // CHECK: mstep.mul %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %2 = mstep.mul %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  // CHECK: mstep.div %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %3 = mstep.div %s, %a : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: mstep.pow %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = mstep.pow %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  // CHECK: mstep.maximum %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %5 = mstep.maximum %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  // CHECK: mstep.minimum %{{.*}}, %{{.*}} : tensor<4x1xi64>, tensor<5xi64> -> tensor<4x5xi64>
  %6 = mstep.minimum %i, %j : tensor<4x1xi64>, tensor<5xi64> -> tensor<4x5xi64>
  // CHECK: mstep.eq %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %7 = mstep.eq %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  // CHECK: mstep.ne %{{.*}}, %{{.*}} : tensor<4x1xi64>, tensor<5xi64> -> tensor<4x5xi1>
  %8 = mstep.ne %i, %j : tensor<4x1xi64>, tensor<5xi64> -> tensor<4x5xi1>
  // CHECK: mstep.lt %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  %9 = mstep.lt %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  // CHECK: mstep.le %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  %10 = mstep.le %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  // CHECK: mstep.gt %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %11 = mstep.gt %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  // CHECK: mstep.ge %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %12 = mstep.ge %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  // CHECK: mstep.logical_and %{{.*}}, %{{.*}} : tensor<2x3xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  %13 = mstep.logical_and %p, %q : tensor<2x3xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  // CHECK: mstep.logical_or %{{.*}}, %{{.*}} : tensor<2x3xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  %14 = mstep.logical_or %p, %q : tensor<2x3xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  // CHECK: mstep.where %{{.*}}, %{{.*}}, %{{.*}} : tensor<1x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %15 = mstep.where %q, %a, %s : tensor<1x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @fusion(
func.func @fusion(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>) {
  // CHECK: mstep.fusion ins(%{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>, tensor<2x3xi1> {
  %r:2 = mstep.fusion ins(%a, %b : tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>, tensor<2x3xi1> {
  // CHECK: ^bb0(%{{.*}}: tensor<2x3xf32>, %{{.*}}: tensor<3xf32>):
  ^bb0(%x: tensor<2x3xf32>, %y: tensor<3xf32>):
    // CHECK: mstep.expand %{{.*}} : tensor<3xf32> -> tensor<2x3xf32>
    %e = mstep.expand %y : tensor<3xf32> -> tensor<2x3xf32>
    // CHECK: mstep.add %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %s = mstep.add %x, %e : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    // CHECK: mstep.constant 0.000000e+00 : tensor<f32>
    %z = mstep.constant 0.0 : tensor<f32>
    // CHECK: mstep.gt %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    %m = mstep.gt %s, %z : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    // CHECK: mstep.yield %{{.*}}, %{{.*}} : tensor<2x3xf32>, tensor<2x3xi1>
    mstep.yield %s, %m : tensor<2x3xf32>, tensor<2x3xi1>
  }
  return %r#0, %r#1 : tensor<2x3xf32>, tensor<2x3xi1>
}

// CHECK-LABEL: func.func @fusion_no_inputs(
func.func @fusion_no_inputs() -> tensor<4xf16> {
  // CHECK: mstep.fusion ins() -> tensor<4xf16> {
  %r = mstep.fusion ins() -> tensor<4xf16> {
    // CHECK: mstep.constant 1.000000e+00 : tensor<f16>
    %c = mstep.constant 1.0 : tensor<f16>
    // CHECK: mstep.full %{{.*}} : tensor<f16> -> tensor<4xf16>
    %f = mstep.full %c : tensor<f16> -> tensor<4xf16>
    // CHECK: mstep.yield %{{.*}} : tensor<4xf16>
    mstep.yield %f : tensor<4xf16>
  }
  return %r : tensor<4xf16>
}

// -----

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @reductions(
func.func @reductions(%x: tensor<2x3x4xf32>, %i: tensor<2x3xi64>, %z: tensor<f32>) {
  // CHECK: mstep.sum %{{.*}} {dims = array<i64: 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x4xf32>
  %0 = mstep.sum %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x4xf32>
  // CHECK: mstep.sum %{{.*}} {dims = array<i64: 0, 1>, keepdim = true} : tensor<2x3xi64> -> tensor<1x1xi64>
  %1 = mstep.sum %i {dims = array<i64: 0, 1>, keepdim = true} : tensor<2x3xi64> -> tensor<1x1xi64>
  // CHECK: mstep.mean %{{.*}} {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<3xf32>
  %2 = mstep.mean %x {dims = array<i64: 0, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<3xf32>
  // CHECK: mstep.max %{{.*}} {dims = array<i64: 2>, keepdim = true} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  %3 = mstep.max %x {dims = array<i64: 2>, keepdim = true} : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
  // CHECK: mstep.min %{{.*}} {dims = array<i64: 0>, keepdim = false} : tensor<2x3xi64> -> tensor<3xi64>
  %4 = mstep.min %i {dims = array<i64: 0>, keepdim = false} : tensor<2x3xi64> -> tensor<3xi64>
  // CHECK: mstep.argmax %{{.*}} {dims = array<i64: 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x4xi64>
  %5 = mstep.argmax %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x4xi64>
  // CHECK: mstep.argmax %{{.*}} {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<i64>
  %6 = mstep.argmax %x {dims = array<i64: 0, 1, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<i64>
  // CHECK: mstep.logsumexp %{{.*}} {dims = array<i64: 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x3xf32>
  %7 = mstep.logsumexp %x {dims = array<i64: 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2x3xf32>
  // CHECK: mstep.var %{{.*}} {correction = 1 : i64, dims = array<i64: 1, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2xf32>
  %8 = mstep.var %x {correction = 1 : i64, dims = array<i64: 1, 2>, keepdim = false} : tensor<2x3x4xf32> -> tensor<2xf32>
  // CHECK: mstep.sum %{{.*}} {dims = array<i64>, keepdim = false} : tensor<f32> -> tensor<f32>
  %9 = mstep.sum %z {dims = array<i64>, keepdim = false} : tensor<f32> -> tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @shapes(
func.func @shapes(%x: tensor<2x3xf32>, %c: tensor<3x1xf32>, %w: tensor<2x6xf32>, %idx: tensor<2x2xi64>, %sel: tensor<4xi32>, %v: tensor<f32>, %src: tensor<2x2xf32>, %rows: tensor<4x3xf32>, %part: tensor<2x2xf32>) {
  // CHECK: mstep.reshape %{{.*}} : tensor<2x3xf32> -> tensor<6xf32>
  %0 = mstep.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  // CHECK: mstep.permute %{{.*}} {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %1 = mstep.permute %x {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  // CHECK: mstep.expand %{{.*}} : tensor<3x1xf32> -> tensor<2x3x4xf32>
  %2 = mstep.expand %c : tensor<3x1xf32> -> tensor<2x3x4xf32>
  // CHECK: mstep.slice %{{.*}} {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>
  %3 = mstep.slice %w {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>
  // CHECK: mstep.cat %{{.*}}, %{{.*}} {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x6xf32> -> tensor<2x9xf32>
  %4 = mstep.cat %x, %w {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x6xf32> -> tensor<2x9xf32>
  // CHECK: mstep.gather %{{.*}}, %{{.*}} {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x2xi64> -> tensor<2x2xf32>
  %5 = mstep.gather %x, %idx {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x2xi64> -> tensor<2x2xf32>
  // CHECK: mstep.index_select %{{.*}}, %{{.*}} {dim = 1 : i64} : tensor<2x3xf32>, tensor<4xi32> -> tensor<2x4xf32>
  %6 = mstep.index_select %x, %sel {dim = 1 : i64} : tensor<2x3xf32>, tensor<4xi32> -> tensor<2x4xf32>
  // CHECK: mstep.pad %{{.*}}, %{{.*}} {pads = array<i64: 1, 2, 0, -1>} : tensor<2x3xf32>, tensor<f32> -> tensor<1x6xf32>
  %7 = mstep.pad %x, %v {pads = array<i64: 1, 2, 0, -1>} : tensor<2x3xf32>, tensor<f32> -> tensor<1x6xf32>
  // CHECK: mstep.triu %{{.*}} {diagonal = 1 : i64} : tensor<2x3xf32>
  %8 = mstep.triu %x {diagonal = 1 : i64} : tensor<2x3xf32>
  // CHECK: mstep.tril %{{.*}} {diagonal = -1 : i64} : tensor<2x3xf32>
  %9 = mstep.tril %x {diagonal = -1 : i64} : tensor<2x3xf32>
  // CHECK: mstep.scatter_add %{{.*}}, %{{.*}}, %{{.*}} {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>
  %10 = mstep.scatter_add %x, %idx, %src {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>
  // CHECK: mstep.index_add %{{.*}}, %{{.*}}, %{{.*}} {dim = 0 : i64} : tensor<4x3xf32>, tensor<4xi32>, tensor<4x3xf32>
  %11 = mstep.index_add %rows, %sel, %rows {dim = 0 : i64} : tensor<4x3xf32>, tensor<4xi32>, tensor<4x3xf32>
  // CHECK: mstep.slice_scatter %{{.*}}, %{{.*}} {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6xf32>, tensor<2x2xf32>
  %12 = mstep.slice_scatter %w, %part {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6xf32>, tensor<2x2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Linear algebra, convolution, pooling
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @linalg(
func.func @linalg(%a: tensor<4x2x3xf32>, %b: tensor<3x5xf32>, %ai: tensor<2x3xi32>, %bi: tensor<7x3x2xi32>,
                  %img: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %bias: tensor<4xf32>,
                  %gimg: tensor<2x4x5x5xbf16>, %gw: tensor<6x2x3x3xbf16>,
                  %pin: tensor<1x2x6x6xf32>, %pin5: tensor<1x2x5x5xf32>,
                  %gout: tensor<1x4x8x8xf32>, %gpool: tensor<1x2x3x3xf32>) {
  // CHECK: mstep.matmul %{{.*}}, %{{.*}} : tensor<4x2x3xf32>, tensor<3x5xf32> -> tensor<4x2x5xf32>
  %0 = mstep.matmul %a, %b : tensor<4x2x3xf32>, tensor<3x5xf32> -> tensor<4x2x5xf32>
  // CHECK: mstep.matmul %{{.*}}, %{{.*}} : tensor<2x3xi32>, tensor<7x3x2xi32> -> tensor<7x2x2xi32>
  %1 = mstep.matmul %ai, %bi : tensor<2x3xi32>, tensor<7x3x2xi32> -> tensor<7x2x2xi32>
  // CHECK: mstep.conv2d %{{.*}}, %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32> -> tensor<1x4x8x8xf32>
  %2 = mstep.conv2d %img, %w, %bias {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32> -> tensor<1x4x8x8xf32>
  // CHECK: mstep.conv2d %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x4x5x5xbf16>, tensor<6x2x3x3xbf16> -> tensor<2x6x2x2xbf16>
  %3 = mstep.conv2d %gimg, %gw {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x4x5x5xbf16>, tensor<6x2x3x3xbf16> -> tensor<2x6x2x2xbf16>
  // CHECK: mstep.max_pool2d %{{.*}} {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x2x6x6xf32> -> tensor<1x2x3x3xf32>
  %4 = mstep.max_pool2d %pin {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x2x6x6xf32> -> tensor<1x2x3x3xf32>
  // CHECK: mstep.avg_pool2d %{{.*}} {ceil_mode = true, count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  %5 = mstep.avg_pool2d %pin5 {ceil_mode = true, count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  // CHECK: mstep.conv2d_input_grad %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x3x8x8xf32>
  %6 = mstep.conv2d_input_grad %gout, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x3x8x8xf32>
  // CHECK: mstep.conv2d_weight_grad %{{.*}}, %{{.*}} {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<4x3x3x3xf32>
  %7 = mstep.conv2d_weight_grad %img, %gout {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<4x3x3x3xf32>
  // CHECK: mstep.max_pool2d_grad %{{.*}}, %{{.*}} {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x2x3x3xf32>, tensor<1x2x6x6xf32>
  %8 = mstep.max_pool2d_grad %gpool, %pin {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x2x3x3xf32>, tensor<1x2x6x6xf32>
  // CHECK: mstep.avg_pool2d_grad %{{.*}} {ceil_mode = true, count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x2x3x3xf32> -> tensor<1x2x5x5xf32>
  %9 = mstep.avg_pool2d_grad %gpool {ceil_mode = true, count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x2x3x3xf32> -> tensor<1x2x5x5xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Normalization, dropout, loss
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @nn(
func.func @nn(%x: tensor<2x4xf32>, %w: tensor<4xf32>, %b: tensor<4xf32>, %rng: tensor<2xi64>, %lp: tensor<8x10xf32>, %t: tensor<8xi64>, %lp1: tensor<10xf64>, %t1: tensor<i64>) {
  // CHECK: mstep.softmax %{{.*}} {dim = 1 : i64} : tensor<2x4xf32>
  %0 = mstep.softmax %x {dim = 1 : i64} : tensor<2x4xf32>
  // CHECK: mstep.log_softmax %{{.*}} {dim = 0 : i64} : tensor<2x4xf32>
  %1 = mstep.log_softmax %x {dim = 0 : i64} : tensor<2x4xf32>
  // CHECK: mstep.layer_norm %{{.*}} weight(%{{.*}} : tensor<4xf32>) bias(%{{.*}} : tensor<4xf32>) {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  %2 = mstep.layer_norm %x weight(%w : tensor<4xf32>) bias(%b : tensor<4xf32>) {eps = 1.0e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  // CHECK: mstep.layer_norm %{{.*}} bias(%{{.*}} : tensor<4xf32>) {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  %3 = mstep.layer_norm %x bias(%b : tensor<4xf32>) {eps = 1.0e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  // CHECK: mstep.layer_norm %{{.*}} {eps = 0.000000e+00 : f64, normalized_ndim = 2 : i64} : tensor<2x4xf32>
  %4 = mstep.layer_norm %x {eps = 0.0 : f64, normalized_ndim = 2 : i64} : tensor<2x4xf32>
  // CHECK: mstep.rms_norm %{{.*}} weight(%{{.*}} : tensor<4xf32>) {eps = 1.1920928955078125E-7 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  %5 = mstep.rms_norm %x weight(%w : tensor<4xf32>) {eps = 1.1920928955078125e-07 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  // CHECK: mstep.rms_norm %{{.*}} {eps = 9.9999999999999995E-7 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  %6 = mstep.rms_norm %x {eps = 1.0e-06 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  // CHECK: mstep.dropout %{{.*}}, %{{.*}} {offset = 16 : i64, p = 1.000000e-01 : f64} : tensor<2x4xf32>
  %7 = mstep.dropout %x, %rng {offset = 16 : i64, p = 1.0e-01 : f64} : tensor<2x4xf32>
  // CHECK: mstep.nll_loss %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  %8 = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  // CHECK: mstep.nll_loss %{{.*}}, %{{.*}} {ignore_index = 0 : i64, reduction = #mstep.reduction<none>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<8xf32>
  %9 = mstep.nll_loss %lp, %t {ignore_index = 0 : i64, reduction = #mstep.reduction<none>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<8xf32>
  // CHECK: mstep.nll_loss %{{.*}}, %{{.*}} {ignore_index = -100 : i64, reduction = #mstep.reduction<sum>} : tensor<10xf64>, tensor<i64> -> tensor<f64>
  %10 = mstep.nll_loss %lp1, %t1 {ignore_index = -100 : i64, reduction = #mstep.reduction<sum>} : tensor<10xf64>, tensor<i64> -> tensor<f64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @sdpa(
func.func @sdpa(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x10x16xf32>, %v: tensor<2x4x10x32xf32>,
                %bm: tensor<8x10xi1>, %am: tensor<2x1x8x10xf32>, %len: tensor<2xi32>, %rng: tensor<2xi64>,
                %g: tensor<2x4x8x32xf32>, %saved: tensor<2x4x8x10xf32>) {
  // CHECK: mstep.sdpa %{{.*}}, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32>
  %0 = mstep.sdpa %q, %k, %v {scale = 2.500000e-01 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32>
  // CHECK: mstep.sdpa %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<8x10xi1>) {scale = 2.500000e-01 : f64, softmax_mode = #mstep.softmax_mode<fast>} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32>
  %1 = mstep.sdpa %q, %k, %v mask(%bm : tensor<8x10xi1>) {scale = 2.500000e-01 : f64, softmax_mode = #mstep.softmax_mode<fast>} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32>
  // CHECK: mstep.sdpa %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<2x1x8x10xf32>) valid_seq_len(%{{.*}} : tensor<2xi32>) rng(%{{.*}}) {dropout_p = 1.000000e-01 : f64, padding_side = #mstep.padding_side<left>, recompute_mode = false, return_attn_probs = true, return_dropout_mask = true, rng_offset = 64 : i64, scale = 1.000000e+00 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32> probs tensor<2x4x8x10xf32> dropout_mask tensor<2x4x8x10xi1> saved_probs tensor<2x4x8x10xf32>
  %2:4 = mstep.sdpa %q, %k, %v mask(%am : tensor<2x1x8x10xf32>) valid_seq_len(%len : tensor<2xi32>) rng(%rng) {dropout_p = 1.0e-01 : f64, padding_side = #mstep.padding_side<left>, recompute_mode = false, return_attn_probs = true, return_dropout_mask = true, rng_offset = 64 : i64, scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32> probs tensor<2x4x8x10xf32> dropout_mask tensor<2x4x8x10xi1> saved_probs tensor<2x4x8x10xf32>
  // CHECK: mstep.sdpa %{{.*}}, %{{.*}}, %{{.*}} rng(%{{.*}}) {dropout_p = 5.000000e-01 : f64, is_causal = true, return_dropout_mask = true, rng_offset = 0 : i64, scale = 2.500000e-01 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32> dropout_mask tensor<2x4x8x10xi1>
  %3:2 = mstep.sdpa %q, %k, %v rng(%rng) {dropout_p = 5.0e-01 : f64, is_causal = true, return_dropout_mask = true, rng_offset = 0 : i64, scale = 2.500000e-01 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32> dropout_mask tensor<2x4x8x10xi1>
  // CHECK: mstep.sdpa_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {is_causal = true, scale = 2.500000e-01 : f64} : tensor<2x4x8x32xf32>, tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32>
  %4:3 = mstep.sdpa_backward %g, %q, %k, %v {is_causal = true, scale = 2.500000e-01 : f64} : tensor<2x4x8x32xf32>, tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32>
  // CHECK: mstep.sdpa_backward %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} mask(%{{.*}} : tensor<2x1x8x10xf32>) valid_seq_len(%{{.*}} : tensor<2xi32>) rng(%{{.*}}) saved_probs(%{{.*}} : tensor<2x4x8x10xf32>) {dropout_p = 1.000000e-01 : f64, padding_side = #mstep.padding_side<left>, recompute_mode = false, rng_offset = 64 : i64, scale = 1.000000e+00 : f64} : tensor<2x4x8x32xf32>, tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> grad_mask tensor<2x1x8x10xf32>
  %5:4 = mstep.sdpa_backward %g, %q, %k, %v mask(%am : tensor<2x1x8x10xf32>) valid_seq_len(%len : tensor<2xi32>) rng(%rng) saved_probs(%saved : tensor<2x4x8x10xf32>) {dropout_p = 1.0e-01 : f64, padding_side = #mstep.padding_side<left>, recompute_mode = false, rng_offset = 64 : i64, scale = 1.0 : f64} : tensor<2x4x8x32xf32>, tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> grad_mask tensor<2x1x8x10xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @optimizers(
func.func @optimizers(%w: tensor<4x3xf32>, %b: tensor<4xf32>, %gw: tensor<4x3xf32>, %gb: tensor<4xf32>,
                      %s0: tensor<4x3xf32>, %s1: tensor<4xf32>, %s2: tensor<4x3xf32>, %s3: tensor<4xf32>,
                      %s4: tensor<4x3xf32>, %s5: tensor<4xf32>, %t0: tensor<i64>, %t1: tensor<i64>,
                      %lr: tensor<f64>, %h1: tensor<f64>, %h2: tensor<f64>, %h3: tensor<f64>, %wd: tensor<f64>) {
  // CHECK: mstep.multi_tensor_update <sgd> params(%{{.*}} : tensor<4x3xf32>) grads(%{{.*}} : tensor<4x3xf32>) lr(%{{.*}})
  %0 = mstep.multi_tensor_update <sgd> params(%w : tensor<4x3xf32>) grads(%gw : tensor<4x3xf32>) lr(%lr)
  // CHECK: mstep.multi_tensor_update <sgd> params(%{{.*}} : tensor<4x3xf32>) grads(%{{.*}} : tensor<4x3xf32>) states(%{{.*}} : tensor<4x3xf32>) steps(%{{.*}}) lr(%{{.*}}) momentum(%{{.*}}) dampening(%{{.*}}) weight_decay(%{{.*}}) {maximize = true}
  %1:3 = mstep.multi_tensor_update <sgd> params(%w : tensor<4x3xf32>) grads(%gw : tensor<4x3xf32>) states(%s0 : tensor<4x3xf32>) steps(%t0) lr(%lr) momentum(%h1) dampening(%h2) weight_decay(%wd) {maximize = true}
  // CHECK: mstep.multi_tensor_update <sgd> params(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>) grads(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>) states(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>) steps(%{{.*}}, %{{.*}}) lr(%{{.*}}) momentum(%{{.*}}) {nesterov = true}
  %2:6 = mstep.multi_tensor_update <sgd> params(%w, %b : tensor<4x3xf32>, tensor<4xf32>) grads(%gw, %gb : tensor<4x3xf32>, tensor<4xf32>) states(%s0, %s1 : tensor<4x3xf32>, tensor<4xf32>) steps(%t0, %t1) lr(%lr) momentum(%h1) {nesterov = true}
  // CHECK: mstep.multi_tensor_update <adam> params(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>) grads(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>) states(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>) steps(%{{.*}}, %{{.*}}) lr(%{{.*}}) beta1(%{{.*}}) beta2(%{{.*}}) eps(%{{.*}})
  %p:2, %s:4, %t:2 = mstep.multi_tensor_update <adam> params(%w, %b : tensor<4x3xf32>, tensor<4xf32>) grads(%gw, %gb : tensor<4x3xf32>, tensor<4xf32>) states(%s0, %s1, %s2, %s3 : tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>) steps(%t0, %t1) lr(%lr) beta1(%h1) beta2(%h2) eps(%h3)
  // CHECK: mstep.multi_tensor_update <adamw> params(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>) grads(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>) states(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>) steps(%{{.*}}, %{{.*}}) lr(%{{.*}}) beta1(%{{.*}}) beta2(%{{.*}}) eps(%{{.*}}) weight_decay(%{{.*}}) {amsgrad = true, grad_norm_type = 0x7FF0000000000000 : f64, max_grad_norm = 1.000000e+00 : f64} -> total_grad_norm tensor<f32>
  %4:11 = mstep.multi_tensor_update <adamw> params(%w, %b : tensor<4x3xf32>, tensor<4xf32>) grads(%gw, %gb : tensor<4x3xf32>, tensor<4xf32>) states(%s0, %s1, %s2, %s3, %s4, %s5 : tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>) steps(%t0, %t1) lr(%lr) beta1(%h1) beta2(%h2) eps(%h3) weight_decay(%wd) {amsgrad = true, grad_norm_type = 0x7FF0000000000000 : f64, max_grad_norm = 1.0 : f64} -> total_grad_norm tensor<f32>
  // CHECK: mstep.multi_tensor_update <adadelta> params(%{{.*}} : tensor<4xf32>) grads(%{{.*}} : tensor<4xf32>) states(%{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf32>) steps(%{{.*}}) lr(%{{.*}}) rho(%{{.*}}) eps(%{{.*}}) {max_grad_norm = 5.000000e-01 : f64} -> total_grad_norm tensor<f32>
  %5:5 = mstep.multi_tensor_update <adadelta> params(%b : tensor<4xf32>) grads(%gb : tensor<4xf32>) states(%s1, %s3 : tensor<4xf32>, tensor<4xf32>) steps(%t1) lr(%lr) rho(%h1) eps(%h3) {max_grad_norm = 5.0e-01 : f64} -> total_grad_norm tensor<f32>
  // CHECK: mstep.multi_tensor_update <sgd> params(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>) grads(%{{.*}}, %{{.*}} : tensor<4x3xf32>, tensor<4xf32>) lr(%{{.*}}) {max_grad_norm = 1.000000e+00 : f64} -> total_grad_norm tensor<f32> clipped_grads(tensor<4x3xf32>, tensor<4xf32>)
  %6:5 = mstep.multi_tensor_update <sgd> params(%w, %b : tensor<4x3xf32>, tensor<4xf32>) grads(%gw, %gb : tensor<4x3xf32>, tensor<4xf32>) lr(%lr) {max_grad_norm = 1.0 : f64} -> total_grad_norm tensor<f32> clipped_grads(tensor<4x3xf32>, tensor<4xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Custom (a user-registered op: the dialect checks only its form)
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @custom(
func.func @custom(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // CHECK: mstep.custom "scaled_softplus"(%{{.*}}) {user_attrs = {beta = 2.000000e+00 : f64}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %0 = mstep.custom "scaled_softplus"(%x) {user_attrs = {beta = 2.0 : f64}} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  // CHECK: mstep.custom "split_rows"(%{{.*}}, %{{.*}}) {user_attrs = {dims = array<i64: 1, 2>, k = 3 : i64, out = f16}} : (tensor<2x3xf32>, tensor<4xi64>) -> (tensor<1x3xf16>, tensor<1x3xf16>)
  %1:2 = mstep.custom "split_rows"(%x, %i) {user_attrs = {k = 3 : i64, dims = array<i64: 1, 2>, out = f16}} : (tensor<2x3xf32>, tensor<4xi64>) -> (tensor<1x3xf16>, tensor<1x3xf16>)
  // CHECK: mstep.custom "giou_loss"(%{{.*}}, %{{.*}}) {user_attrs = {fast = true, reduction = "mean"}, version = 2 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  %3 = mstep.custom "giou_loss"(%x, %x) {version = 2 : i64, user_attrs = {reduction = "mean", fast = true}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  // CHECK: mstep.custom "no_inputs"() : () -> tensor<f32>
  %2 = mstep.custom "no_inputs"() : () -> tensor<f32>
  return
}
