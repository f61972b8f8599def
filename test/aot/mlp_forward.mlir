// An MLP forward pass with a weight updated in place: matmuls, a broadcast
// bias add, relu and an elementwise update, which the xla step function
// computes without calling out (mstep-aot's stand-alone step).
func.func @step(%x: tensor<8x16xf32> {mstep.role = "input"},
                %w1: tensor<16x32xf32> {mstep.role = "parameter"},
                %b1: tensor<32xf32> {mstep.role = "parameter"},
                %w2: tensor<32x4xf32> {mstep.role = "parameter", mstep.aliased_result = 1 : i64})
    -> (tensor<8x4xf32>, tensor<32x4xf32>) {
  %h = mstep.matmul %x, %w1 : tensor<8x16xf32>, tensor<16x32xf32> -> tensor<8x32xf32>
  %hb = mstep.add %h, %b1 : tensor<8x32xf32>, tensor<32xf32> -> tensor<8x32xf32>
  %r = mstep.relu %hb : tensor<8x32xf32>
  %y = mstep.matmul %r, %w2 : tensor<8x32xf32>, tensor<32x4xf32> -> tensor<8x4xf32>
  %w2n = mstep.mul %w2, %w2 : tensor<32x4xf32>, tensor<32x4xf32> -> tensor<32x4xf32>
  return %y, %w2n : tensor<8x4xf32>, tensor<32x4xf32>
}
