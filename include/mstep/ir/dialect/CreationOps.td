// Creation ops: host constants, fills, ranges and random draws.
#ifndef MSTEP_IR_DIALECT_CREATIONOPS_TD
#define MSTEP_IR_DIALECT_CREATIONOPS_TD

include "mstep/ir/dialect/MstepBase.td"

def Mstep_ConstantOp : Mstep_Op<"constant",
    [Pure, ConstantLike, Mstep_Fusible]> {
  let summary = "0-d host constant";
  let description = [{
    A scalar baked into the compiled graph. The value is a double, as in
    the trace graph, and is converted to the result's element type; it
    must be integral for integer types and 0 or 1 for i1. A value that
    changes every step belongs in a function argument instead.

    ```mlir
    %c = mstep.constant 2.500000e+00 : tensor<f32>
    ```
  }];
  let arguments = (ins F64Attr:$value);
  let results = (outs Mstep_Scalar:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
  let hasFolder = 1;
  let hasVerifier = 1;
}

def Mstep_FullOp : Mstep_Op<"full", [Pure, Mstep_Fusible,
    AllElementTypesMatch<["value", "result"]>]> {
  let summary = "tensor filled with a 0-d value";
  let description = [{
    ```mlir
    %t = mstep.full %v : tensor<f32> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Mstep_Scalar:$value);
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($value) `->` type($result)";
}

def Mstep_ArangeOp : Mstep_Op<"arange", [Pure]> {
  let summary = "1-D range start, start + step, ...";
  let description = [{
    The result's length fixes the end. `start` and `step` are host
    constants.

    ```mlir
    %r = mstep.arange {start = 0.000000e+00 : f64, step = 1.000000e+00 : f64} : tensor<5xi64>
    ```
  }];
  let arguments = (ins F64Attr:$start, F64Attr:$step);
  let results = (outs Mstep_NumericTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class Mstep_RandomOp<string mnemonic, string distribution>
    : Mstep_Op<mnemonic, [Pure]> {
  let summary = "tensor of " # distribution # " Philox draws";
  let description = [{
    Counter-based: the result is a pure function of the RNG state and
    `offset`, the op's position in the step's Philox stream.

    ```mlir
    %r = mstep.}] # mnemonic # [{ %rng {offset = 0 : i64} : tensor<3x4xf32>
    ```
  }];
  let arguments = (ins Mstep_RngState:$rng_state, Mstep_NonNegativeI64:$offset);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = "$rng_state attr-dict `:` type($result)";
}

def Mstep_RandOp : Mstep_RandomOp<"rand", "uniform [0, 1)">;
def Mstep_RandnOp : Mstep_RandomOp<"randn", "standard normal">;

#endif  // MSTEP_IR_DIALECT_CREATIONOPS_TD
