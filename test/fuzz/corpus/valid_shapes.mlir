func.func @shapes(%x: tensor<2x3xf32>, %c: tensor<3x1xf32>, %w: tensor<2x6xf32>, %idx: tensor<2x2xi64>, %sel: tensor<4xi32>, %v: tensor<f32>, %src: tensor<2x2xf32>, %rows: tensor<4x3xf32>, %part: tensor<2x2xf32>) {
  %0 = mstep.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %1 = mstep.permute %x {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
  %2 = mstep.expand %c : tensor<3x1xf32> -> tensor<2x3x4xf32>
  %3 = mstep.slice %w {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>
  %4 = mstep.cat %x, %w {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x6xf32> -> tensor<2x9xf32>
  %5 = mstep.gather %x, %idx {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x2xi64> -> tensor<2x2xf32>
  %6 = mstep.index_select %x, %sel {dim = 1 : i64} : tensor<2x3xf32>, tensor<4xi32> -> tensor<2x4xf32>
  %7 = mstep.pad %x, %v {pads = array<i64: 1, 2, 0, -1>} : tensor<2x3xf32>, tensor<f32> -> tensor<1x6xf32>
  %8 = mstep.triu %x {diagonal = 1 : i64} : tensor<2x3xf32>
  %9 = mstep.tril %x {diagonal = -1 : i64} : tensor<2x3xf32>
  %10 = mstep.scatter_add %x, %idx, %src {dim = 1 : i64} : tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>
  %11 = mstep.index_add %rows, %sel, %rows {dim = 0 : i64} : tensor<4x3xf32>, tensor<4xi32>, tensor<4x3xf32>
  %12 = mstep.slice_scatter %w, %part {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6xf32>, tensor<2x2xf32>
  return
}
