"builtin.module"() ({
  "func.func"() <{function_type = (tensor<2x3xf32>, tensor<3x1xf32>, tensor<2x6xf32>, tensor<2x2xi64>, tensor<4xi32>, tensor<f32>, tensor<2x2xf32>, tensor<4x3xf32>, tensor<2x2xf32>) -> (), sym_name = "shapes"}> ({
  ^bb0(%arg0: tensor<2x3xf32>, %arg1: tensor<3x1xf32>, %arg2: tensor<2x6xf32>, %arg3: tensor<2x2xi64>, %arg4: tensor<4xi32>, %arg5: tensor<f32>, %arg6: tensor<2x2xf32>, %arg7: tensor<4x3xf32>, %arg8: tensor<2x2xf32>):
    %0 = "mstep.reshape"(%arg0) : (tensor<2x3xf32>) -> tensor<6xf32>
    %1 = "mstep.permute"(%arg0) <{perm = array<i64: 1, 0>}> : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %2 = "mstep.expand"(%arg1) : (tensor<3x1xf32>) -> tensor<2x3x4xf32>
    %3 = "mstep.slice"(%arg2) <{dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64}> : (tensor<2x6xf32>) -> tensor<2x2xf32>
    %4 = "mstep.cat"(%arg0, %arg2) <{dim = 1 : i64}> : (tensor<2x3xf32>, tensor<2x6xf32>) -> tensor<2x9xf32>
    %5 = "mstep.gather"(%arg0, %arg3) <{dim = 1 : i64}> : (tensor<2x3xf32>, tensor<2x2xi64>) -> tensor<2x2xf32>
    %6 = "mstep.index_select"(%arg0, %arg4) <{dim = 1 : i64}> : (tensor<2x3xf32>, tensor<4xi32>) -> tensor<2x4xf32>
    %7 = "mstep.pad"(%arg0, %arg5) <{pads = array<i64: 1, 2, 0, -1>}> : (tensor<2x3xf32>, tensor<f32>) -> tensor<1x6xf32>
    %8 = "mstep.triu"(%arg0) <{diagonal = 1 : i64}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %9 = "mstep.tril"(%arg0) <{diagonal = -1 : i64}> : (tensor<2x3xf32>) -> tensor<2x3xf32>
    %10 = "mstep.scatter_add"(%arg0, %arg3, %arg6) <{dim = 1 : i64}> : (tensor<2x3xf32>, tensor<2x2xi64>, tensor<2x2xf32>) -> tensor<2x3xf32>
    %11 = "mstep.index_add"(%arg7, %arg4, %arg7) <{dim = 0 : i64}> : (tensor<4x3xf32>, tensor<4xi32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %12 = "mstep.slice_scatter"(%arg2, %arg8) <{dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64}> : (tensor<2x6xf32>, tensor<2x2xf32>) -> tensor<2x6xf32>
    "func.return"() : () -> ()
  }) : () -> ()
}) : () -> ()

