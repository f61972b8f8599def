func.func @constants_are_uniqued(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<f64>) {
  %c0 = mstep.constant 2.0 : tensor<f32>
  %0 = mstep.mul %x, %c0 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %c1 = mstep.constant 2.0 : tensor<f32>
  %1 = mstep.mul %0, %c1 : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %c2 = mstep.constant 2.0 : tensor<f64>
  return %1, %c2 : tensor<3xf32>, tensor<f64>
}

func.func @multiply_by_one(%x: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %one = mstep.constant 1.0 : tensor<f32>
  %zero = mstep.constant 0.0 : tensor<f32>
  %0 = mstep.mul %x, %one : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %1 = mstep.mul %one, %x : tensor<f32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = mstep.div %x, %one : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  %3 = mstep.sub %x, %zero : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  return %0, %1, %2, %3 : tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

func.func @identities_that_do_not_fold(%x: tensor<3xf32>, %one: tensor<2x3xf32>) -> (tensor<3xf32>, tensor<2x3xf32>, tensor<3xf32>) {
  %zero = mstep.constant 0.0 : tensor<f32>
  %c1 = mstep.constant 1.0 : tensor<f32>
  %ones = mstep.expand %c1 : tensor<f32> -> tensor<2x3xf32>
  %0 = mstep.add %x, %zero : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  %1 = mstep.mul %x, %ones : tensor<3xf32>, tensor<2x3xf32> -> tensor<2x3xf32>
  %2 = mstep.div %c1, %x : tensor<f32>, tensor<3xf32> -> tensor<3xf32>
  return %0, %1, %2 : tensor<3xf32>, tensor<2x3xf32>, tensor<3xf32>
}

func.func @double_negation(%x: tensor<4xi32>) -> tensor<4xi32> {
  %0 = mstep.neg %x : tensor<4xi32>
  %1 = mstep.neg %0 : tensor<4xi32>
  return %1 : tensor<4xi32>
}

func.func @cast_chains(%x: tensor<4xbf16>) -> (tensor<4xbf16>, tensor<4xf16>, tensor<4xbf16>) {
  %0 = mstep.cast %x : tensor<4xbf16> -> tensor<4xf32>
  %1 = mstep.cast %0 : tensor<4xf32> -> tensor<4xbf16>
  %2 = mstep.cast %0 : tensor<4xf32> -> tensor<4xf16>
  %3 = mstep.cast %2 : tensor<4xf16> -> tensor<4xbf16>
  return %1, %2, %3 : tensor<4xbf16>, tensor<4xf16>, tensor<4xbf16>
}

func.func @permute_chains(%x: tensor<2x3x4xf32>) -> (tensor<2x3x4xf32>, tensor<4x2x3xf32>) {
  %0 = mstep.permute %x {perm = array<i64: 1, 0, 2>} : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %1 = mstep.permute %0 {perm = array<i64: 1, 0, 2>} : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  %2 = mstep.permute %0 {perm = array<i64: 2, 1, 0>} : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  return %1, %2 : tensor<2x3x4xf32>, tensor<4x2x3xf32>
}

func.func @expand_chain(%x: tensor<3xf32>) -> tensor<4x2x3xf32> {
  %0 = mstep.expand %x : tensor<3xf32> -> tensor<2x3xf32>
  %1 = mstep.expand %0 : tensor<2x3xf32> -> tensor<4x2x3xf32>
  return %1 : tensor<4x2x3xf32>
}
