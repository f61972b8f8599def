// Inputs the fuzzer (test/fuzz) found crashing or misjudged by the mstep
// verifiers: each must now be rejected with a located diagnostic (or, for
// the last cases, verify). Most are sizes whose arithmetic overflowed int64
// (undefined behaviour; a wrapped sum could accept a wrong shape).
// RUN: mstep-opt %s -split-input-file -verify-diagnostics

func.func @reshape_element_count_overflow(%x: tensor<4611686018427387904x4xf32>) {
  // expected-error @+1 {{'mstep.reshape' op the element count of 'tensor<4611686018427387904x4xf32>' overflows int64}}
  %0 = mstep.reshape %x : tensor<4611686018427387904x4xf32> -> tensor<2xf32>
  return
}

// -----

func.func @pad_overflow(%x: tensor<2x3xf32>, %v: tensor<f32>) {
  // expected-error @+1 {{'mstep.pad' op pads [9223372036854775807, 9223372036854775807] overflow int64 in dim 1 (size 3)}}
  %0 = mstep.pad %x, %v {pads = array<i64: 9223372036854775807, 9223372036854775807>} : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
  return
}

// -----

func.func @cat_overflow(%x: tensor<2x9223372036854775807xf32>) {
  // expected-error @+1 {{'mstep.cat' op the inputs' sizes in dim 1 add up to more than int64 holds (at input #1 'tensor<2x9223372036854775807xf32>')}}
  %0 = mstep.cat %x, %x {dim = 1 : i64} : tensor<2x9223372036854775807xf32>, tensor<2x9223372036854775807xf32> -> tensor<2x3xf32>
  return
}

// -----

func.func @conv_window_overflow(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'mstep.conv2d' op the window arithmetic of kernel 3x3 (stride [1, 1], padding [9223372036854775807, 0], dilation [1, 1]) on input [1, 3, 8, 8] overflows int64}}
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 9223372036854775807, 0>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @conv_dilation_overflow(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'mstep.conv2d_weight_grad' op the window arithmetic of kernel 3x3 (stride [1, 1], padding [0, 0], dilation [1, 4611686018427387904]) on input [1, 3, 8, 8] overflows int64}}
  %0 = mstep.conv2d_weight_grad %x, %x {dilation = array<i64: 1, 4611686018427387904>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<1x3x8x8xf32> -> tensor<4x3x3x3xf32>
  return
}

// -----

func.func @conv_groups_overflow(%x: tensor<1x0x8x8xf32>, %w: tensor<0x4x3x3xf32>) {
  // expected-error @+1 {{'mstep.conv2d' op weight [0, 4, 3, 3] expects more than 2^63 input channels (dim 1 x groups = 4611686018427387904) but the input [1, 0, 8, 8] has 0}}
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 4611686018427387904 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x0x8x8xf32>, tensor<0x4x3x3xf32> -> tensor<1x0x6x6xf32>
  return
}

// -----

func.func @conv_empty_kernel(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x0x3xf32>) {
  // expected-error @+1 {{'mstep.conv2d' op weight [4, 3, 0, 3] has an empty kernel; its spatial dims must be >= 1}}
  %0 = mstep.conv2d %x, %w {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 0, 0>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x0x3xf32> -> tensor<1x4x9x6xf32>
  return
}

// -----

func.func @pool_window_overflow(%x: tensor<1x2x9223372036854775807x6xf32>) {
  // expected-error @+1 {{'mstep.avg_pool2d' op the window arithmetic of kernel [2, 2] (stride [9223372036854775807, 2], padding [1, 0], dilation [1, 1]) on input [1, 2, 9223372036854775807, 6] overflows int64}}
  %0 = mstep.avg_pool2d %x {ceil_mode = true, count_include_pad = false, kernel = array<i64: 2, 2>, padding = array<i64: 1, 0>, stride = array<i64: 9223372036854775807, 2>} : tensor<1x2x9223372036854775807x6xf32> -> tensor<1x2x3x3xf32>
  return
}

// -----

func.func @constant_i64_infinite() {
  // expected-error @+1 {{'mstep.constant' op value inf does not fit in 'i64'}}
  %0 = mstep.constant 0x7FF0000000000000 : tensor<i64>
  return
}

// -----

func.func @constant_i64_two_to_the_63() {
  // expected-error @+1 {{'mstep.constant' op value 9.22337e+18 does not fit in 'i64'}}
  %0 = mstep.constant 9.2233720368547758E+18 : tensor<i64>
  return
}

// -----

func.func @gather_huge_index(%x: tensor<2x3xf32>, %i: tensor<4611686018427387904x4xi64>) {
  // expected-error @+1 {{'mstep.gather' op index 'tensor<4611686018427387904x4xi64>' exceeds input 'tensor<2x3xf32>' in dim 1 (only dim 0 may be larger)}}
  %0 = mstep.gather %x, %i {dim = 0 : i64} : tensor<2x3xf32>, tensor<4611686018427387904x4xi64> -> tensor<2x3xf32>
  return
}

// -----

// Large sizes whose arithmetic fits in int64 still verify.
func.func @huge_sizes_verify(%x: tensor<2305843009213693952x2xf32>, %y: tensor<1x2x4611686018427387904x6xf32>, %v: tensor<f32>) {
  %0 = mstep.reshape %x : tensor<2305843009213693952x2xf32> -> tensor<2x2305843009213693952xf32>
  %1 = mstep.pad %x, %v {pads = array<i64: 9223372036854775805, -9223372036854775805>} : tensor<2305843009213693952x2xf32>, tensor<f32> -> tensor<2305843009213693952x2xf32>
  %2 = mstep.max_pool2d %y {ceil_mode = true, dilation = array<i64: 1, 1>, kernel = array<i64: 2, 2>, padding = array<i64: 1, 0>, stride = array<i64: 4611686018427387904, 2>} : tensor<1x2x4611686018427387904x6xf32> -> tensor<1x2x2x3xf32>
  %3 = mstep.constant -9.2233720368547758E+18 : tensor<i64>
  return
}

// -----

// A zero dim makes the element count 0 even when the other dims overflow.
func.func @zero_dim_reshape(%x: tensor<4611686018427387904x4x0xf32>) {
  %0 = mstep.reshape %x : tensor<4611686018427387904x4x0xf32> -> tensor<0xf32>
  return
}
