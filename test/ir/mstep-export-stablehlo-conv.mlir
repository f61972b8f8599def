// mstep-opt --mstep-export-stablehlo: conv2d and its gradients as
// stablehlo.convolution. The expected attributes are JAX's own: what
// jax.vjp of lax.conv_general_dilated (NCHW/OIHW, stride 2, padding 1,
// feature groups 2, x [2,4,7,7], w [6,2,3,3]) lowers to with jaxlib
// 0.10.2. XLA and IREE run these against ref in test/interop
// (stablehlo_interop_conv_*).
// RUN: mstep-opt --mstep-export-stablehlo %s | FileCheck %s

func.func @step(%x: tensor<2x4x7x7xf32>, %w: tensor<6x2x3x3xf32>, %g: tensor<2x6x4x4xf32>)
    -> (tensor<2x6x4x4xf32>, tensor<2x4x7x7xf32>, tensor<6x2x3x3xf32>) {
  // CHECK: "stablehlo.convolution"(%arg0, %arg1) {batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]>, feature_group_count = 2 : i64, lhs_dilation = array<i64: 1, 1>, padding = dense<{{\[\[1, 1\], \[1, 1\]\]}}> : tensor<2x2xi64>, {{.*}}, rhs_dilation = array<i64: 1, 1>, window_strides = array<i64: 2, 2>} : (tensor<2x4x7x7xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x4x4xf32>
  %y = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<2x4x7x7xf32>, tensor<6x2x3x3xf32> -> tensor<2x6x4x4xf32>
  // Input gradient: the kernel regrouped [6,2,3,3] -> [2,3,2,3,3] ->
  // [3,2,2,3,3] -> [3,4,3,3], its taps reversed, convolved with the
  // output gradient dilated by the stride.
  // CHECK: "stablehlo.reshape"(%arg1) : (tensor<6x2x3x3xf32>) -> tensor<2x3x2x3x3xf32>
  // CHECK: "stablehlo.transpose"({{.*}}) {permutation = array<i64: 1, 0, 2, 3, 4>} : (tensor<2x3x2x3x3xf32>) -> tensor<3x2x2x3x3xf32>
  // CHECK: "stablehlo.reshape"({{.*}}) : (tensor<3x2x2x3x3xf32>) -> tensor<3x4x3x3xf32>
  // CHECK: %[[REV:.*]] = "stablehlo.reverse"({{.*}}) {dimensions = array<i64: 2, 3>}
  // CHECK: "stablehlo.convolution"(%arg2, %[[REV]]) {batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, f, 0, 1]x[i, o, 0, 1]->[b, f, 0, 1]>, feature_group_count = 2 : i64, lhs_dilation = array<i64: 2, 2>, padding = dense<{{\[\[1, 1\], \[1, 1\]\]}}> : tensor<2x2xi64>, {{.*}}, rhs_dilation = array<i64: 1, 1>, window_strides = array<i64: 1, 1>} : (tensor<2x6x4x4xf32>, tensor<3x4x3x3xf32>) -> tensor<2x4x7x7xf32>
  %dx = mstep.conv2d_input_grad %g, %w {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<2x6x4x4xf32>, tensor<6x2x3x3xf32> -> tensor<2x4x7x7xf32>
  // Weight gradient: x as [f, b] (its batch is the contraction), the
  // groups as batch groups, the stride as the kernel's dilation.
  // CHECK: "stablehlo.convolution"(%arg0, %arg2) {batch_group_count = 2 : i64, dimension_numbers = #stablehlo.conv<[f, b, 0, 1]x[i, o, 0, 1]->[f, b, 0, 1]>, feature_group_count = 1 : i64, lhs_dilation = array<i64: 1, 1>, padding = dense<{{\[\[1, 1\], \[1, 1\]\]}}> : tensor<2x2xi64>, {{.*}}, rhs_dilation = array<i64: 2, 2>, window_strides = array<i64: 1, 1>} : (tensor<2x4x7x7xf32>, tensor<2x6x4x4xf32>) -> tensor<6x2x3x3xf32>
  %dw = mstep.conv2d_weight_grad %x, %g {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<2x4x7x7xf32>, tensor<2x6x4x4xf32> -> tensor<6x2x3x3xf32>
  return %y, %dx, %dw : tensor<2x6x4x4xf32>, tensor<2x4x7x7xf32>, tensor<6x2x3x3xf32>
}
