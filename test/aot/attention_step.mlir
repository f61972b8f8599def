// Attention forward and backward (causal, right-padded by valid_seq_len),
// which the xla step function computes with its own tiled loop nests
// (XlaAttentionLoops.cpp): mstep-aot makes it a stand-alone step.
func.func @step(%q: tensor<2x2x70x24xf32> {mstep.role = "input"},
                %k: tensor<2x2x70x24xf32> {mstep.role = "input"},
                %v: tensor<2x2x70x16xf32> {mstep.role = "input"},
                %g: tensor<2x2x70x16xf32> {mstep.role = "input"},
                %len: tensor<2xi64> {mstep.role = "input"})
    -> (tensor<2x2x70x16xf32>, tensor<2x2x70x24xf32>, tensor<2x2x70x24xf32>, tensor<2x2x70x16xf32>) {
  %out = mstep.sdpa %q, %k, %v valid_seq_len(%len : tensor<2xi64>) {is_causal = true, scale = 2.0e-01 : f64} : tensor<2x2x70x24xf32>, tensor<2x2x70x24xf32>, tensor<2x2x70x16xf32> -> tensor<2x2x70x16xf32>
  %dq, %dk, %dv = mstep.sdpa_backward %g, %q, %k, %v valid_seq_len(%len : tensor<2xi64>) {is_causal = true, scale = 2.0e-01 : f64} : tensor<2x2x70x16xf32>, tensor<2x2x70x24xf32>, tensor<2x2x70x24xf32>, tensor<2x2x70x16xf32>
  return %out, %dq, %dk, %dv : tensor<2x2x70x16xf32>, tensor<2x2x70x24xf32>, tensor<2x2x70x24xf32>, tensor<2x2x70x16xf32>
}
