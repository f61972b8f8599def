func.func @sdpa(%q: tensor<2x4x8x16xf32>, %k: tensor<2x4x10x16xf32>, %v: tensor<2x4x10x32xf32>,
                %bm: tensor<8x10xi1>, %am: tensor<2x1x8x10xf32>, %len: tensor<2xi32>, %rng: tensor<2xi64>,
                %g: tensor<2x4x8x32xf32>, %saved: tensor<2x4x8x10xf32>) {
  %0 = mstep.sdpa %q, %k, %v {scale = 2.500000e-01 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32>
  %1 = mstep.sdpa %q, %k, %v mask(%bm : tensor<8x10xi1>) {scale = 2.500000e-01 : f64, softmax_mode = #mstep.softmax_mode<fast>} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32>
  %2:4 = mstep.sdpa %q, %k, %v mask(%am : tensor<2x1x8x10xf32>) valid_seq_len(%len : tensor<2xi32>) rng(%rng) {dropout_p = 1.0e-01 : f64, padding_side = #mstep.padding_side<left>, recompute_mode = false, return_attn_probs = true, return_dropout_mask = true, rng_offset = 64 : i64, scale = 1.0 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32> probs tensor<2x4x8x10xf32> dropout_mask tensor<2x4x8x10xi1> saved_probs tensor<2x4x8x10xf32>
  %3:2 = mstep.sdpa %q, %k, %v rng(%rng) {dropout_p = 5.0e-01 : f64, is_causal = true, return_dropout_mask = true, rng_offset = 0 : i64, scale = 2.500000e-01 : f64} : tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> tensor<2x4x8x32xf32> dropout_mask tensor<2x4x8x10xi1>
  %4:3 = mstep.sdpa_backward %g, %q, %k, %v {is_causal = true, scale = 2.500000e-01 : f64} : tensor<2x4x8x32xf32>, tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32>
  %5:4 = mstep.sdpa_backward %g, %q, %k, %v mask(%am : tensor<2x1x8x10xf32>) valid_seq_len(%len : tensor<2xi32>) rng(%rng) saved_probs(%saved : tensor<2x4x8x10xf32>) {dropout_p = 1.0e-01 : f64, padding_side = #mstep.padding_side<left>, recompute_mode = false, rng_offset = 64 : i64, scale = 1.0 : f64} : tensor<2x4x8x32xf32>, tensor<2x4x8x16xf32>, tensor<2x4x10x16xf32>, tensor<2x4x10x32xf32> -> grad_mask tensor<2x1x8x10xf32>
  return
}
