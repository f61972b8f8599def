func.func @floats(%x: tensor<3xf32>, %rng: tensor<2xi64>) -> (tensor<3xf32>, tensor<3xf32>) {
  %nan = mstep.constant 0x7FF8000000000000 : tensor<f32>
  %inf = mstep.constant 0xFFF0000000000000 : tensor<f32>
  %big = mstep.constant -9.2233720368547758E+18 : tensor<i64>
  %0 = mstep.mul %x, %nan : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %1 = mstep.sub %0, %inf : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %2 = mstep.dropout %1, %rng {offset = 9223372036854775807 : i64, p = 1.0 : f64} : tensor<3xf32>
  %3 = mstep.arange {start = -1.0e308 : f64, step = 1.0e308 : f64} : tensor<3xf32>
  return %2, %3 : tensor<3xf32>, tensor<3xf32>
}
