func.func @fusion_no_inputs() -> tensor<4xf16> {
  %r = mstep.fusion ins() -> tensor<4xf16> {
    %c = mstep.constant 1.0 : tensor<f16>
    %f = mstep.full %c : tensor<f16> -> tensor<4xf16>
    mstep.yield %f : tensor<4xf16>
  }
  return %r : tensor<4xf16>
}
