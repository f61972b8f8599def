func.func @unknown_op(%a: tensor<2xf32>) {
  %0 = mstep.no_such_op %a : tensor<2xf32>
  return
}
