func.func @pool_window_too_large(%x: tensor<1x2x2x2xf32>) {
  %0 = mstep.avg_pool2d %x {ceil_mode = false, count_include_pad = true, kernel = array<i64: 3, 3>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x2x2x2xf32> -> tensor<1x2x1x1xf32>
  return
}
