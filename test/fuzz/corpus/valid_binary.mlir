func.func @binary(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %s: tensor<f32>, %i: tensor<4x1xi64>, %j: tensor<5xi64>, %p: tensor<2x3xi1>, %q: tensor<1x3xi1>) {
  %0 = mstep.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %1 = mstep.sub %i, %j : tensor<4x1xi64>, tensor<5xi64> -> tensor<4x5xi64>
  %2 = mstep.mul %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %3 = mstep.div %s, %a : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %4 = mstep.pow %a, %a : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %5 = mstep.maximum %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
  %6 = mstep.minimum %i, %j : tensor<4x1xi64>, tensor<5xi64> -> tensor<4x5xi64>
  %7 = mstep.eq %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %8 = mstep.ne %i, %j : tensor<4x1xi64>, tensor<5xi64> -> tensor<4x5xi1>
  %9 = mstep.lt %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  %10 = mstep.le %a, %s : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
  %11 = mstep.gt %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %12 = mstep.ge %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xi1>
  %13 = mstep.logical_and %p, %q : tensor<2x3xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  %14 = mstep.logical_or %p, %q : tensor<2x3xi1>, tensor<1x3xi1> -> tensor<2x3xi1>
  %15 = mstep.where %q, %a, %s : tensor<1x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  return
}
