func.func @constant_out_of_range() {
  %0 = mstep.constant 3.0e9 : tensor<i32>
  return
}
