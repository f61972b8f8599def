// An all_reduce: the xla step function never computes a collective (the
// runtime runs it across the ranks), so it calls out for it and mstep-aot
// refuses the step and names the op.
func.func @step(%x: tensor<8x4xf32> {mstep.role = "input"}) -> tensor<8x4xf32> {
  %s = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<8x4xf32> -> tensor<8x4xf32>
  %r = mstep.relu %s : tensor<8x4xf32>
  return %r : tensor<8x4xf32>
}
