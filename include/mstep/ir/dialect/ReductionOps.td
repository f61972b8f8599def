// Reductions. `dims` lists the reduced dims, sorted and non-negative (all
// of them spelled out for a full reduction); `keepdim` keeps them as 1.
#ifndef MSTEP_IR_DIALECT_REDUCTIONOPS_TD
#define MSTEP_IR_DIALECT_REDUCTIONOPS_TD

include "mstep/ir/dialect/MstepBase.td"

class Mstep_ReductionOp<string mnemonic, Type operandType, Type resultType,
                        string fn, list<Trait> traits = [],
                        dag extraArgs = (ins), string extraCheck = "">
    : Mstep_Op<mnemonic, !listconcat([Pure], traits)> {
  let summary = fn # " over dims";
  let arguments = !con((ins operandType:$input, DenseI64ArrayAttr:$dims,
                            BoolAttr:$keepdim), extraArgs);
  let results = (outs resultType:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  // `extraCheck` names a ReductionCheck: none, nonEmpty (no identity
  // element) or singleOrAll (argmax).
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return verifyReduction(getOperation(), getDims(), getKeepdim(),
                             ReductionCheck::}] # !if(!empty(extraCheck), "none",
                                                     extraCheck) # [{);
    }
  }];
}

def Mstep_SumOp : Mstep_ReductionOp<"sum", Mstep_Tensor, Mstep_Tensor, "sum",
                                    [SameOperandsAndResultElementType]> {
  let description = [{
    The trace graph sums integers and bools as i64 (a cast before the op).

    ```mlir
    %s = mstep.sum %x {dims = array<i64: 1>, keepdim = false} : tensor<2x3xf32> -> tensor<2xf32>
    ```
  }];
}
def Mstep_MeanOp : Mstep_ReductionOp<"mean", Mstep_FloatTensor, Mstep_FloatTensor,
                                     "mean", [SameOperandsAndResultElementType]>;
def Mstep_MaxOp : Mstep_ReductionOp<"max", Mstep_Tensor, Mstep_Tensor, "maximum",
                                    [SameOperandsAndResultElementType], (ins),
                                    "nonEmpty">;
def Mstep_MinOp : Mstep_ReductionOp<"min", Mstep_Tensor, Mstep_Tensor, "minimum",
                                    [SameOperandsAndResultElementType], (ins),
                                    "nonEmpty">;
def Mstep_ArgmaxOp : Mstep_ReductionOp<"argmax", Mstep_Tensor, Mstep_I64Tensor,
                                       "index of the maximum", [], (ins),
                                       "singleOrAll"> {
  let description = [{
    Over one dim, or over all dims (then the row-major flat index).
  }];
}
def Mstep_LogsumexpOp : Mstep_ReductionOp<"logsumexp", Mstep_FloatTensor,
                                          Mstep_FloatTensor, "log(sum(exp(x)))",
                                          [SameOperandsAndResultElementType]>;
def Mstep_VarOp : Mstep_ReductionOp<"var", Mstep_FloatTensor, Mstep_FloatTensor,
                                    "variance", [SameOperandsAndResultElementType],
                                    (ins Mstep_NonNegativeI64:$correction)> {
  let description = [{
    Divides by N - correction (1: unbiased, 0: population).
  }];
}

#endif  // MSTEP_IR_DIALECT_REDUCTIONOPS_TD
