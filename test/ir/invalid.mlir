// Every diagnostic of the mstep verifiers (and a sample of the ODS type
// constraints), one --split-input-file case each, grouped by op family.
// RUN: mstep-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// Creation
//===----------------------------------------------------------------------===//

func.func @constant_not_integer() {
  // expected-error @+1 {{'mstep.constant' op value 2.5 is not an integer, but the result is 'tensor<i64>'}}
  %0 = mstep.constant 2.5 : tensor<i64>
  return
}

// -----

func.func @constant_not_bool() {
  // expected-error @+1 {{value 2 is not 0 or 1, but the result is 'tensor<i1>'}}
  %0 = mstep.constant 2.0 : tensor<i1>
  return
}

// -----

func.func @constant_out_of_range() {
  // expected-error @+1 {{value 3e+09 does not fit in 'i32'}}
  %0 = mstep.constant 3.0e9 : tensor<i32>
  return
}

// -----

func.func @constant_not_scalar() {
  // expected-error @+1 {{result #0 must be 0D tensor}}
  %0 = mstep.constant 1.0 : tensor<2xf32>
  return
}

// -----

func.func @full_element_type(%v: tensor<f64>) {
  // expected-error @+1 {{all of {value, result} have same element type}}
  %0 = mstep.full %v : tensor<f64> -> tensor<2xf32>
  return
}

// -----

func.func @arange_not_1d() {
  // expected-error @+1 {{result must be 1-D, got 'tensor<2x2xi64>'}}
  %0 = mstep.arange {start = 0.0 : f64, step = 1.0 : f64} : tensor<2x2xi64>
  return
}

// -----

func.func @arange_zero_step() {
  // expected-error @+1 {{start and step must be finite and step nonzero, got start 0, step 0}}
  %0 = mstep.arange {start = 0.0 : f64, step = 0.0 : f64} : tensor<4xf32>
  return
}

// -----

func.func @rand_integer(%rng: tensor<2xi64>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 32-bit float or 64-bit float or bfloat16 type or 16-bit float values}}
  %0 = mstep.rand %rng {offset = 0 : i64} : tensor<4xi32>
  return
}

// -----

func.func @rand_bad_state(%rng: tensor<3xi64>) {
  // expected-error @+1 {{operand #0 must be RNG state tensor<2xi64>, but got 'tensor<3xi64>'}}
  %0 = "mstep.rand"(%rng) <{offset = 0 : i64}> : (tensor<3xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @rand_negative_offset(%rng: tensor<2xi64>) {
  // expected-error @+1 {{attribute 'offset' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = mstep.rand %rng {offset = -1 : i64} : tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

func.func @dynamic_shape(%x: tensor<?xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %0 = mstep.exp %x : tensor<?xf32>
  return
}

// -----

func.func @exp_of_integer(%x: tensor<4xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or bfloat16 type or 16-bit float values}}
  %0 = mstep.exp %x : tensor<4xi32>
  return
}

// -----

func.func @neg_of_bool(%x: tensor<4xi1>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or bfloat16 type or 16-bit float or 32-bit signless integer or 64-bit signless integer values}}
  %0 = mstep.neg %x : tensor<4xi1>
  return
}

// -----

func.func @unsupported_element_type(%x: tensor<4xi8>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor}}
  %0 = mstep.isnan %x : tensor<4xi8> -> tensor<4xi1>
  return
}

// -----

func.func @isnan_not_bool(%x: tensor<4xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = mstep.isnan %x : tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @cast_changes_shape(%x: tensor<4xf32>) {
  // expected-error @+1 {{all non-scalar operands/results must have the same shape and base type}}
  %0 = mstep.cast %x : tensor<4xf32> -> tensor<2x2xi32>
  return
}

// -----

func.func @binary_no_broadcast(%a: tensor<2x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'mstep.add' op lhs of shape [2, 3] and rhs of shape [4] do not broadcast: dim -1 is 3 vs 4 (trailing dims must be equal or 1)}}
  %0 = mstep.add %a, %b : tensor<2x3xf32>, tensor<4xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @binary_result_shape(%a: tensor<2x1xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{'mstep.mul' op result shape [2, 1] must be the broadcast shape [2, 3] of the operands}}
  %0 = mstep.mul %a, %b : tensor<2x1xf32>, tensor<3xf32> -> tensor<2x1xf32>
  return
}

// -----

func.func @binary_element_types(%a: tensor<3xf32>, %b: tensor<3xf64>) {
  // expected-error @+1 {{requires the same element type for all operands}}
  %0 = mstep.add %a, %b : tensor<3xf32>, tensor<3xf64> -> tensor<3xf32>
  return
}

// -----

func.func @compare_result_not_bool(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = mstep.lt %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @div_of_integers(%a: tensor<3xi64>, %b: tensor<3xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or bfloat16 type or 16-bit float values}}
  %0 = mstep.div %a, %b : tensor<3xi64>, tensor<3xi64> -> tensor<3xi64>
  return
}

// -----

func.func @logical_and_of_floats(%a: tensor<3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = mstep.logical_and %a, %b : tensor<3xf32>, tensor<3xf32> -> tensor<3xi1>
  return
}

// -----

