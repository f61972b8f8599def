func.func @creation(%v: tensor<f32>, %rng: tensor<2xi64>) {
  %c = mstep.constant 2.5 : tensor<f32>
  %ci = mstep.constant -3.0 : tensor<i64>
  %cb = mstep.constant 1.0 : tensor<i1>
  %f = mstep.full %v : tensor<f32> -> tensor<2x3xf32>
  %a = mstep.arange {start = 0.0 : f64, step = 2.0 : f64} : tensor<5xi64>
  %r = mstep.rand %rng {offset = 0 : i64} : tensor<3x4xf32>
  %n = mstep.randn %rng {offset = 12 : i64} : tensor<3x4xbf16>
  return
}
