// StableHLO in: what mstep cannot import is an error at the op's line and
// column in the input, naming the op, and nothing is written. One module
// per file (split-file keeps the line numbers).
// RUN: split-file --leading-lines %s %t
// RUN: not mstep-opt --mstep-import-stablehlo %t/gather.mlir -o %t/out 2>&1 | FileCheck %s --check-prefix=GATHER
// RUN: not test -s %t/out
// RUN: not mstep-opt --mstep-import-stablehlo %t/custom_call.mlir 2>&1 | FileCheck %s --check-prefix=CUSTOM
// RUN: not mstep-opt --mstep-import-stablehlo %t/dynamic_arg.mlir 2>&1 | FileCheck %s --check-prefix=DYNARG
// RUN: not mstep-opt --mstep-import-stablehlo %t/dynamic_result.mlir 2>&1 | FileCheck %s --check-prefix=DYNRES
// RUN: not mstep-opt --mstep-import-stablehlo %t/element_type.mlir 2>&1 | FileCheck %s --check-prefix=ELEM
// RUN: not mstep-opt --mstep-import-stablehlo %t/wrong_result.mlir 2>&1 | FileCheck %s --check-prefix=RESULT
// RUN: not mstep-opt --mstep-import-stablehlo %t/dot_dims.mlir 2>&1 | FileCheck %s --check-prefix=DOT
// RUN: not mstep-opt --mstep-import-stablehlo %t/broadcast.mlir 2>&1 | FileCheck %s --check-prefix=BCAST
// RUN: not mstep-opt --mstep-import-stablehlo %t/reduce_body.mlir 2>&1 | FileCheck %s --check-prefix=REDUCE
// RUN: not mstep-opt --mstep-import-stablehlo %t/bool_add.mlir 2>&1 | FileCheck %s --check-prefix=BOOLADD
// RUN: not mstep-opt --mstep-import-stablehlo %t/concatenate.mlir 2>&1 | FileCheck %s --check-prefix=CONCAT
// RUN: not mstep-opt --mstep-import-stablehlo %t/missing_attr.mlir 2>&1 | FileCheck %s --check-prefix=ATTR
// RUN: not mstep-opt --mstep-import-stablehlo %t/other_dialect.mlir 2>&1 | FileCheck %s --check-prefix=OTHER
// The pretty form (as_text()): the same errors where an op has no hook.
// RUN: not mstep-opt --mstep-import-stablehlo %t/pretty.mlir 2>&1 | FileCheck %s --check-prefix=PRETTY
// RUN: not mstep-opt --mstep-import-stablehlo %t/pretty_custom_call.mlir 2>&1 | FileCheck %s --check-prefix=PRETTY_CUSTOM
// RUN: not mstep-opt --mstep-import-stablehlo %t/pretty_chlo.mlir 2>&1 | FileCheck %s --check-prefix=PRETTY_CHLO
// RUN: not mstep-opt --mstep-import-stablehlo %t/syntax.mlir 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not mstep-opt --mstep-import-stablehlo %t/no_main.mlir 2>&1 | FileCheck %s --check-prefix=NOMAIN
// RUN: not mstep-opt --mstep-import-stablehlo %t/recursive.mlir 2>&1 | FileCheck %s --check-prefix=RECURSIVE

//--- gather.mlir
"func.func"() <{function_type = (tensor<3x4xf32>, tensor<2x1xi32>) -> tensor<2x4xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<3x4xf32>, %i: tensor<2x1xi32>):
  // GATHER: gather.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.gather' is not supported by mstep's StableHLO import
  %0 = "stablehlo.gather"(%x, %i) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [0], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 1, 4>}> : (tensor<3x4xf32>, tensor<2x1xi32>) -> tensor<2x4xf32>
  "func.return"(%0) : (tensor<2x4xf32>) -> ()
}) : () -> ()

//--- custom_call.mlir
"func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<4xf32>):
  // CUSTOM: custom_call.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.custom_call': custom call 'Sharding' is not supported
  %0 = "stablehlo.custom_call"(%x) <{call_target_name = "Sharding"}> : (tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) : () -> ()

//--- dynamic_arg.mlir
// DYNARG: dynamic_arg.mlir:[[@LINE+1]]:1: error: StableHLO import: argument 0 of @main has type tensor<?x4xf32>, which is not statically shaped
"func.func"() <{function_type = (tensor<?x4xf32>) -> tensor<?x4xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<?x4xf32>):
  "func.return"(%x) : (tensor<?x4xf32>) -> ()
}) : () -> ()

//--- dynamic_result.mlir
"func.func"() <{function_type = (tensor<4xf32>) -> tensor<?xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<4xf32>):
  // DYNRES: dynamic_result.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.abs' result has type tensor<?xf32>, which is not statically shaped
  %0 = "stablehlo.abs"(%x) : (tensor<4xf32>) -> tensor<?xf32>
  "func.return"(%0) : (tensor<?xf32>) -> ()
}) : () -> ()

//--- element_type.mlir
"func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xui32>, sym_name = "main"}> ({
^bb0(%x: tensor<4xf32>):
  // ELEM: element_type.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.convert' result has element type ui32, which mstep has no dtype for
  %0 = "stablehlo.convert"(%x) : (tensor<4xf32>) -> tensor<4xui32>
  "func.return"(%0) : (tensor<4xui32>) -> ()
}) : () -> ()

