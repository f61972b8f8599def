// mstep-opt --mstep-export-stablehlo on a transformer block's ops: the
// embedding lookup (index_select: a gather), layer_norm written out,
// attention as a stablehlo.composite whose decomposition is a private
// function of the module, its gradient likewise, the embedding gradient
// (index_add: a scatter with an add region) and slice_scatter
// (dynamic_update_slice).
// RUN: mstep-opt --mstep-export-stablehlo %s | FileCheck %s

// CHECK-LABEL: func.func public @main(
func.func @step(%emb: tensor<8x4xf32>, %ids: tensor<3xi64>, %x: tensor<1x2x3x4xf32>,
                %w: tensor<4xf32>, %b: tensor<4xf32>, %rng: tensor<2xi64>,
                %g: tensor<1x2x3x4xf32>, %qkv: tensor<1x3x12xf32>)
    -> (tensor<3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>,
        tensor<8x4xf32>, tensor<1x3x12xf32>) {
  // CHECK: %[[E:.*]] = "stablehlo.gather"(%arg0, %arg1) {dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, indices_are_sorted = false, slice_sizes = array<i64: 1, 4>} : (tensor<8x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %e = mstep.index_select %emb, %ids {dim = 0 : i64} : tensor<8x4xf32>, tensor<3xi64> -> tensor<3x4xf32>
  // layer_norm over the last dimension: mean, centred square, rsqrt(var +
  // eps), then weight and bias broadcast from the right.
  // CHECK: "stablehlo.rsqrt"
  // CHECK: "stablehlo.broadcast_in_dim"(%arg3) {broadcast_dimensions = array<i64: 3>} : (tensor<4xf32>) -> tensor<1x2x3x4xf32>
  // CHECK: "stablehlo.broadcast_in_dim"(%arg4) {broadcast_dimensions = array<i64: 3>} : (tensor<4xf32>) -> tensor<1x2x3x4xf32>
  %n = mstep.layer_norm %x weight(%w : tensor<4xf32>) bias(%b : tensor<4xf32>) {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<1x2x3x4xf32>
  // CHECK: %[[A:.*]]:1 = "stablehlo.composite"(%{{.*}}, %{{.*}}, %{{.*}}, %arg5) {composite_attributes = {is_causal = true, scale = 0.5 : f64, dropout_p = 0.10000000000000001 : f64, rng_offset = 7 : i64}, decomposition = @mstep_sdpa_0, name = "mstep.sdpa", version = 1 : i32} : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<2xi64>) -> (tensor<1x2x3x4xf32>)
  %o = mstep.sdpa %n, %n, %n rng(%rng) {dropout_p = 1.000000e-01 : f64, is_causal = true, rng_offset = 7 : i64, scale = 5.000000e-01 : f64} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32> -> tensor<1x2x3x4xf32>
  // CHECK: %[[G:.*]]:3 = "stablehlo.composite"(%arg6, %{{.*}}, %{{.*}}, %{{.*}}, %arg5) {{{.*}}decomposition = @mstep_sdpa_backward_1, name = "mstep.sdpa_backward", version = 1 : i32} : ({{.*}}) -> (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>)
  %dq, %dk, %dv = mstep.sdpa_backward %g, %n, %n, %n rng(%rng) {dropout_p = 1.000000e-01 : f64, is_causal = true, rng_offset = 7 : i64, scale = 5.000000e-01 : f64} : tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>
  // CHECK: %[[S:.*]]:1 = "stablehlo.scatter"(%arg0, %arg1, %[[E]]) ({
  // CHECK-NEXT: ^bb0(%lhs: tensor<f32>, %rhs: tensor<f32>):
  // CHECK-NEXT: %r = "stablehlo.add"(%lhs, %rhs)
  // CHECK: }) {indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0], index_vector_dim = 1>, unique_indices = false} : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> (tensor<8x4xf32>)
  %ge = mstep.index_add %emb, %ids, %e {dim = 0 : i64} : tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>
  // CHECK: %[[START:.*]] = "stablehlo.constant"() {value = dense<4> : tensor<i64>}
  // CHECK: %[[U:.*]] = "stablehlo.dynamic_update_slice"(%arg7, %{{.*}}, %{{.*}}, %{{.*}}, %[[START]]) : (tensor<1x3x12xf32>, tensor<1x3x4xf32>, tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<1x3x12xf32>
  %part = mstep.reshape %e : tensor<3x4xf32> -> tensor<1x3x4xf32>
  %u = mstep.slice_scatter %qkv, %part {dim = 2 : i64, end = 8 : i64, start = 4 : i64, step = 1 : i64} : tensor<1x3x12xf32>, tensor<1x3x4xf32>
  // CHECK: return %[[E]], %[[A]]#0, %[[G]]#0, %[[G]]#2, %[[S]]#0, %[[U]]
  return %e, %o, %dq, %dv, %ge, %u : tensor<3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<8x4xf32>, tensor<1x3x12xf32>
}
// The decompositions: P = softmax(scale q k^T) with keys j > i excluded,
// the dropout mask from Philox at offset 7, then P' v.
// CHECK: func.func private @mstep_sdpa_0(%arg0: tensor<1x2x3x4xf32>, %arg1: tensor<1x2x3x4xf32>, %arg2: tensor<1x2x3x4xf32>, %arg3: tensor<2xi64>) -> (tensor<1x2x3x4xf32>) {
// CHECK: "stablehlo.dot_general"(%arg0, %arg1) {dot_dimension_numbers = #stablehlo.dot<lhs_batching_dimensions = [0, 1], rhs_batching_dimensions = [0, 1], lhs_contracting_dimensions = [3], rhs_contracting_dimensions = [3]>
// CHECK: comparison_direction = #stablehlo<comparison_direction GT>
// CHECK: value = dense<7> : tensor<ui64>
// CHECK: lhs_contracting_dimensions = [3], rhs_contracting_dimensions = [2]
// CHECK: func.func private @mstep_sdpa_backward_1(
// CHECK-SAME: -> (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>)
