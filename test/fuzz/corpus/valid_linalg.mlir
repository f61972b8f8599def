func.func @linalg(%a: tensor<4x2x3xf32>, %b: tensor<3x5xf32>, %ai: tensor<2x3xi32>, %bi: tensor<7x3x2xi32>,
                  %img: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %bias: tensor<4xf32>,
                  %gimg: tensor<2x4x5x5xbf16>, %gw: tensor<6x2x3x3xbf16>,
                  %pin: tensor<1x2x6x6xf32>, %pin5: tensor<1x2x5x5xf32>,
                  %gout: tensor<1x4x8x8xf32>, %gpool: tensor<1x2x3x3xf32>) {
  %0 = mstep.matmul %a, %b : tensor<4x2x3xf32>, tensor<3x5xf32> -> tensor<4x2x5xf32>
  %1 = mstep.matmul %ai, %bi : tensor<2x3xi32>, tensor<7x3x2xi32> -> tensor<7x2x2xi32>
  %2 = mstep.conv2d %img, %w, %bias {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32> -> tensor<1x4x8x8xf32>
  %3 = mstep.conv2d %gimg, %gw {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x4x5x5xbf16>, tensor<6x2x3x3xbf16> -> tensor<2x6x2x2xbf16>
  %4 = mstep.max_pool2d %pin {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x2x6x6xf32> -> tensor<1x2x3x3xf32>
  %5 = mstep.avg_pool2d %pin5 {ceil_mode = true, count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x2x5x5xf32> -> tensor<1x2x3x3xf32>
  %6 = mstep.conv2d_input_grad %gout, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x3x8x8xf32>
  %7 = mstep.conv2d_weight_grad %img, %gout {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<4x3x3x3xf32>
  %8 = mstep.max_pool2d_grad %gpool, %pin {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x2x3x3xf32>, tensor<1x2x6x6xf32>
  %9 = mstep.avg_pool2d_grad %gpool {ceil_mode = true, count_include_pad = false, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1>, stride = array<i64: 2, 2>} : tensor<1x2x3x3xf32> -> tensor<1x2x5x5xf32>
  return
}