//--- wrong_result.mlir
"func.func"() <{function_type = (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x2xf32>, sym_name = "main"}> ({
^bb0(%a: tensor<2x3xf32>, %b: tensor<2x3xf32>):
  // RESULT: wrong_result.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.add': its operands give a result of f32[2, 3] but it declares f32[3, 2]
  %0 = "stablehlo.add"(%a, %b) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<3x2xf32>
  "func.return"(%0) : (tensor<3x2xf32>) -> ()
}) : () -> ()

//--- dot_dims.mlir
"func.func"() <{function_type = (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>, sym_name = "main"}> ({
^bb0(%a: tensor<2x3xf32>, %b: tensor<4x5xf32>):
  // DOT: dot_dims.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.dot_general': contracting dims 1 and 0 differ in size
  %0 = "stablehlo.dot_general"(%a, %b) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<2x3xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  "func.return"(%0) : (tensor<2x5xf32>) -> ()
}) : () -> ()

//--- broadcast.mlir
"func.func"() <{function_type = (tensor<3xf32>) -> tensor<2x4xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<3xf32>):
  // BCAST: broadcast.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.broadcast_in_dim': operand dim 0 of size 3 cannot broadcast to result dim 1 of size 4
  %0 = "stablehlo.broadcast_in_dim"(%x) <{broadcast_dimensions = array<i64: 1>}> : (tensor<3xf32>) -> tensor<2x4xf32>
  "func.return"(%0) : (tensor<2x4xf32>) -> ()
}) : () -> ()

//--- reduce_body.mlir
"func.func"() <{function_type = (tensor<2x3xf32>) -> tensor<2xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<2x3xf32>):
  %one = "stablehlo.constant"() <{value = dense<1.0> : tensor<f32>}> : () -> tensor<f32>
  // REDUCE: reduce_body.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.reduce': with the body 'stablehlo.multiply' is not supported
  %0 = "stablehlo.reduce"(%x, %one) <{dimensions = array<i64: 1>}> ({
  ^bb0(%l: tensor<f32>, %r: tensor<f32>):
    %p = "stablehlo.multiply"(%l, %r) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    "stablehlo.return"(%p) : (tensor<f32>) -> ()
  }) : (tensor<2x3xf32>, tensor<f32>) -> tensor<2xf32>
  "func.return"(%0) : (tensor<2xf32>) -> ()
}) : () -> ()

//--- bool_add.mlir
"func.func"() <{function_type = (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>, sym_name = "main"}> ({
^bb0(%a: tensor<4xi1>, %b: tensor<4xi1>):
  // BOOLADD: bool_add.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.add': is imported for numeric operands only, got i1
  %0 = "stablehlo.add"(%a, %b) : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  "func.return"(%0) : (tensor<4xi1>) -> ()
}) : () -> ()

//--- concatenate.mlir
"func.func"() <{function_type = (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>, sym_name = "main"}> ({
^bb0(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>):
  // CONCAT: concatenate.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.concatenate': operand 1 is f32[3, 3]; the operands must have the result's type and sizes except in dimension 1
  %0 = "stablehlo.concatenate"(%a, %b) <{dimension = 1 : i64}> : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x6xf32>
  "func.return"(%0) : (tensor<2x6xf32>) -> ()
}) : () -> ()

//--- missing_attr.mlir
"func.func"() <{function_type = (tensor<2x3xf32>) -> tensor<3x2xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<2x3xf32>):
  // ATTR: missing_attr.mlir:[[@LINE+1]]:8: error: StableHLO import: 'stablehlo.transpose': has no i64 array attribute 'permutation'
  %0 = "stablehlo.transpose"(%x) : (tensor<2x3xf32>) -> tensor<3x2xf32>
  "func.return"(%0) : (tensor<3x2xf32>) -> ()
}) : () -> ()

//--- other_dialect.mlir
"func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<4xf32>):
  // OTHER: other_dialect.mlir:[[@LINE+1]]:8: error: StableHLO import: 'chlo.erf' is not supported by mstep's StableHLO import
  %0 = "chlo.erf"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) : () -> ()

//--- pretty.mlir
func.func @main(%x: tensor<3x4xf32>, %i: tensor<2x1xi32>) -> tensor<2x4xf32> {
  // PRETTY: pretty.mlir:[[@LINE+1]]:8: error: custom op 'stablehlo.gather' is not supported by mstep's StableHLO import
  %0 = stablehlo.gather %x, %i : (tensor<3x4xf32>, tensor<2x1xi32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

//--- pretty_custom_call.mlir
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // PRETTY_CUSTOM: pretty_custom_call.mlir:[[@LINE+1]]:8: error: custom op 'stablehlo.custom_call' calling 'Sharding' is not supported by mstep's StableHLO import
  %0 = stablehlo.custom_call @Sharding(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

//--- pretty_chlo.mlir
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  // PRETTY_CHLO: pretty_chlo.mlir:[[@LINE+1]]:8: error: Dialect `chlo' not found for custom op 'chlo.erf'
  %0 = chlo.erf %x : tensor<4xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

//--- syntax.mlir
"func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<4xf32>):
  // SYNTAX: syntax.mlir:[[@LINE+1]]:28: error: use of undeclared SSA value name
  %0 = "stablehlo.abs"(%x, %y) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) : () -> ()

//--- no_main.mlir
// NOMAIN: no_main.mlir: error: StableHLO import: the module has no func.func @main and not exactly one public function
"func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "helper", sym_visibility = "private"}> ({
^bb0(%x: tensor<4xf32>):
  "func.return"(%x) : (tensor<4xf32>) -> ()
}) : () -> ()

//--- recursive.mlir
"func.func"() <{function_type = (tensor<4xf32>) -> tensor<4xf32>, sym_name = "main"}> ({
^bb0(%x: tensor<4xf32>):
  // RECURSIVE: recursive.mlir:[[@LINE+1]]:8: error: StableHLO import: func.call to @main nests more than 64 calls deep
  %0 = "func.call"(%x) <{callee = @main}> : (tensor<4xf32>) -> tensor<4xf32>
  "func.return"(%0) : (tensor<4xf32>) -> ()
}) : () -> ()
