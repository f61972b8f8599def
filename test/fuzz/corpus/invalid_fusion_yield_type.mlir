func.func @fusion_yield_type(%a: tensor<3xf32>) {
  %0 = mstep.fusion ins(%a : tensor<3xf32>) -> tensor<3xi1> {
  ^bb0(%x: tensor<3xf32>):
    mstep.yield %x : tensor<3xf32>
  }
  return
}
