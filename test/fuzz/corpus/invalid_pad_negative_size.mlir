func.func @pad_negative_size(%x: tensor<3xf32>, %v: tensor<f32>) {
  %0 = mstep.pad %x, %v {pads = array<i64: -2, -2>} : tensor<3xf32>, tensor<f32> -> tensor<0xf32>
  return
}
