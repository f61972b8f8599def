// mstep.multi_tensor_update: one fused optimizer step over every parameter.
// fuse-optimizer builds it from the per-parameter update chains that
// lib/api/optim records (and an optional clip_grad_norm_ before them).
#ifndef MSTEP_IR_DIALECT_OPTIMIZEROPS_TD
#define MSTEP_IR_DIALECT_OPTIMIZEROPS_TD

include "mstep/ir/dialect/MstepBase.td"

def Mstep_MultiTensorUpdateOp : Mstep_Op<"multi_tensor_update",
    [Pure, AttrSizedOperandSegments, AttrSizedResultSegments]> {
  let summary = "fused SGD / Adam / AdamW / Adadelta step, optionally clipped";
  let description = [{
    PyTorch 1.13's update rules (see lib/api/optim) applied to n
    parameters at once.

    Operands:
    - `params`, `grads`: n each, grads[i] of params[i]'s type.
    - `states`: the optimizer state, slot-major (slot s of parameter i is
      states[s * n + i]), each of its parameter's type. Slots per kind:
      sgd: momentum_buffer if `momentum` is given, else none;
      adam, adamw: exp_avg, exp_avg_sq, then max_exp_avg_sq if amsgrad;
      adadelta: square_avg, acc_delta.
    - `steps`: one 0-d i64 counter per parameter, advanced by one, for
      the rules that count steps (adam, adamw, adadelta, sgd with
      momentum); absent otherwise.
    - hyperparameters: 0-d f64 device scalars, so changing one never
      recompiles. `lr` always; sgd: optional `momentum`, `dampening`
      (only with momentum); adam, adamw: `beta1`, `beta2`, `eps`;
      adadelta: `rho`, `eps`; any kind: optional `weight_decay`. An absent
      optional hyperparameter is zero, and its ops are not in the graph,
      as PyTorch skips them.

    Flags: `nesterov` (sgd, needs momentum and no dampening), `amsgrad`
    (adam, adamw), `maximize` (any kind: ascend instead of descend).

    Clipping: with `max_grad_norm`, the gradients are first scaled by
    min(max_grad_norm / (total + 1e-6), 1), where total is the
    `grad_norm_type`-norm of all gradients (torch.nn.utils.clip_grad_norm_),
    and total is returned as the last result `total_grad_norm`. The
    clipped gradients are results too (`clipped_grads`, n of them, each of
    its grad's type) when something else reads them: clip_grad_norm_
    rescales the `.grad` tensors in place, and a training step that keeps
    them alive returns them from the graph. Without `clipped_grads` they
    exist only inside the kernel.

    Derived scalars: the update rules consume values computed from the
    hyperparameters and step counters (1 - beta1, 1 - lr * weight_decay,
    lr / (1 - beta1^t), sqrt(1 - beta2^t), ...), each in f64 and then cast
    to the parameter's dtype, exactly as lib/api/optim records them. The
    op takes the f64 inputs and recomputes those values in the same order,
    so a kernel reproduces the unfused graph bit for bit.

    Results: the updated params, states and steps, in operand order, each
    of its operand's type; the function marks the corresponding arguments
    donated, so plan-memory updates them in place. Then the optional
    `clipped_grads` and `total_grad_norm`.

    ```mlir
    %p:2, %s:4, %t:2 = mstep.multi_tensor_update <adam>
        params(%w, %b : tensor<4x3xf32>, tensor<4xf32>)
        grads(%gw, %gb : tensor<4x3xf32>, tensor<4xf32>)
        states(%m0, %m1, %v0, %v1 : tensor<4x3xf32>, tensor<4xf32>, tensor<4x3xf32>, tensor<4xf32>)
        steps(%t0, %t1) lr(%lr) beta1(%b1) beta2(%b2) eps(%eps)
    ```
  }];
  let arguments = (ins
      Mstep_OptimizerKindAttr:$kind,
      Variadic<Mstep_FloatTensor>:$params,
      Variadic<Mstep_FloatTensor>:$grads,
      Variadic<Mstep_FloatTensor>:$states,
      Variadic<Mstep_StepCounter>:$steps,
      Mstep_F64Scalar:$lr,
      Optional<Mstep_F64Scalar>:$momentum,
      Optional<Mstep_F64Scalar>:$dampening,
      Optional<Mstep_F64Scalar>:$beta1,
      Optional<Mstep_F64Scalar>:$beta2,
      Optional<Mstep_F64Scalar>:$rho,
      Optional<Mstep_F64Scalar>:$eps,
      Optional<Mstep_F64Scalar>:$weight_decay,
      DefaultValuedAttr<BoolAttr, "false">:$nesterov,
      DefaultValuedAttr<BoolAttr, "false">:$amsgrad,
      DefaultValuedAttr<BoolAttr, "false">:$maximize,
      OptionalAttr<F64Attr>:$max_grad_norm,
      DefaultValuedAttr<F64Attr, "2.0">:$grad_norm_type);
  let results = (outs Variadic<Mstep_FloatTensor>:$new_params,
                      Variadic<Mstep_FloatTensor>:$new_states,
                      Variadic<Mstep_StepCounter>:$new_steps,
                      Variadic<Mstep_FloatTensor>:$clipped_grads,
                      Optional<Mstep_FloatScalar>:$total_grad_norm);
  let assemblyFormat = [{
    $kind
    `params` `(` $params `:` custom<UpdatedTypes>(type($params), type($new_params)) `)`
    `grads` `(` $grads `:` type($grads) `)`
    (`states` `(` $states^ `:` custom<UpdatedTypes>(type($states), type($new_states)) `)`)?
    (`steps` `(` custom<StepCounters>($steps, type($new_steps))^ `)`)?
    `lr` `(` $lr `)`
    (`momentum` `(` $momentum^ `)`)?
    (`dampening` `(` $dampening^ `)`)?
    (`beta1` `(` $beta1^ `)`)?
    (`beta2` `(` $beta2^ `)`)?
    (`rho` `(` $rho^ `)`)?
    (`eps` `(` $eps^ `)`)?
    (`weight_decay` `(` $weight_decay^ `)`)?
    attr-dict
    (`->` `total_grad_norm` type($total_grad_norm)^)?
    (`clipped_grads` `(` type($clipped_grads)^ `)`)?
  }];
  let hasVerifier = 1;
}

#endif  // MSTEP_IR_DIALECT_OPTIMIZEROPS_TD
