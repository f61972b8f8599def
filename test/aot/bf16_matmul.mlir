// bf16 matmuls in a stand-alone step: y = x w + b, whose bias add the xla
// step function folds into the gemm's epilogue (one rounding of the f32
// sum, as the cpu backend's oneDNN matmul with a bias), and z = x v, a
// plain bf16 product. Both run mstep_xla_gemm_bf16 (XlaGemm.h), linked
// into the object from its static library (bf16_matmul_main.c checks them).
func.func @step(%x: tensor<4x8xbf16> {mstep.role = "input"},
                %w: tensor<8x3xbf16> {mstep.role = "parameter"},
                %b: tensor<3xbf16> {mstep.role = "parameter"},
                %v: tensor<8x5xbf16> {mstep.role = "parameter"})
    -> (tensor<4x3xbf16>, tensor<4x5xbf16>) {
  %p = mstep.matmul %x, %w : tensor<4x8xbf16>, tensor<8x3xbf16> -> tensor<4x3xbf16>
  %y = mstep.add %p, %b : tensor<4x3xbf16>, tensor<3xbf16> -> tensor<4x3xbf16>
  %z = mstep.matmul %x, %v : tensor<4x8xbf16>, tensor<8x5xbf16> -> tensor<4x5xbf16>
  return %y, %z : tensor<4x3xbf16>, tensor<4x5xbf16>
}
