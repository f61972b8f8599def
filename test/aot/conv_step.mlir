// A small conv net's step (conv2d, relu, max_pool2d, avg_pool2d's
// gradient, the bias gradient summed over dims 0, 2 and 3, both conv
// gradients, a pad, a gather and a scatter_add), which the xla step function
// computes with its own loops (XlaConvLoops.cpp, XlaPoolLoops.cpp,
// XlaReductionLoops.cpp, XlaFillLoops.cpp, XlaGatherLoops.cpp): mstep-aot
// makes it a stand-alone step with no callout.
func.func @step(%x: tensor<2x3x8x8xf32> {mstep.role = "input"},
                %w: tensor<4x3x3x3xf32> {mstep.role = "parameter"},
                %b: tensor<4xf32> {mstep.role = "parameter"},
                %g: tensor<2x4x4x4xf32> {mstep.role = "input"},
                %i: tensor<2x5xi64> {mstep.role = "input"},
                %zero: tensor<f32> {mstep.role = "input"})
    -> (tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4x3x3x3xf32>, tensor<2x3x8x8xf32>,
        tensor<2x3x10x10xf32>, tensor<2x5xf32>, tensor<2x7xf32>) {
  %c = mstep.conv2d %x, %w, %b {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32> -> tensor<2x4x8x8xf32>
  %r = mstep.relu %c : tensor<2x4x8x8xf32>
  %p = mstep.max_pool2d %r {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x4x8x8xf32> -> tensor<2x4x4x4xf32>
  %gp = mstep.avg_pool2d_grad %g {ceil_mode = false, count_include_pad = true, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, shape = array<i64: 2, 4, 8, 8>, stride = array<i64: 2, 2>} : tensor<2x4x4x4xf32> -> tensor<2x4x8x8xf32>
  %db = mstep.sum %gp {dims = array<i64: 0, 2, 3>, keepdim = false} : tensor<2x4x8x8xf32> -> tensor<4xf32>
  %dw = mstep.conv2d_weight_grad %x, %gp {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, shape = array<i64: 4, 3, 3, 3>, stride = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32> -> tensor<4x3x3x3xf32>
  %dx = mstep.conv2d_input_grad %gp, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, shape = array<i64: 2, 3, 8, 8>, stride = array<i64: 1, 1>} : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<2x3x8x8xf32>
  %padded = mstep.pad %x, %zero {pads = array<i64: 1, 1, 1, 1>} : tensor<2x3x8x8xf32>, tensor<f32> -> tensor<2x3x10x10xf32>
  %flat = mstep.reshape %b {shape = array<i64: 1, 4>} : tensor<4xf32> -> tensor<1x4xf32>
  %rows = mstep.expand %flat {shape = array<i64: 2, 4>} : tensor<1x4xf32> -> tensor<2x4xf32>
  %gathered = mstep.gather %rows, %i {dim = 1 : i64} : tensor<2x4xf32>, tensor<2x5xi64> -> tensor<2x5xf32>
  %base = mstep.pad %rows, %zero {pads = array<i64: 0, 3>} : tensor<2x4xf32>, tensor<f32> -> tensor<2x7xf32>
  %added = mstep.scatter_add %base, %i, %gathered {dim = 1 : i64} : tensor<2x7xf32>, tensor<2x5xi64>, tensor<2x5xf32>
  return %p, %db, %dw, %dx, %padded, %gathered, %added : tensor<2x4x4x4xf32>, tensor<4xf32>, tensor<4x3x3x3xf32>, tensor<2x3x8x8xf32>, tensor<2x3x10x10xf32>, tensor<2x5xf32>, tensor<2x7xf32>
}
