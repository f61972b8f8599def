func.func @fusion_not_fusible(%a: tensor<2x3xf32>) {
  %0 = mstep.fusion ins(%a : tensor<2x3xf32>) -> tensor<2xf32> {
  ^bb0(%x: tensor<2x3xf32>):
    %s = mstep.sum %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3xf32> -> tensor<2xf32>
    mstep.yield %s : tensor<2xf32>
  }
  return
}
