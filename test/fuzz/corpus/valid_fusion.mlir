func.func @fusion(%a: tensor<2x3xf32>, %b: tensor<3xf32>) -> (tensor<2x3xf32>, tensor<2x3xi1>) {
  %r:2 = mstep.fusion ins(%a, %b : tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>, tensor<2x3xi1> {
  ^bb0(%x: tensor<2x3xf32>, %y: tensor<3xf32>):
    %e = mstep.expand %y : tensor<3xf32> -> tensor<2x3xf32>
    %s = mstep.add %x, %e : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
    %z = mstep.constant 0.0 : tensor<f32>
    %m = mstep.gt %s, %z : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
    mstep.yield %s, %m : tensor<2x3xf32>, tensor<2x3xi1>
  }
  return %r#0, %r#1 : tensor<2x3xf32>, tensor<2x3xi1>
}
