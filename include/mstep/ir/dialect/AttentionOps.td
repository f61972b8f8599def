// Fused scaled dot-product attention with every option of Gaudi's
// FusedSDPA, and its backward. fuse-attention builds these from
// matmul -> scale -> mask -> softmax -> dropout -> matmul chains; the
// tracer records them directly for scaled_dot_product_attention().
#ifndef MSTEP_IR_DIALECT_ATTENTIONOPS_TD
#define MSTEP_IR_DIALECT_ATTENTIONOPS_TD

include "mstep/ir/dialect/MstepBase.td"

// The options the forward and the backward share.
defvar Mstep_SdpaOptions = (ins
    F64Attr:$scale,
    DefaultValuedAttr<F64Attr, "0.0">:$dropout_p,
    DefaultValuedAttr<BoolAttr, "false">:$is_causal,
    DefaultValuedAttr<Mstep_SoftmaxModeAttr,
                      "::mstep::dialect::SoftmaxMode::none">:$softmax_mode,
    DefaultValuedAttr<BoolAttr, "true">:$recompute_mode,
    DefaultValuedAttr<Mstep_PaddingSideAttr,
                      "::mstep::dialect::PaddingSide::right">:$padding_side,
    OptionalAttr<Mstep_NonNegativeI64>:$rng_offset);

def Mstep_SdpaOp : Mstep_Op<"sdpa", [Pure, AttrSizedOperandSegments,
                                     AttrSizedResultSegments]> {
  let summary = "fused scaled dot-product attention (FusedSDPA)";
  let description = [{
    softmax(query x key^T * scale + mask) x value, with dropout on the
    probabilities. query [..., L, E], key [..., S, E], value [..., S, Ev]
    with identical leading dims.

    Operands after the three inputs, each optional:
    - `mask`: i1 (true = attend) or query's element type (added to the
      scores), broadcastable to [..., L, S]; excludes `is_causal`.
    - `valid_seq_len`: integer [B]; keys (and query rows) past each batch
      row's length are padding, on the `padding_side` side.
    - `rng`: the RNG state, present exactly when dropout_p > 0, with
      `rng_offset` its position in the Philox stream.

    Results in FusedSDPA order: out [..., L, Ev], then `probs` (the
    probabilities after dropout, iff return_attn_probs), then
    `dropout_mask` (i1 [..., L, S], iff return_dropout_mask), then
    `saved_probs` (the probabilities before dropout, kept for the backward
    iff recompute_mode = false).

    ```mlir
    %o, %p = mstep.sdpa %q, %k, %v mask(%m : tensor<8x8xi1>) rng(%s)
        {dropout_p = 1.000000e-01 : f64, return_attn_probs = true,
         rng_offset = 0 : i64, scale = 1.250000e-01 : f64}
        : tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>
        -> tensor<2x4x8x64xf32> probs tensor<2x4x8x8xf32>
    ```
  }];
  let arguments = !con((ins
      Mstep_FloatTensor:$query, Mstep_FloatTensor:$key, Mstep_FloatTensor:$value,
      Optional<Mstep_Tensor>:$mask, Optional<Mstep_IntTensor>:$valid_seq_len,
      Optional<Mstep_RngState>:$rng_state),
      Mstep_SdpaOptions,
      (ins DefaultValuedAttr<BoolAttr, "false">:$return_attn_probs,
           DefaultValuedAttr<BoolAttr, "false">:$return_dropout_mask));
  let results = (outs Mstep_FloatTensor:$out,
                      Optional<Mstep_FloatTensor>:$attn_probs,
                      Optional<Mstep_BoolTensor>:$dropout_mask,
                      Optional<Mstep_FloatTensor>:$saved_probs);
  let assemblyFormat = [{
    $query `,` $key `,` $value
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`valid_seq_len` `(` $valid_seq_len^ `:` type($valid_seq_len) `)`)?
    (`rng` `(` $rng_state^ `)`)?
    attr-dict `:` type($query) `,` type($key) `,` type($value) `->` type($out)
    (`probs` type($attn_probs)^)?
    (`dropout_mask` type($dropout_mask)^)?
    (`saved_probs` type($saved_probs)^)?
  }];
  let hasVerifier = 1;
}

def Mstep_SdpaBackwardOp : Mstep_Op<"sdpa_backward", [Pure, AttrSizedOperandSegments,
    AllTypesMatch<["query", "grad_query"]>, AllTypesMatch<["key", "grad_key"]>,
    AllTypesMatch<["value", "grad_value"]>]> {
  let summary = "gradients of mstep.sdpa";
  let description = [{
    The trace graph's `sdpa_grad`.

    Takes the forward's inputs and options, the gradient of `out`, and
    `saved_probs` when the forward ran with recompute_mode = false (with
    recompute_mode = true it recomputes the probabilities, replaying the
    same dropout draws from `rng`). Returns the gradients of query, key
    and value (their types), then the gradient of a floating mask when
    asked for (`grad_mask`).

    ```mlir
    %dq, %dk, %dv = mstep.sdpa_backward %g, %q, %k, %v {is_causal = true, scale = 1.250000e-01 : f64}
        : tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>
    ```
  }];
  let arguments = !con((ins
      Mstep_FloatTensor:$grad_out,
      Mstep_FloatTensor:$query, Mstep_FloatTensor:$key, Mstep_FloatTensor:$value,
      Optional<Mstep_Tensor>:$mask, Optional<Mstep_IntTensor>:$valid_seq_len,
      Optional<Mstep_RngState>:$rng_state,
      Optional<Mstep_FloatTensor>:$saved_probs),
      Mstep_SdpaOptions);
  let results = (outs Mstep_FloatTensor:$grad_query, Mstep_FloatTensor:$grad_key,
                      Mstep_FloatTensor:$grad_value,
                      Optional<Mstep_FloatTensor>:$grad_mask);
  let assemblyFormat = [{
    $grad_out `,` $query `,` $key `,` $value
    (`mask` `(` $mask^ `:` type($mask) `)`)?
    (`valid_seq_len` `(` $valid_seq_len^ `:` type($valid_seq_len) `)`)?
    (`rng` `(` $rng_state^ `)`)?
    (`saved_probs` `(` $saved_probs^ `:` type($saved_probs) `)`)?
    attr-dict `:` type($grad_out) `,` type($query) `,` type($key) `,` type($value)
    (`->` `grad_mask` type($grad_mask)^)?
  }];
  let hasVerifier = 1;
}

#endif  // MSTEP_IR_DIALECT_ATTENTIONOPS_TD
