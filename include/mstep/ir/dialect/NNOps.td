// Normalization, activation, dropout and loss ops.
#ifndef MSTEP_IR_DIALECT_NNOPS_TD
#define MSTEP_IR_DIALECT_NNOPS_TD

include "mstep/ir/dialect/MstepBase.td"

class Mstep_SoftmaxLikeOp<string mnemonic, string fn>
    : Mstep_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = fn # " along dim";
  let arguments = (ins Mstep_FloatTensor:$input, Mstep_NonNegativeI64:$dim);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}
def Mstep_SoftmaxOp : Mstep_SoftmaxLikeOp<"softmax", "softmax">;
def Mstep_LogSoftmaxOp : Mstep_SoftmaxLikeOp<"log_softmax", "log(softmax)">;

def Mstep_LayerNormOp : Mstep_Op<"layer_norm", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "layer normalization over the last normalized_ndim dims";
  let description = [{
    The optional weight and bias have the normalized (trailing) shape.

    ```mlir
    %y = mstep.layer_norm %x weight(%w : tensor<4xf32>) bias(%b : tensor<4xf32>) {eps = 1.000000e-05 : f64, normalized_ndim = 1 : i64} : tensor<2x4xf32>
    ```
  }];
  let arguments = (ins Mstep_FloatTensor:$input,
                       Optional<Mstep_FloatTensor>:$weight,
                       Optional<Mstep_FloatTensor>:$bias,
                       Mstep_PositiveI64:$normalized_ndim, F64Attr:$eps);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` `(` $weight^ `:` type($weight) `)`)?
    (`bias` `(` $bias^ `:` type($bias) `)`)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Mstep_RmsNormOp : Mstep_Op<"rms_norm", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "RMS normalization over the last normalized_ndim dims";
  let arguments = (ins Mstep_FloatTensor:$input,
                       Optional<Mstep_FloatTensor>:$weight,
                       Mstep_PositiveI64:$normalized_ndim, F64Attr:$eps);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`weight` `(` $weight^ `:` type($weight) `)`)? attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Mstep_DropoutOp : Mstep_Op<"dropout", [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "zero each element with probability p, scale the rest by 1/(1-p)";
  let description = [{
    Counter-based like `mstep.rand`: a pure function of the RNG state and
    `offset`.

    ```mlir
    %y = mstep.dropout %x, %rng {offset = 16 : i64, p = 1.000000e-01 : f64} : tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Mstep_FloatTensor:$input, Mstep_RngState:$rng_state,
                       F64Attr:$p, Mstep_NonNegativeI64:$offset);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = "$input `,` $rng_state attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Mstep_NllLossOp : Mstep_Op<"nll_loss", [Pure,
    AllElementTypesMatch<["log_probs", "result"]>]> {
  let summary = "negative log-likelihood of class indices";
  let description = [{
    log_probs [N, C] (or [C]), target i64 [N] (or 0-d). Targets equal to
    `ignore_index` count neither in the sum nor in the mean. The result is
    [N] for reduction none, else 0-d.

    ```mlir
    %l = mstep.nll_loss %lp, %t {ignore_index = -100 : i64, reduction = #mstep.reduction<mean>} : tensor<8x10xf32>, tensor<8xi64> -> tensor<f32>
    ```
  }];
  let arguments = (ins Mstep_FloatTensor:$log_probs, Mstep_I64Tensor:$target,
                       I64Attr:$ignore_index, Mstep_LossReductionAttr:$reduction);
  let results = (outs Mstep_FloatTensor:$result);
  let assemblyFormat = [{
    $log_probs `,` $target attr-dict `:` type($log_probs) `,` type($target) `->`
    type($result)
  }];
  let hasVerifier = 1;
}

#endif  // MSTEP_IR_DIALECT_NNOPS_TD
