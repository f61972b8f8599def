// mstep.custom: a call of a user-registered op (mstep/runtime/CustomOp.h).
#ifndef MSTEP_IR_DIALECT_CUSTOMOPS_TD
#define MSTEP_IR_DIALECT_CUSTOMOPS_TD

include "mstep/ir/dialect/MstepBase.td"

def Mstep_CustomOp : Mstep_Op<"custom", [Pure]> {
  let summary = "a call of a user-registered op";
  let description = [{
    Calls the custom op `op_name` that the program registered with the
    runtime (a name, attribute names, a shape rule and one kernel per
    backend). The dialect knows nothing else about it: the result types are
    what the op's shape rule gave when the call was traced, and each backend
    runs the kernel registered for it under its own name. It is not
    fusible, so it is a fusion boundary; a kernel must be a pure function of
    its inputs and `user_attrs`, which makes the op `Pure`.

    `user_attrs` holds the call's attributes by name: i64 integers, f64
    floats (host constants), `array<i64: ...>` lists and element types.

    ```mlir
    %y = mstep.custom "scaled_softplus"(%x) {user_attrs = {beta = 2.0 : f64}}
        : (tensor<2x3xf32>) -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Variadic<Mstep_Tensor>:$inputs, StrAttr:$op_name,
                       DefaultValuedAttr<DictionaryAttr, "{}">:$user_attrs);
  let results = (outs Variadic<Mstep_Tensor>:$results);
  let assemblyFormat = [{
    $op_name `(` $inputs `)` attr-dict `:` functional-type($inputs, $results)
  }];
  let hasVerifier = 1;
}

#endif  // MSTEP_IR_DIALECT_CUSTOMOPS_TD