func.func @where_no_broadcast(%c: tensor<2x3xi1>, %a: tensor<3xf32>, %b: tensor<2xf32>) {
  // expected-error @+1 {{'mstep.where' op false_value of shape [2] does not broadcast with [2, 3], the broadcast shape of the operands before it: dim -1 is 3 vs 2 (trailing dims must be equal or 1)}}
  %0 = mstep.where %c, %a, %b : tensor<2x3xi1>, tensor<3xf32>, tensor<2xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @where_condition_not_bool(%c: tensor<3xf32>, %a: tensor<3xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = mstep.where %c, %a, %a : tensor<3xf32>, tensor<3xf32>, tensor<3xf32> -> tensor<3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

func.func @fusion_no_results(%a: tensor<3xf32>) {
  // The custom syntax cannot even spell a fusion without results.
  // expected-error @+1 {{'mstep.fusion' op must have at least one result}}
  "mstep.fusion"(%a) ({
  ^bb0(%x: tensor<3xf32>):
    "mstep.yield"() : () -> ()
  }) : (tensor<3xf32>) -> ()
  return
}

// -----

func.func @fusion_argument_count(%a: tensor<3xf32>) {
  // expected-error @+1 {{body has 2 block arguments but the fusion has 1 inputs; the block arguments are the inputs, in order}}
  %0 = mstep.fusion ins(%a : tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%x: tensor<3xf32>, %y: tensor<3xf32>):
    mstep.yield %x : tensor<3xf32>
  }
  return
}

// -----

func.func @fusion_argument_type(%a: tensor<3xf32>) {
  // expected-error @+1 {{block argument #0 has type 'tensor<3xf64>' but input #0 has type 'tensor<3xf32>'}}
  %0 = mstep.fusion ins(%a : tensor<3xf32>) -> tensor<3xf64> {
  ^bb0(%x: tensor<3xf64>):
    mstep.yield %x : tensor<3xf64>
  }
  return
}

// -----

func.func @fusion_not_fusible(%a: tensor<2x3xf32>) {
  // expected-error @+1 {{body holds 'mstep.sum', which is not fusible (only elementwise ops, expand, cast, constant and full may be fused)}}
  %0 = mstep.fusion ins(%a : tensor<2x3xf32>) -> tensor<2xf32> {
  ^bb0(%x: tensor<2x3xf32>):
    %s = mstep.sum %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3xf32> -> tensor<2xf32>
    mstep.yield %s : tensor<2xf32>
  }
  return
}

// -----

func.func @fusion_yield_count(%a: tensor<3xf32>) {
  // expected-error @+1 {{mstep.yield returns 1 values but the fusion has 2 results}}
  %0:2 = mstep.fusion ins(%a : tensor<3xf32>) -> tensor<3xf32>, tensor<3xf32> {
  ^bb0(%x: tensor<3xf32>):
    mstep.yield %x : tensor<3xf32>
  }
  return
}

// -----

func.func @fusion_yield_type(%a: tensor<3xf32>) {
  // expected-error @+1 {{mstep.yield operand #0 has type 'tensor<3xf32>' but result #0 has type 'tensor<3xi1>'}}
  %0 = mstep.fusion ins(%a : tensor<3xf32>) -> tensor<3xi1> {
  ^bb0(%x: tensor<3xf32>):
    mstep.yield %x : tensor<3xf32>
  }
  return
}

// -----

func.func @fusion_no_terminator(%a: tensor<3xf32>) {
  %0 = mstep.fusion ins(%a : tensor<3xf32>) -> tensor<3xf32> {
  ^bb0(%x: tensor<3xf32>):
    // expected-error @+1 {{block with no terminator}}
    %y = mstep.exp %x : tensor<3xf32>
  }
  return
}

// -----

func.func @fusion_uses_outer_value(%a: tensor<3xf32>) {
  // expected-note @+1 {{required by region isolation constraints}}
  %0 = mstep.fusion ins() -> tensor<3xf32> {
    // expected-error @+1 {{using value defined outside the region}}
    %y = mstep.exp %a : tensor<3xf32>
    mstep.yield %y : tensor<3xf32>
  }
  return
}

// -----

func.func @yield_outside_fusion(%a: tensor<3xf32>) {
  // expected-error @+1 {{'mstep.yield' op expects parent op 'mstep.fusion'}}
  mstep.yield %a : tensor<3xf32>
}

// -----

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

func.func @reduce_dim_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'mstep.sum' op dim 2 is out of range for rank 2 (dims must be in [0, rank)); the input is 'tensor<2x3xf32>'}}
  %0 = mstep.sum %x {dims = array<i64: 2>, keepdim = false} : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @reduce_dims_unsorted(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{dims [1, 0] must be sorted ascending without duplicates}}
  %0 = mstep.mean %x {dims = array<i64: 1, 0>, keepdim = false} : tensor<2x3xf32> -> tensor<f32>
  return
}

// -----

func.func @reduce_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [2] must be [2, 1] (input [2, 3] reduced over dims [1] with keepdim)}}
  %0 = mstep.sum %x {dims = array<i64: 1>, keepdim = true} : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @max_of_empty_dim(%x: tensor<2x0xf32>) {
  // expected-error @+1 {{'mstep.max' op reduction dim 1 of input 'tensor<2x0xf32>' has size 0, and this reduction has no identity}}
  %0 = mstep.max %x {dims = array<i64: 1>, keepdim = false} : tensor<2x0xf32> -> tensor<2xf32>
  return
}

// -----

func.func @argmax_two_of_three_dims(%x: tensor<2x3x4xf32>) {
  // expected-error @+1 {{reduces over one dim or over all dims, got dims [0, 1] for input 'tensor<2x3x4xf32>'}}
  %0 = mstep.argmax %x {dims = array<i64: 0, 1>, keepdim = false} : tensor<2x3x4xf32> -> tensor<4xi64>
  return
}

// -----

func.func @argmax_result_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result #0 must be statically shaped tensor of 64-bit signless integer values}}
  %0 = mstep.argmax %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

func.func @var_negative_correction(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{attribute 'correction' failed to satisfy constraint: 64-bit signless integer attribute whose value is non-negative}}
  %0 = mstep.var %x {correction = -1 : i64, dims = array<i64: 1>, keepdim = false} : tensor<2x3xf32> -> tensor<2xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

func.func @reshape_element_count(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot reshape 'tensor<2x3xf32>' (6 elements) to 'tensor<4xf32>' (4 elements): the element count must stay the same}}
  %0 = mstep.reshape %x : tensor<2x3xf32> -> tensor<4xf32>
  return
}

// -----

func.func @reshape_element_type(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %0 = mstep.reshape %x : tensor<2x3xf32> -> tensor<6xf16>
  return
}

// -----

