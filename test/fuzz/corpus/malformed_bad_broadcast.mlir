func.func @bad_broadcast(%a: tensor<2xf32>, %b: tensor<3xf32>) {
  %0 = mstep.add %a, %b : tensor<2xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}
