// The mstep.custom verifier against the ops registered in the process,
// here by the test plugin (test/plugin/lit_custom_ops.cpp): the op must be
// registered under its name and version, the call must match its schema
// (input count and dtypes, attributes), and the result types must be what
// its shape rule gives (the rule's own message when it refuses).
// RUN: mstep-opt --load-plugin %custom_ops_plugin %s -split-input-file -verify-diagnostics

// Calls that match: defaults filled in (beta; giou_loss v2's fast).
func.func @custom_registered(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  %0 = mstep.custom "scaled_softplus"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
  %1:2 = mstep.custom "split_rows"(%x, %i) {user_attrs = {k = 1 : i64, dims = array<i64>, out = f32}} : (tensor<2x3xf32>, tensor<4xi64>) -> (tensor<1x3xf32>, tensor<1x3xf32>)
  %2 = mstep.custom "giou_loss"(%x, %x) {version = 2 : i64, user_attrs = {reduction = "sum"}} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<f32>
  return
}

// -----

func.func @custom_not_registered(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'nope' version 1 is not registered in this process; load the library that registers it (mstep-opt --load-plugin libmyops.so)}}
  %0 = mstep.custom "nope"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @custom_other_version(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'scaled_softplus' version 3 is not registered in this process (it has version 1)}}
  %0 = mstep.custom "scaled_softplus"(%x) {version = 3 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @custom_input_count(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'scaled_softplus' takes 1 inputs (x: f32|f64) {beta: float = 1} -> 1 output; this call has 2}}
  %0 = mstep.custom "scaled_softplus"(%x, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @custom_input_dtype(%x: tensor<4xi64>) {
  // expected-error @+1 {{custom op 'scaled_softplus': input 0 ('x') must be f32|f64, got i64}}
  %0 = mstep.custom "scaled_softplus"(%x) : (tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @custom_unknown_attr(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'scaled_softplus' has no attribute 'gamma'}}
  %0 = mstep.custom "scaled_softplus"(%x) {user_attrs = {gamma = 1.0 : f64}} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @custom_missing_attr(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{custom op 'split_rows' needs attribute 'k'}}
  %0:2 = mstep.custom "split_rows"(%x, %i) {user_attrs = {dims = array<i64>, out = f32}} : (tensor<2x3xf32>, tensor<4xi64>) -> (tensor<1x3xf32>, tensor<1x3xf32>)
  return
}

// -----

func.func @custom_attr_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'scaled_softplus': attribute 'beta' has type float; the value "fast" has type string}}
  %0 = mstep.custom "scaled_softplus"(%x) {user_attrs = {beta = "fast"}} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @custom_rule_refuses(%x: tensor<4xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{custom op 'split_rows' refuses inputs (f32[4], i64[4]): x must be 2-D, got [4]}}
  %0:2 = mstep.custom "split_rows"(%x, %i) {user_attrs = {k = 1 : i64, dims = array<i64>, out = f32}} : (tensor<4xf32>, tensor<4xi64>) -> (tensor<1x4xf32>, tensor<1x4xf32>)
  return
}

// -----

func.func @custom_result_type(%x: tensor<4xf32>) {
  // expected-error @+1 {{custom op 'scaled_softplus' gives results (f32[4]) for these inputs and attributes; the op has (f32[5])}}
  %0 = mstep.custom "scaled_softplus"(%x) : (tensor<4xf32>) -> tensor<5xf32>
  return
}

// -----

func.func @custom_result_count(%x: tensor<2x3xf32>, %i: tensor<4xi64>) {
  // expected-error @+1 {{custom op 'split_rows' gives results (f16[1, 3], f16[1, 3]) for these inputs and attributes; the op has (f16[1, 3])}}
  %0 = mstep.custom "split_rows"(%x, %i) {user_attrs = {k = 1 : i64, dims = array<i64>, out = f16}} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<1x3xf16>
  return
}
