func.func @reshape_to_same_shape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mstep.reshape %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

func.func @reshape_of_reshape(%x: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = mstep.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %1 = mstep.reshape %0 : tensor<6xf32> -> tensor<3x2xf32>
  return %1 : tensor<3x2xf32>
}

func.func @cast_to_same_type(%x: tensor<4xbf16>) -> tensor<4xbf16> {
  %0 = mstep.cast %x : tensor<4xbf16> -> tensor<4xbf16>
  return %0 : tensor<4xbf16>
}

func.func @cast_is_kept(%x: tensor<4xbf16>) -> tensor<4xf32> {
  %0 = mstep.cast %x : tensor<4xbf16> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

func.func @identity_permute(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  %0 = mstep.permute %x {perm = array<i64: 0, 1, 2>} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

func.func @expand_to_same_shape(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = mstep.expand %x : tensor<2x3xf32> -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}
