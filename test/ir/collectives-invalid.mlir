// The collectives' verifiers: the result shape each implies for its world.
// RUN: mstep-opt %s -split-input-file -verify-diagnostics

func.func @gather_shape(%x: tensor<4x3xf32>) {
  // expected-error @+1 {{result shape [4, 3] must be [8, 3]}}
  %0 = mstep.all_gather %x {dim = 0 : i64, world_size = 2 : i64} : tensor<4x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @scatter_indivisible(%x: tensor<5x3xf32>) {
  // expected-error @+1 {{dim 0 of input 'tensor<5x3xf32>' is not divisible by the world size 2}}
  %0 = mstep.reduce_scatter %x {dim = 0 : i64, reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<5x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @broadcast_root(%x: tensor<4xf32>) {
  // expected-error @+1 {{root 2 is not a rank of a world of 2}}
  %0 = mstep.broadcast %x {root = 2 : i64, world_size = 2 : i64} : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @gather_dim(%x: tensor<4xf32>) {
  // expected-error @+1 {{dim 1 is out of range for input 'tensor<4xf32>'}}
  %0 = mstep.all_gather %x {dim = 1 : i64, world_size = 2 : i64} : tensor<4xf32> -> tensor<8xf32>
  return
}

// -----

func.func @reduce_element_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{all of {input, result} have same element type}}
  %0 = mstep.all_reduce %x {reduce_op = #mstep.reduce_op<sum>, world_size = 2 : i64} : tensor<4xf32> -> tensor<4xf64>
  return
}
