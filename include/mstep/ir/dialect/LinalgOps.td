// Linear algebra, convolution and pooling, with their gradients. Image
// tensors are NCHW and always batched (the tracer adds N = 1).
#ifndef MSTEP_IR_DIALECT_LINALGOPS_TD
#define MSTEP_IR_DIALECT_LINALGOPS_TD

include "mstep/ir/dialect/MstepBase.td"

def Mstep_MatmulOp : Mstep_Op<"matmul", [Pure, SameOperandsAndResultElementType]> {
  let summary = "batched matrix product with broadcast batch dims";
  let description = [{
    lhs [..., n, k] x rhs [..., k, p] -> [broadcast(...), n, p]; both of
    rank >= 2 (the tracer reshapes vectors).

    ```mlir
    %c = mstep.matmul %a, %b : tensor<4x2x3xf32>, tensor<3x5xf32> -> tensor<4x2x5xf32>
    ```
  }];
  let arguments = (ins Mstep_NumericTensor:$lhs, Mstep_NumericTensor:$rhs);
  let results = (outs Mstep_NumericTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Mstep_Conv2dOp : Mstep_Op<"conv2d", [Pure, SameOperandsAndResultElementType]> {
  let summary = "2-D convolution (cross-correlation), NCHW";
  let description = [{
    input [N, C, H, W], weight [O, C / groups, kH, kW], optional bias [O].

    ```mlir
    %y = mstep.conv2d %x, %w, %b {dilation = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1>, stride = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32> -> tensor<1x4x8x8xf32>
    ```
  }];
  let arguments = (ins Mstep_FloatTensor:$input, Mstep_FloatTensor:$weight,
                       Optional<Mstep_FloatTensor>:$bias,
                       Mstep_PositivePair:$stride, Mstep_NonNegativePair:$padding,
                       Mstep_PositivePair:$dilation, Mstep_PositiveI64:$groups);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight (`,` $bias^)? attr-dict `:` type($input) `,` type($weight)
    (`,` type($bias)^)? `->` type($result)
  }];
  let hasVerifier = 1;
}

def Mstep_MaxPool2dOp : Mstep_Op<"max_pool2d", [Pure, SameOperandsAndResultElementType]> {
  let summary = "2-D max pooling, NCHW";
  let arguments = (ins Mstep_NumericTensor:$input, Mstep_PositivePair:$kernel,
                       Mstep_PositivePair:$stride, Mstep_NonNegativePair:$padding,
                       Mstep_PositivePair:$dilation, BoolAttr:$ceil_mode);
  let results = (outs Mstep_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mstep_AvgPool2dOp : Mstep_Op<"avg_pool2d", [Pure, SameOperandsAndResultElementType]> {
  let summary = "2-D average pooling, NCHW";
  let arguments = (ins Mstep_FloatTensor:$input, Mstep_PositivePair:$kernel,
                       Mstep_PositivePair:$stride, Mstep_NonNegativePair:$padding,
                       BoolAttr:$ceil_mode, BoolAttr:$count_include_pad);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Mstep_Conv2dInputGradOp : Mstep_Op<"conv2d_input_grad",
    [Pure, SameOperandsAndResultElementType]> {
  let summary = "gradient of conv2d with respect to its input";
  let description = [{
    The result type is the forward input's type.
  }];
  let arguments = (ins Mstep_FloatTensor:$grad_output, Mstep_FloatTensor:$weight,
                       Mstep_PositivePair:$stride, Mstep_NonNegativePair:$padding,
                       Mstep_PositivePair:$dilation, Mstep_PositiveI64:$groups);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $weight attr-dict `:` type($grad_output) `,` type($weight) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Mstep_Conv2dWeightGradOp : Mstep_Op<"conv2d_weight_grad",
    [Pure, SameOperandsAndResultElementType]> {
  let summary = "gradient of conv2d with respect to its weight";
  let description = [{
    The result type is the weight's type.
  }];
  let arguments = (ins Mstep_FloatTensor:$input, Mstep_FloatTensor:$grad_output,
                       Mstep_PositivePair:$stride, Mstep_NonNegativePair:$padding,
                       Mstep_PositivePair:$dilation, Mstep_PositiveI64:$groups);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad_output attr-dict `:` type($input) `,` type($grad_output) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

def Mstep_MaxPool2dGradOp : Mstep_Op<"max_pool2d_grad",
    [Pure, SameOperandsAndResultElementType, AllTypesMatch<["input", "result"]>]> {
  let summary = "gradient of max_pool2d: grad_output routed to each window's max";
  let arguments = (ins Mstep_FloatTensor:$grad_output, Mstep_FloatTensor:$input,
                       Mstep_PositivePair:$kernel, Mstep_PositivePair:$stride,
                       Mstep_NonNegativePair:$padding, Mstep_PositivePair:$dilation,
                       BoolAttr:$ceil_mode);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = [{
    $grad_output `,` $input attr-dict `:` type($grad_output) `,` type($input)
  }];
  let hasVerifier = 1;
}

def Mstep_AvgPool2dGradOp : Mstep_Op<"avg_pool2d_grad",
    [Pure, SameOperandsAndResultElementType]> {
  let summary = "gradient of avg_pool2d";
  let description = [{
    The result type is the forward input's type.
  }];
  let arguments = (ins Mstep_FloatTensor:$grad_output, Mstep_PositivePair:$kernel,
                       Mstep_PositivePair:$stride, Mstep_NonNegativePair:$padding,
                       BoolAttr:$ceil_mode, BoolAttr:$count_include_pad);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = "$grad_output attr-dict `:` type($grad_output) `->` type($result)";
  let hasVerifier = 1;
}

#endif  // MSTEP_IR_DIALECT_LINALGOPS_TD