func.func @permute_length(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{perm [0] has 1 entries but the input 'tensor<2x3xf32>' has rank 2}}
  %0 = mstep.permute %x {perm = array<i64: 0>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @permute_repeats(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{perm [1, 1] must list every dim of the input exactly once}}
  %0 = mstep.permute %x {perm = array<i64: 1, 1>} : tensor<2x3xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @permute_result_shape(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{result shape [2, 3] must be [3, 2] (the input's dims in perm order)}}
  %0 = mstep.permute %x {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @expand_fewer_dims(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot expand 'tensor<2x3xf32>' to 'tensor<3xf32>': the target has fewer dims}}
  %0 = mstep.expand %x : tensor<2x3xf32> -> tensor<3xf32>
  return
}

// -----

func.func @expand_non_unit_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{cannot expand 'tensor<2x3xf32>' to 'tensor<4x3xf32>': input dim 0 has size 2 (only size-1 dims can grow; new dims go in front)}}
  %0 = mstep.expand %x : tensor<2x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @slice_dim_out_of_range(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{'mstep.slice' op dim 2 is out of range for input 'tensor<2x6xf32>' (dims must be in [0, 2))}}
  %0 = mstep.slice %x {dim = 2 : i64, end = 1 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x6xf32> -> tensor<2x6xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{slice [4:8] of dim 1 (size 6) must satisfy 0 <= start <= end <= size}}
  %0 = mstep.slice %x {dim = 1 : i64, end = 8 : i64, start = 4 : i64, step = 1 : i64} : tensor<2x6xf32> -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_result_shape(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{result shape [2, 3] must be [2, 2] (the slice's length along dim)}}
  %0 = mstep.slice %x {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @slice_zero_step(%x: tensor<2x6xf32>) {
  // expected-error @+1 {{attribute 'step' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = mstep.slice %x {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 0 : i64} : tensor<2x6xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @cat_no_inputs() {
  // expected-error @+1 {{'mstep.cat' op expected 1 or more operands, but found 0}}
  %0 = "mstep.cat"() <{dim = 0 : i64}> : () -> tensor<2xf32>
  return
}

// -----

func.func @cat_scalars(%x: tensor<f32>) {
  // expected-error @+1 {{cannot concatenate 0-d tensors}}
  %0 = mstep.cat %x, %x {dim = 0 : i64} : tensor<f32>, tensor<f32> -> tensor<2xf32>
  return
}

// -----

func.func @cat_ranks(%a: tensor<2x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{input #1 'tensor<3xf32>' has a different rank than input #0 'tensor<2x3xf32>'}}
  %0 = mstep.cat %a, %b {dim = 0 : i64} : tensor<2x3xf32>, tensor<3xf32> -> tensor<3x3xf32>
  return
}

// -----

func.func @cat_other_dim(%a: tensor<2x3xf32>, %b: tensor<2x4xf32>) {
  // expected-error @+1 {{input #1 'tensor<2x4xf32>' differs from input #0 'tensor<2x3xf32>' in dim 1; sizes must match except in dim 0}}
  %0 = mstep.cat %a, %b {dim = 0 : i64} : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @cat_result_shape(%a: tensor<2x3xf32>, %b: tensor<1x3xf32>) {
  // expected-error @+1 {{result shape [4, 3] must be [3, 3] (the inputs joined along dim)}}
  %0 = mstep.cat %a, %b {dim = 0 : i64} : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<4x3xf32>
  return
}

// -----

func.func @gather_index_rank(%x: tensor<2x3xf32>, %i: tensor<2xi64>) {
  // expected-error @+1 {{index 'tensor<2xi64>' must have the rank of input 'tensor<2x3xf32>'}}
  %0 = mstep.gather %x, %i {dim = 1 : i64} : tensor<2x3xf32>, tensor<2xi64> -> tensor<2xf32>
  return
}

// -----

func.func @gather_index_too_large(%x: tensor<2x3xf32>, %i: tensor<4x2xi64>) {
  // expected-error @+1 {{index 'tensor<4x2xi64>' exceeds input 'tensor<2x3xf32>' in dim 0 (only dim 1 may be larger)}}
  %0 = mstep.gather %x, %i {dim = 1 : i64} : tensor<2x3xf32>, tensor<4x2xi64> -> tensor<4x2xf32>
  return
}

// -----

func.func @gather_result_shape(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>) {
  // expected-error @+1 {{result shape [2, 3] must be [2, 2] (the index's shape)}}
  %0 = mstep.gather %x, %i {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x2xi64> -> tensor<2x3xf32>
  return
}

// -----

func.func @gather_float_index(%x: tensor<2x3xf32>, %i: tensor<2x2xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = mstep.gather %x, %i {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x2xf32> -> tensor<2x2xf32>
  return
}

// -----

func.func @index_select_index_rank(%x: tensor<2x3xf32>, %i: tensor<2x2xi64>) {
  // expected-error @+1 {{'mstep.index_select' op index 'tensor<2x2xi64>' must be 1-D}}
  %0 = mstep.index_select %x, %i {dim = 0 : i64} : tensor<2x3xf32>, tensor<2x2xi64> -> tensor<4x3xf32>
  return
}

// -----

func.func @index_select_scalar_input(%x: tensor<f32>, %i: tensor<1xi64>) {
  // expected-error @+1 {{'mstep.index_select' op input must have at least one dim}}
  %0 = mstep.index_select %x, %i {dim = 0 : i64} : tensor<f32>, tensor<1xi64> -> tensor<f32>
  return
}

// -----

func.func @index_select_result_shape(%x: tensor<2x3xf32>, %i: tensor<5xi64>) {
  // expected-error @+1 {{result shape [2, 3] must be [5, 3] (the input with dim sized by the index)}}
  %0 = mstep.index_select %x, %i {dim = 0 : i64} : tensor<2x3xf32>, tensor<5xi64> -> tensor<2x3xf32>
  return
}

// -----

func.func @pad_odd(%x: tensor<2x3xf32>, %v: tensor<f32>) {
  // expected-error @+1 {{pads [1, 2, 3] must hold (before, after) pairs, last dim first}}
  %0 = mstep.pad %x, %v {pads = array<i64: 1, 2, 3>} : tensor<2x3xf32>, tensor<f32> -> tensor<2x6xf32>
  return
}

// -----

func.func @pad_too_many_dims(%x: tensor<3xf32>, %v: tensor<f32>) {
  // expected-error @+1 {{pads [1, 1, 1, 1] covers 2 dims but the input 'tensor<3xf32>' has 1}}
  %0 = mstep.pad %x, %v {pads = array<i64: 1, 1, 1, 1>} : tensor<3xf32>, tensor<f32> -> tensor<5xf32>
  return
}

// -----

func.func @pad_negative_size(%x: tensor<3xf32>, %v: tensor<f32>) {
  // expected-error @+1 {{pads [-2, -2] crop dim 0 (size 3) to a negative size}}
  %0 = mstep.pad %x, %v {pads = array<i64: -2, -2>} : tensor<3xf32>, tensor<f32> -> tensor<0xf32>
  return
}

// -----

func.func @pad_result_shape(%x: tensor<3xf32>, %v: tensor<f32>) {
  // expected-error @+1 {{result shape [3] must be [5] (the input padded by pads)}}
  %0 = mstep.pad %x, %v {pads = array<i64: 1, 1>} : tensor<3xf32>, tensor<f32> -> tensor<3xf32>
  return
}

// -----

func.func @pad_value_type(%x: tensor<3xf32>, %v: tensor<f64>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %0 = mstep.pad %x, %v {pads = array<i64: 1, 1>} : tensor<3xf32>, tensor<f64> -> tensor<5xf32>
  return
}

// -----

func.func @triu_vector(%x: tensor<3xf32>) {
  // expected-error @+1 {{'mstep.triu' op input 'tensor<3xf32>' must have at least 2 dims (it works on the last two)}}
  %0 = mstep.triu %x {diagonal = 0 : i64} : tensor<3xf32>
  return
}

// -----

func.func @tril_vector(%x: tensor<3xf32>) {
  // expected-error @+1 {{'mstep.tril' op input 'tensor<3xf32>' must have at least 2 dims (it works on the last two)}}
  %0 = mstep.tril %x {diagonal = 0 : i64} : tensor<3xf32>
  return
}

// -----

func.func @scatter_add_ranks(%x: tensor<2x3xf32>, %i: tensor<2xi64>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{input 'tensor<2x3xf32>', index 'tensor<2xi64>' and src 'tensor<2x3xf32>' must have one rank}}
  %0 = mstep.scatter_add %x, %i, %s {dim = 0 : i64} : tensor<2x3xf32>, tensor<2xi64>, tensor<2x3xf32>
  return
}

// -----

// A 0-d input has dim 0 only (as in PyTorch).
func.func @scatter_add_scalar(%x: tensor<f32>, %i: tensor<i64>, %s: tensor<f32>) {
  // expected-error @+1 {{'mstep.scatter_add' op dim 1 is out of range for input 'tensor<f32>'}}
  %0 = mstep.scatter_add %x, %i, %s {dim = 1 : i64} : tensor<f32>, tensor<i64>, tensor<f32>
  return
}

// -----

func.func @scatter_add_index_exceeds_src(%x: tensor<4x3xf32>, %i: tensor<3x3xi64>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{index 'tensor<3x3xi64>' exceeds src 'tensor<2x3xf32>' in dim 0}}
  %0 = mstep.scatter_add %x, %i, %s {dim = 0 : i64} : tensor<4x3xf32>, tensor<3x3xi64>, tensor<2x3xf32>
  return
}

// -----

func.func @scatter_add_index_exceeds_input(%x: tensor<4x3xf32>, %i: tensor<2x5xi64>, %s: tensor<2x5xf32>) {
  // expected-error @+1 {{index 'tensor<2x5xi64>' exceeds input 'tensor<4x3xf32>' in dim 1 (only dim 0 may be larger)}}
  %0 = mstep.scatter_add %x, %i, %s {dim = 0 : i64} : tensor<4x3xf32>, tensor<2x5xi64>, tensor<2x5xf32>
  return
}

// -----

func.func @index_add_index_rank(%x: tensor<4x3xf32>, %i: tensor<2x1xi64>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{'mstep.index_add' op index 'tensor<2x1xi64>' must be 1-D}}
  %0 = mstep.index_add %x, %i, %s {dim = 0 : i64} : tensor<4x3xf32>, tensor<2x1xi64>, tensor<2x3xf32>
  return
}

// -----

func.func @index_add_scalar(%x: tensor<f32>, %i: tensor<1xi64>, %s: tensor<f32>) {
  // expected-error @+1 {{'mstep.index_add' op input must have at least one dim}}
  %0 = mstep.index_add %x, %i, %s {dim = 0 : i64} : tensor<f32>, tensor<1xi64>, tensor<f32>
  return
}

// -----

func.func @index_add_source_shape(%x: tensor<4x3xf32>, %i: tensor<2xi64>, %s: tensor<3x3xf32>) {
  // expected-error @+1 {{source 'tensor<3x3xf32>' must have shape [2, 3] (the input's, with dim sized by the index)}}
  %0 = mstep.index_add %x, %i, %s {dim = 0 : i64} : tensor<4x3xf32>, tensor<2xi64>, tensor<3x3xf32>
  return
}

// -----

func.func @slice_scatter_bounds(%x: tensor<2x6xf32>, %s: tensor<2x2xf32>) {
  // expected-error @+1 {{slice [5:3] of dim 1 (size 6) must satisfy 0 <= start <= end <= size}}
  %0 = mstep.slice_scatter %x, %s {dim = 1 : i64, end = 3 : i64, start = 5 : i64, step = 1 : i64} : tensor<2x6xf32>, tensor<2x2xf32>
  return
}

// -----

func.func @slice_scatter_src_shape(%x: tensor<2x6xf32>, %s: tensor<2x3xf32>) {
  // expected-error @+1 {{src 'tensor<2x3xf32>' must have the slice's shape [2, 2]}}
  %0 = mstep.slice_scatter %x, %s {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6xf32>, tensor<2x3xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Linear algebra, convolution, pooling
//===----------------------------------------------------------------------===//

func.func @matmul_vector(%a: tensor<3xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+1 {{operands 'tensor<3xf32>' and 'tensor<3x4xf32>' must both have rank >= 2 ([..., n, k] x [..., k, p])}}
  %0 = mstep.matmul %a, %b : tensor<3xf32>, tensor<3x4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @matmul_contraction(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>) {
  // expected-error @+1 {{contracted dims differ: lhs [2, 3] has k = 3 (last dim), rhs [4, 5] has 4 (dim -2)}}
  %0 = mstep.matmul %a, %b : tensor<2x3xf32>, tensor<4x5xf32> -> tensor<2x5xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<2x2x3xf32>, %b: tensor<4x3x5xf32>) {
  // expected-error @+1 {{batch dims of lhs [2, 2, 3] and rhs [4, 3, 5] do not broadcast (batch dim -1)}}
  %0 = mstep.matmul %a, %b : tensor<2x2x3xf32>, tensor<4x3x5xf32> -> tensor<4x2x5xf32>
  return
}

// -----

func.func @matmul_result_shape(%a: tensor<2x3xf32>, %b: tensor<3x5xf32>) {
  // expected-error @+1 {{result shape [5, 2] must be [2, 5] (broadcast batch dims, then n and p)}}
  %0 = mstep.matmul %a, %b : tensor<2x3xf32>, tensor<3x5xf32> -> tensor<5x2xf32>
  return
}

// -----

func.func @matmul_mixed_types(%a: tensor<2x3xf32>, %b: tensor<3x5xf16>) {
  // expected-error @+1 {{requires the same element type for all operands and results}}
  %0 = mstep.matmul %a, %b : tensor<2x3xf32>, tensor<3x5xf16> -> tensor<2x5xf32>
  return
}

// -----

func.func @conv_input_rank(%x: tensor<3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'mstep.conv2d' op input 'tensor<3x8x8xf32>' must be 4-D [N, C, H, W]}}
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<4x6x6xf32>
  return
}

// -----

func.func @conv_bias_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+1 {{bias 'tensor<3xf32>' must be 1-D of size 4 (the weight's output channels)}}
  %0 = mstep.conv2d %x, %w, %b {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_groups(%x: tensor<1x3x8x8xf32>, %w: tensor<4x1x3x3xf32>) {
  // expected-error @+1 {{groups = 2 must divide the input's 3 channels and the weight's 4 output channels}}
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x1x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+1 {{weight [4, 2, 3, 3] expects 2 input channels (dim 1 x groups = 1) but the input [1, 3, 8, 8] has 3}}
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_kernel_too_large(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{kernel 3x3 with dilation [1, 1] does not fit the input [1, 3, 2, 2] padded by [0, 0]}}
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x1x1xf32>
  return
}

// -----

func.func @conv_result_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{result shape [1, 4, 8, 8] must be [1, 4, 3, 3] (the convolution's output)}}
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @conv_stride_pair(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{attribute 'stride' failed to satisfy constraint: i64 dense array attribute with exactly 2 elements whose value is positive}}
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @pool_padding(%x: tensor<1x2x6x6xf32>) {
  // expected-error @+1 {{'mstep.max_pool2d' op padding [2, 2] must be at most half the kernel [2, 2]}}
  %0 = mstep.max_pool2d %x {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 2, 2>, stride = array<i64: 2, 2>} : tensor<1x2x6x6xf32> -> tensor<1x2x5x5xf32>
  return
}

// -----

func.func @pool_window_too_large(%x: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{window [3, 3] (dilation [1, 1]) does not fit the input [1, 2, 2, 2] padded by [0, 0]}}
  %0 = mstep.avg_pool2d %x {ceil_mode = false, count_include_pad = true, kernel = array<i64: 3, 3>, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x2x2x2xf32> -> tensor<1x2x1x1xf32>
  return
}

// -----

func.func @pool_result_shape(%x: tensor<1x2x6x6xf32>) {
  // expected-error @+1 {{result shape [1, 2, 2, 2] must be [1, 2, 3, 3] (the pooling output)}}
  %0 = mstep.max_pool2d %x {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x2x6x6xf32> -> tensor<1x2x2x2xf32>
  return
}

// -----

func.func @pool_input_rank(%x: tensor<2x6x6xf32>) {
  // expected-error @+1 {{'mstep.avg_pool2d' op input 'tensor<2x6x6xf32>' must be 4-D [N, C, H, W]}}
  %0 = mstep.avg_pool2d %x {ceil_mode = false, count_include_pad = true, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x6x6xf32> -> tensor<2x3x3xf32>
  return
}

// -----

func.func @conv_grad_rank(%g: tensor<4x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{input [1, 3, 8, 8], weight [4, 3, 3, 3] and grad_output [4, 8, 8] must all be 4-D}}
  %0 = mstep.conv2d_input_grad %g, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x3x8x8xf32>
  return
}

// -----

func.func @conv_input_grad_shape(%g: tensor<1x4x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{grad_output 'tensor<1x4x8x8xf32>' must have shape [1, 4, 6, 6], the output of conv2d(input [1, 3, 8, 8], weight [4, 3, 3, 3])}}
  %0 = mstep.conv2d_input_grad %g, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x4x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x3x8x8xf32>
  return
}

// -----

func.func @conv_weight_grad_channels(%x: tensor<1x3x8x8xf32>, %g: tensor<1x4x8x8xf32>) {
  // expected-error @+1 {{'mstep.conv2d_weight_grad' op weight [4, 2, 3, 3] expects 2 input channels (dim 1 x groups = 1) but the input [1, 3, 8, 8] has 3}}
  %0 = mstep.conv2d_weight_grad %x, %g {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<1x4x8x8xf32> -> tensor<4x2x3x3xf32>
  return
}

// -----

func.func @max_pool_grad_rank(%g: tensor<2x3x3xf32>, %x: tensor<1x2x6x6xf32>) {
  // expected-error @+1 {{input [1, 2, 6, 6] and grad_output 'tensor<2x3x3xf32>' must be 4-D}}
  %0 = mstep.max_pool2d_grad %g, %x {ceil_mode = false, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<2x3x3xf32>, tensor<1x2x6x6xf32>
  return
}

// -----

func.func @avg_pool_grad_shape(%g: tensor<1x2x2x2xf32>) {
  // expected-error @+1 {{grad_output 'tensor<1x2x2x2xf32>' must have shape [1, 2, 3, 3], the pooling output of input [1, 2, 6, 6]}}
  %0 = mstep.avg_pool2d_grad %g {ceil_mode = false, count_include_pad = true, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0>, stride = array<i64: 2, 2>} : tensor<1x2x2x2xf32> -> tensor<1x2x6x6xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Normalization, dropout, loss
//===----------------------------------------------------------------------===//

func.func @softmax_dim(%x: tensor<2x3xf32>) {
  // expected-error @+1 {{'mstep.softmax' op dim 2 is out of range for input 'tensor<2x3xf32>'}}
  %0 = mstep.softmax %x {dim = 2 : i64} : tensor<2x3xf32>
  return
}

// -----

func.func @log_softmax_of_integers(%x: tensor<2x3xi32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 32-bit float or 64-bit float or bfloat16 type or 16-bit float values}}
  %0 = mstep.log_softmax %x {dim = 1 : i64} : tensor<2x3xi32>
  return
}

// -----

func.func @layer_norm_ndim(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{normalized_ndim = 3 exceeds the rank of input 'tensor<2x4xf32>'}}
  %0 = mstep.layer_norm %x {eps = 1.0e-05 : f64, normalized_ndim = 3 : i64} : tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_weight_shape(%x: tensor<2x4xf32>, %w: tensor<2x4xf32>) {
  // expected-error @+1 {{weight 'tensor<2x4xf32>' must have the normalized shape [4] and the element type of input 'tensor<2x4xf32>'}}
  %0 = mstep.layer_norm %x weight(%w : tensor<2x4xf32>) {eps = 1.0e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_bias_type(%x: tensor<2x4xf32>, %b: tensor<4xf16>) {
  // expected-error @+1 {{bias 'tensor<4xf16>' must have the normalized shape [4] and the element type of input 'tensor<2x4xf32>'}}
  %0 = mstep.layer_norm %x bias(%b : tensor<4xf16>) {eps = 1.0e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{eps must be finite and >= 0, got -1}}
  %0 = mstep.layer_norm %x {eps = -1.0 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  return
}

// -----

func.func @rms_norm_weight(%x: tensor<2x4xf32>, %w: tensor<2xf32>) {
  // expected-error @+1 {{'mstep.rms_norm' op weight 'tensor<2xf32>' must have the normalized shape [4] and the element type of input 'tensor<2x4xf32>'}}
  %0 = mstep.rms_norm %x weight(%w : tensor<2xf32>) {eps = 1.0e-06 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
  return
}

// -----

func.func @rms_norm_zero_ndim(%x: tensor<2x4xf32>) {
  // expected-error @+1 {{attribute 'normalized_ndim' failed to satisfy constraint: 64-bit signless integer attribute whose value is positive}}
  %0 = mstep.rms_norm %x {eps = 1.0e-06 : f64, normalized_ndim = 0 : i64} : tensor<2x4xf32>
  return
}

// -----

func.func @dropout_p(%x: tensor<4xf32>, %rng: tensor<2xi64>) {
  // expected-error @+1 {{'mstep.dropout' op probability p must be in [0, 1], got 1.5}}
  %0 = mstep.dropout %x, %rng {offset = 0 : i64, p = 1.5 : f64} : tensor<4xf32>
  return
}

// -----

func.func @nll_loss_rank(%lp: tensor<2x3x4xf32>, %t: tensor<2xi64>) {
  // expected-error @+1 {{log_probs 'tensor<2x3x4xf32>' must be [N, C] or [C] (class dim last)}}
  %0 = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<2x3x4xf32>, tensor<2xi64> -> tensor<f32>
  return
}

// -----

func.func @nll_loss_target(%lp: tensor<8x10xf32>, %t: tensor<10xi64>) {
  // expected-error @+1 {{target 'tensor<10xi64>' must have shape [8] (one class index per row of log_probs 'tensor<8x10xf32>')}}
  %0 = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<8x10xf32>, tensor<10xi64> -> tensor<f32>
  return
}

// -----

func.func @nll_loss_result_none(%lp: tensor<8x10xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{result 'tensor<f32>' must have shape [8] (the target's) for reduction none}}
  %0 = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<none>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return
}

// -----

func.func @nll_loss_result_mean(%lp: tensor<8x10xf32>, %t: tensor<8xi64>) {
  // expected-error @+1 {{result 'tensor<8xf32>' must have shape [] (0-d) for a mean or sum reduction}}
  %0 = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<sum>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<8xf32>
  return
}

// -----

func.func @nll_loss_target_type(%lp: tensor<8x10xf32>, %t: tensor<8xi32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 64-bit signless integer values}}
  %0 = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<sum>} : tensor<8x10xf32>, tensor<8xi32> -> tensor<f32>
  return
}

// -----

func.func @nll_loss_unknown_reduction(%lp: tensor<8x10xf32>, %t: tensor<8xi64>) {
  // expected-error @+2 {{expected ::mstep::dialect::LossReduction to be one of: none, mean, sum}}
  // expected-error @+1 {{failed to parse Mstep_LossReductionAttr parameter 'value'}}
  %0 = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<avg>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

func.func @sdpa_element_types(%q: tensor<2x8x16xf32>, %k: tensor<2x8x16xf16>, %v: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'mstep.sdpa' op query 'tensor<2x8x16xf32>', key 'tensor<2x8x16xf16>' and value 'tensor<2x8x16xf32>' must share one element type}}
  %0 = mstep.sdpa %q, %k, %v {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf16>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_ranks(%q: tensor<2x8x16xf32>, %k: tensor<8x16xf32>, %v: tensor<8x16xf32>) {
  // expected-error @+1 {{must have one rank >= 2 ([..., L, E], [..., S, E], [..., S, Ev])}}
  %0 = mstep.sdpa %q, %k, %v {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_leading_dims(%q: tensor<2x8x16xf32>, %k: tensor<3x8x16xf32>, %v: tensor<3x8x16xf32>) {
  // expected-error @+1 {{must have identical leading (batch, head) dims}}
  %0 = mstep.sdpa %q, %k, %v {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<3x8x16xf32>, tensor<3x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_head_dim(%q: tensor<2x8x16xf32>, %k: tensor<2x8x32xf32>, %v: tensor<2x8x16xf32>) {
  // expected-error @+1 {{query's head dim E = 16 differs from key's 32 (query [..., L, E], key [..., S, E])}}
  %0 = mstep.sdpa %q, %k, %v {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x32xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_key_value_length(%q: tensor<2x8x16xf32>, %k: tensor<2x10x16xf32>, %v: tensor<2x8x16xf32>) {
  // expected-error @+1 {{key has S = 10 positions but value has 8 (key [..., S, E], value [..., S, Ev])}}
  %0 = mstep.sdpa %q, %k, %v {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x10x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_mask_and_causal(%q: tensor<2x8x16xf32>, %m: tensor<8x8xi1>) {
  // expected-error @+1 {{is_causal and a mask cannot be used together; fold the causal pattern into the mask}}
  %0 = mstep.sdpa %q, %q, %q mask(%m : tensor<8x8xi1>) {is_causal = true, scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_mask_type(%q: tensor<2x8x16xf32>, %m: tensor<8x8xf16>) {
  // expected-error @+1 {{mask 'tensor<8x8xf16>' must be i1 (true = attend) or the query's element type 'f32' (added to the scores)}}
  %0 = mstep.sdpa %q, %q, %q mask(%m : tensor<8x8xf16>) {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_mask_shape(%q: tensor<2x8x16xf32>, %m: tensor<3x8xi1>) {
  // expected-error @+1 {{mask 'tensor<3x8xi1>' does not broadcast to the scores' shape [..., L, S] = [2, 8, 8]}}
  %0 = mstep.sdpa %q, %q, %q mask(%m : tensor<3x8xi1>) {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_valid_len_rank(%q: tensor<8x16xf32>, %len: tensor<8xi64>) {
  // expected-error @+1 {{valid_seq_len needs a batch dim: query 'tensor<8x16xf32>' must have rank >= 3 ([B, ..., L, E])}}
  %0 = mstep.sdpa %q, %q, %q valid_seq_len(%len : tensor<8xi64>) {scale = 0.25 : f64} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
  return
}

// -----

func.func @sdpa_valid_len_shape(%q: tensor<2x8x16xf32>, %len: tensor<3xi64>) {
  // expected-error @+1 {{valid_seq_len 'tensor<3xi64>' must have shape [B] = [2]}}
  %0 = mstep.sdpa %q, %q, %q valid_seq_len(%len : tensor<3xi64>) {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_scale(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{scale must be finite, got inf}}
  %0 = mstep.sdpa %q, %q, %q {scale = 0x7FF0000000000000 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_dropout_p(%q: tensor<2x8x16xf32>, %rng: tensor<2xi64>) {
  // expected-error @+1 {{dropout_p must be in [0, 1], got 2}}
  %0 = mstep.sdpa %q, %q, %q rng(%rng) {dropout_p = 2.0 : f64, rng_offset = 0 : i64, scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_dropout_without_rng(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{takes an RNG state exactly when dropout_p > 0; dropout_p is 0.1 and no RNG state is given}}
  %0 = mstep.sdpa %q, %q, %q {dropout_p = 0.1 : f64, scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_rng_without_dropout(%q: tensor<2x8x16xf32>, %rng: tensor<2xi64>) {
  // expected-error @+1 {{takes an RNG state exactly when dropout_p > 0; dropout_p is 0 but an RNG state is given}}
  %0 = mstep.sdpa %q, %q, %q rng(%rng) {rng_offset = 0 : i64, scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_rng_offset(%q: tensor<2x8x16xf32>, %rng: tensor<2xi64>) {
  // expected-error @+1 {{rng_offset must be given exactly when an RNG state is}}
  %0 = mstep.sdpa %q, %q, %q rng(%rng) {dropout_p = 0.1 : f64, scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_out_type(%q: tensor<2x8x16xf32>, %v: tensor<2x8x32xf32>) {
  // expected-error @+1 {{out has type 'tensor<2x8x16xf32>', expected 'tensor<2x8x32xf32>' ([..., L, Ev] in the query's element type)}}
  %0 = mstep.sdpa %q, %q, %v {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x32xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_probs_missing(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{probs is missing (return_attn_probs)}}
  %0 = mstep.sdpa %q, %q, %q {return_attn_probs = true, scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_probs_unasked(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{probs must be absent (return_attn_probs)}}
  %0:2 = mstep.sdpa %q, %q, %q {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32> probs tensor<2x8x8xf32>
  return
}

// -----

func.func @sdpa_probs_type(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{probs has type 'tensor<2x8x16xf32>', expected 'tensor<2x8x8xf32>'}}
  %0:2 = mstep.sdpa %q, %q, %q {return_attn_probs = true, scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32> probs tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_dropout_mask_missing(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{dropout_mask is missing (return_dropout_mask)}}
  %0 = mstep.sdpa %q, %q, %q {return_dropout_mask = true, scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_saved_probs_missing(%q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{saved_probs is missing (present iff recompute_mode = false)}}
  %0 = mstep.sdpa %q, %q, %q {recompute_mode = false, scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_backward_grad_out(%g: tensor<2x8x32xf32>, %q: tensor<2x8x16xf32>) {
  // expected-error @+1 {{'mstep.sdpa_backward' op grad_out has type 'tensor<2x8x32xf32>', expected 'tensor<2x8x16xf32>' (the forward's out)}}
  %0:3 = mstep.sdpa_backward %g, %q, %q, %q {scale = 0.25 : f64} : tensor<2x8x32xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_backward_saved_probs(%q: tensor<2x8x16xf32>, %p: tensor<2x8x8xf32>) {
  // expected-error @+1 {{saved_probs must be absent (present iff recompute_mode = false)}}
  %0:3 = mstep.sdpa_backward %q, %q, %q, %q saved_probs(%p : tensor<2x8x8xf32>) {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>
  return
}

// -----

func.func @sdpa_backward_bool_mask_grad(%q: tensor<2x8x16xf32>, %m: tensor<8x8xi1>) {
  // expected-error @+1 {{grad_mask needs a floating-point mask operand}}
  %0:4 = mstep.sdpa_backward %q, %q, %q, %q mask(%m : tensor<8x8xi1>) {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> grad_mask tensor<8x8xf32>
  return
}

// -----

func.func @sdpa_backward_mask_grad_type(%q: tensor<2x8x16xf32>, %m: tensor<8x8xf32>) {
  // expected-error @+1 {{grad_mask has type 'tensor<2x8x8xf32>', expected the mask's type 'tensor<8x8xf32>'}}
  %0:4 = mstep.sdpa_backward %q, %q, %q, %q mask(%m : tensor<8x8xf32>) {scale = 0.25 : f64} : tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32>, tensor<2x8x16xf32> -> grad_mask tensor<2x8x8xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

func.func @update_no_params(%lr: tensor<f64>) {
  // expected-error @+1 {{'mstep.multi_tensor_update' op needs at least one parameter}}
  "mstep.multi_tensor_update"(%lr) <{kind = #mstep.optimizer<sgd>, operandSegmentSizes = array<i32: 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 0, 0, 0, 0, 0>}> : (tensor<f64>) -> ()
  return
}

// -----

func.func @update_grad_count(%w: tensor<4xf32>, %g: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{has 1 params but 2 grads}}
  %0 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%g, %g : tensor<4xf32>, tensor<4xf32>) lr(%lr)
  return
}

// -----

func.func @update_grad_type(%w: tensor<4xf32>, %g: tensor<4xf16>, %lr: tensor<f64>) {
  // expected-error @+1 {{grads #0 has type 'tensor<4xf16>' but params #0 has type 'tensor<4xf32>'}}
  %0 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%g : tensor<4xf16>) lr(%lr)
  return
}

// -----

func.func @update_foreign_hyper(%w: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{beta1 is not a hyperparameter of sgd}}
  %0 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) lr(%lr) beta1(%lr)
  return
}

// -----

func.func @update_dampening_without_momentum(%w: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{dampening is not a hyperparameter of sgd without momentum}}
  %0 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) lr(%lr) dampening(%lr)
  return
}

// -----

func.func @update_missing_hyper(%w: tensor<4xf32>, %s: tensor<4xf32>, %t: tensor<i64>, %lr: tensor<f64>) {
  // expected-error @+1 {{adam needs the hyperparameter beta2}}
  %0:4 = mstep.multi_tensor_update <adam> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) states(%s, %s : tensor<4xf32>, tensor<4xf32>) steps(%t) lr(%lr) beta1(%lr) eps(%lr)
  return
}

// -----

func.func @update_adadelta_without_rho(%w: tensor<4xf32>, %s: tensor<4xf32>, %t: tensor<i64>, %lr: tensor<f64>) {
  // expected-error @+1 {{adadelta needs the hyperparameter rho}}
  %0:4 = mstep.multi_tensor_update <adadelta> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) states(%s, %s : tensor<4xf32>, tensor<4xf32>) steps(%t) lr(%lr) eps(%lr)
  return
}

// -----

func.func @update_nesterov_without_momentum(%w: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{nesterov needs sgd with momentum and without dampening}}
  %0 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) lr(%lr) {nesterov = true}
  return
}

// -----

func.func @update_amsgrad_sgd(%w: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{amsgrad applies to adam and adamw only}}
  %0 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) lr(%lr) {amsgrad = true}
  return
}

// -----

func.func @update_state_count(%w: tensor<4xf32>, %s: tensor<4xf32>, %t: tensor<i64>, %lr: tensor<f64>) {
  // expected-error @+1 {{adamw keeps 3 state tensors per parameter (3 for 1 params), got 2}}
  %0:4 = mstep.multi_tensor_update <adamw> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) states(%s, %s : tensor<4xf32>, tensor<4xf32>) steps(%t) lr(%lr) beta1(%lr) beta2(%lr) eps(%lr) {amsgrad = true}
  return
}

// -----

func.func @update_state_type(%w: tensor<4xf32>, %b: tensor<2xf32>, %t: tensor<i64>, %lr: tensor<f64>) {
  // expected-error @+1 {{states #1 (slot 0 of params #1) has type 'tensor<4xf32>', expected 'tensor<2xf32>'}}
  %0:6 = mstep.multi_tensor_update <sgd> params(%w, %b : tensor<4xf32>, tensor<2xf32>) grads(%w, %b : tensor<4xf32>, tensor<2xf32>) states(%w, %w : tensor<4xf32>, tensor<4xf32>) steps(%t, %t) lr(%lr) momentum(%lr)
  return
}

// -----

func.func @update_missing_steps(%w: tensor<4xf32>, %s: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{adam takes 1 step counters, got 0}}
  %0:3 = mstep.multi_tensor_update <adam> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) states(%s, %s : tensor<4xf32>, tensor<4xf32>) lr(%lr) beta1(%lr) beta2(%lr) eps(%lr)
  return
}

// -----

func.func @update_sgd_steps(%w: tensor<4xf32>, %t: tensor<i64>, %lr: tensor<f64>) {
  // expected-error @+1 {{sgd without momentum takes 0 step counters, got 1}}
  %0:2 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) steps(%t) lr(%lr)
  return
}

// -----

func.func @update_norm_without_clip(%w: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{returns total_grad_norm exactly when max_grad_norm is given}}
  %0:2 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) lr(%lr) -> total_grad_norm tensor<f32>
  return
}

// -----

func.func @update_negative_max_norm(%w: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{max_grad_norm must be finite and >= 0, got -1}}
  %0:2 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) lr(%lr) {max_grad_norm = -1.0 : f64} -> total_grad_norm tensor<f32>
  return
}

// -----

func.func @update_norm_type(%w: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{grad_norm_type must be > 0 (or inf), got 0}}
  %0:2 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) lr(%lr) {grad_norm_type = 0.0 : f64, max_grad_norm = 1.0 : f64} -> total_grad_norm tensor<f32>
  return
}

// -----

func.func @update_clipped_grads_without_clip(%w: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{returns clipped_grads only when max_grad_norm is given}}
  %0:2 = mstep.multi_tensor_update <sgd> params(%w : tensor<4xf32>) grads(%w : tensor<4xf32>) lr(%lr) clipped_grads(tensor<4xf32>)
  return
}

// -----

func.func @update_clipped_grads_count(%w: tensor<4xf32>, %b: tensor<2xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{returns 1 clipped_grads; expected none or one per grad (2), each of its grad's type}}
  %0:4 = mstep.multi_tensor_update <sgd> params(%w, %b : tensor<4xf32>, tensor<2xf32>) grads(%w, %b : tensor<4xf32>, tensor<2xf32>) lr(%lr) {max_grad_norm = 1.0 : f64} -> total_grad_norm tensor<f32> clipped_grads(tensor<4xf32>)
  return
}

// -----

func.func @update_result_types(%w: tensor<4xf32>, %lr: tensor<f64>) {
  // expected-error @+1 {{results must be the updated params, states and steps, each of its operand's type}}
  %0 = "mstep.multi_tensor_update"(%w, %w, %lr) <{kind = #mstep.optimizer<sgd>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0>}> : (tensor<4xf32>, tensor<4xf32>, tensor<f64>) -> tensor<2x2xf32>
  return
}

// -----

func.func @update_hyper_not_f64(%w: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @+1 {{operand #2 must be 0D tensor of 64-bit float values, but got 'tensor<f32>'}}
  %0 = "mstep.multi_tensor_update"(%w, %w, %lr) <{kind = #mstep.optimizer<sgd>, operandSegmentSizes = array<i32: 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0>, resultSegmentSizes = array<i32: 1, 0, 0, 0, 0>}> : (tensor<4xf32>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Custom
//===----------------------------------------------------------------------===//

func.func @custom_empty_name(%x: tensor<4xf32>) {
  // expected-error @+1 {{'mstep.custom' op needs a non-empty op_name}}
  %0 = mstep.custom ""(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @custom_no_results(%x: tensor<4xf32>) {
  // expected-error @+1 {{'mstep.custom' op 'f' has no results}}
  mstep.custom "f"(%x) : (tensor<4xf32>) -> ()
  return
}

// -----

func.func @custom_i32_attr(%x: tensor<4xf32>) {
  // expected-error @+1 {{'f': attribute 'mode' is 3 : i32; user attributes are i64, f64, bool, array<i64>, a string or an element type}}
  %0 = mstep.custom "f"(%x) {user_attrs = {mode = 3 : i32}} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @custom_bad_version(%x: tensor<4xf32>) {
  // expected-error @+1 {{'f': version is 0 : i64; it is an i64 of 1 or more}}
  %0 = mstep.custom "f"(%x) {version = 0 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}
