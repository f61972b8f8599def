// Shape and data-movement ops. Target shapes live in the result type; all
// dims are non-negative (normalized by the tracer).
#ifndef MSTEP_IR_DIALECT_SHAPEOPS_TD
#define MSTEP_IR_DIALECT_SHAPEOPS_TD

include "mstep/ir/dialect/MstepBase.td"

// One input, a result of the same element type, `in : T -> U` syntax.
class Mstep_ShapeOp<string mnemonic, list<Trait> traits = []>
    : Mstep_Op<mnemonic, !listconcat([Pure, SameOperandsAndResultElementType],
                                     traits)> {
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mstep_ReshapeOp : Mstep_ShapeOp<"reshape"> {
  let summary = "same elements, row-major, in the result's shape";
  let description = [{
    ```mlir
    %y = mstep.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input);
  let hasFolder = 1;
}

def Mstep_PermuteOp : Mstep_ShapeOp<"permute"> {
  let summary = "dims reordered: result dim i is input dim perm[i]";
  let description = [{
    ```mlir
    %y = mstep.permute %x {perm = array<i64: 1, 0>} : tensor<2x3xf32> -> tensor<3x2xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input, DenseI64ArrayAttr:$perm);
  let hasFolder = 1;
}

def Mstep_ExpandOp : Mstep_ShapeOp<"expand", [Mstep_Fusible]> {
  let summary = "broadcast to the result's shape";
  let description = [{
    New dims go in front; only size-1 dims grow.

    ```mlir
    %y = mstep.expand %x : tensor<3x1xf32> -> tensor<2x3x4xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input);
  let hasFolder = 1;
}

def Mstep_SliceOp : Mstep_ShapeOp<"slice"> {
  let summary = "input[start:end:step] along dim";
  let description = [{
    0 <= start <= end <= size and step >= 1 (normalized by the tracer).

    ```mlir
    %y = mstep.slice %x {dim = 1 : i64, end = 5 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x6xf32> -> tensor<2x2xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input, Mstep_NonNegativeI64:$dim,
                       Mstep_NonNegativeI64:$start, Mstep_NonNegativeI64:$end,
                       Mstep_PositiveI64:$step);
}

def Mstep_CatOp : Mstep_Op<"cat", [Pure, SameOperandsAndResultElementType]> {
  let summary = "concatenation along dim";
  let description = [{
    ```mlir
    %y = mstep.cat %a, %b {dim = 0 : i64} : tensor<2x3xf32>, tensor<1x3xf32> -> tensor<3x3xf32>
    ```
  }];
  let arguments = (ins Variadic<Mstep_Tensor>:$inputs, Mstep_NonNegativeI64:$dim);
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = "$inputs attr-dict `:` type($inputs) `->` type($result)";
  let hasVerifier = 1;
}

// input, index; `in, idx : T, I -> U` syntax.
class Mstep_IndexOp<string mnemonic, string fn>
    : Mstep_Op<mnemonic, [Pure, AllElementTypesMatch<["input", "result"]>]> {
  let summary = fn;
  let arguments = (ins Mstep_Tensor:$input, Mstep_IntTensor:$index,
                       Mstep_NonNegativeI64:$dim);
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $index attr-dict `:` type($input) `,` type($index) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Mstep_GatherOp : Mstep_IndexOp<"gather",
    "torch.gather: result[i][j] = input[index[i][j]][j] (dim 0)"> {
  let description = [{
    The index has the input's rank; the result has the index's shape.
  }];
}
def Mstep_IndexSelectOp : Mstep_IndexOp<"index_select",
    "the slices of input at the 1-D index along dim">;

def Mstep_PadOp : Mstep_ShapeOp<"pad"> {
  let summary = "constant padding (negative pads crop)";
  let description = [{
    `pads` is torch order: (before, after) pairs, last dim first. The value
    is a 0-d tensor of the input's element type.

    ```mlir
    %y = mstep.pad %x, %v {pads = array<i64: 1, 2>} : tensor<2x3xf32>, tensor<f32> -> tensor<2x6xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input, Mstep_Scalar:$value,
                       DenseI64ArrayAttr:$pads);
  let assemblyFormat = [{
    $input `,` $value attr-dict `:` type($input) `,` type($value) `->` type($result)
  }];
}

class Mstep_TriangleOp<string mnemonic, string part>
    : Mstep_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = part # " triangle of the last two dims, the rest zeroed";
  let arguments = (ins Mstep_Tensor:$input, I64Attr:$diagonal);
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}
def Mstep_TriuOp : Mstep_TriangleOp<"triu", "upper">;
def Mstep_TrilOp : Mstep_TriangleOp<"tril", "lower">;

def Mstep_ScatterAddOp : Mstep_Op<"scatter_add", [Pure,
    AllTypesMatch<["input", "result"]>, AllElementTypesMatch<["input", "src"]>]> {
  let summary = "torch.scatter_add: input[index[i][j]][j] += src[i][j] (dim 0)";
  let arguments = (ins Mstep_Tensor:$input, Mstep_IntTensor:$index,
                       Mstep_Tensor:$src, Mstep_NonNegativeI64:$dim);
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $index `,` $src attr-dict `:` type($input) `,` type($index) `,` type($src)
  }];
  let hasVerifier = 1;
}

def Mstep_IndexAddOp : Mstep_Op<"index_add", [Pure,
    AllTypesMatch<["input", "result"]>, AllElementTypesMatch<["input", "source"]>]> {
  let summary = "torch.index_add: input.index_select(dim, index) += source";
  let arguments = (ins Mstep_Tensor:$input, Mstep_IntTensor:$index,
                       Mstep_Tensor:$source, Mstep_NonNegativeI64:$dim);
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $index `,` $source attr-dict `:` type($input) `,` type($index) `,`
    type($source)
  }];
  let hasVerifier = 1;
}

def Mstep_SliceScatterOp : Mstep_Op<"slice_scatter", [Pure,
    AllTypesMatch<["input", "result"]>, AllElementTypesMatch<["input", "src"]>]> {
  let summary = "input with input[start:end:step] along dim replaced by src";
  let arguments = (ins Mstep_Tensor:$input, Mstep_Tensor:$src,
                       Mstep_NonNegativeI64:$dim, Mstep_NonNegativeI64:$start,
                       Mstep_NonNegativeI64:$end, Mstep_PositiveI64:$step);
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = [{
    $input `,` $src attr-dict `:` type($input) `,` type($src)
  }];
  let hasVerifier = 1;
}

#endif  // MSTEP_IR_DIALECT_SHAPEOPS_TD
