// A bf16 conv layer's step (conv2d with a bias, both conv gradients and
// the bias gradient), which the xla step function computes with im2col /
// col2im loops over f32 staging around dnnl_sgemm and one rounding to bf16
// (XlaConvGemm.cpp; it called out for all three convs before): mstep-aot
// makes it a stand-alone step that needs oneDNN, libc and libm only.
func.func @step(%x: tensor<2x3x8x8xbf16> {mstep.role = "input"},
                %w: tensor<4x3x3x3xbf16> {mstep.role = "parameter"},
                %b: tensor<4xbf16> {mstep.role = "parameter"},
                %g: tensor<2x4x8x8xbf16> {mstep.role = "input"})
    -> (tensor<2x4x8x8xbf16>, tensor<4xbf16>, tensor<4x3x3x3xbf16>, tensor<2x3x8x8xbf16>) {
  %c = mstep.conv2d %x, %w, %b {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<2x3x8x8xbf16>, tensor<4x3x3x3xbf16>, tensor<4xbf16> -> tensor<2x4x8x8xbf16>
  %db = mstep.sum %g {dims = array<i64: 0, 2, 3>, keepdim = false} : tensor<2x4x8x8xbf16> -> tensor<4xbf16>
  %dw = mstep.conv2d_weight_grad %x, %g {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, shape = array<i64: 4, 3, 3, 3>, stride = array<i64: 1, 1>} : tensor<2x3x8x8xbf16>, tensor<2x4x8x8xbf16> -> tensor<4x3x3x3xbf16>
  %dx = mstep.conv2d_input_grad %g, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, shape = array<i64: 2, 3, 8, 8>, stride = array<i64: 1, 1>} : tensor<2x4x8x8xbf16>, tensor<4x3x3x3xbf16> -> tensor<2x3x8x8xbf16>
  return %c, %db, %dw, %dx : tensor<2x4x8x8xbf16>, tensor<4xbf16>, tensor<4x3x3x3xbf16>, tensor<2x3x8x8xbf16>
}
