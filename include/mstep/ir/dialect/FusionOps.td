// mstep.fusion: a region holding an elementwise DAG that a backend compiles
// to one kernel. fuse-elementwise builds it.
#ifndef MSTEP_IR_DIALECT_FUSIONOPS_TD
#define MSTEP_IR_DIALECT_FUSIONOPS_TD

include "mstep/ir/dialect/MstepBase.td"

def Mstep_FusionOp : Mstep_Op<"fusion", [IsolatedFromAbove, RecursiveMemoryEffects,
                                         SingleBlock]> {
  let summary = "an elementwise DAG compiled as one kernel";
  let description = [{
    The region's block arguments are the fusion inputs, in order and of the
    same types. The body holds only fusible ops (elementwise, `expand`,
    `cast`, `constant`, `full`) and ends with `mstep.yield`, whose operands
    are the fusion's results. A fusion may have several results: every value
    the DAG produces that is used outside it.

    ```mlir
    %r:2 = mstep.fusion ins(%a, %b : tensor<2x3xf32>, tensor<3xf32>)
        -> tensor<2x3xf32>, tensor<2x3xi1> {
    ^bb0(%x: tensor<2x3xf32>, %y: tensor<3xf32>):
      %s = mstep.add %x, %y : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
      %z = mstep.constant 0.000000e+00 : tensor<f32>
      %m = mstep.gt %s, %z : tensor<2x3xf32>, tensor<f32> -> tensor<2x3xi1>
      mstep.yield %s, %m : tensor<2x3xf32>, tensor<2x3xi1>
    }
    ```
  }];
  let arguments = (ins Variadic<Mstep_Tensor>:$inputs);
  let results = (outs Variadic<Mstep_Tensor>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `ins` `(` ($inputs^ `:` type($inputs))? `)` `->` type($results)
    attr-dict-with-keyword $body
  }];
  let hasRegionVerifier = 1;
}

def Mstep_YieldOp : Mstep_Op<"yield", [Pure, Terminator, HasParent<"FusionOp">]> {
  let summary = "the results of an mstep.fusion";
  let arguments = (ins Variadic<Mstep_Tensor>:$values);
  let assemblyFormat = "attr-dict ($values^ `:` type($values))?";
}

#endif  // MSTEP_IR_DIALECT_FUSIONOPS_TD
