// Enumerated modes of mstep ops. The integer values are the codes the trace
// graph stores in its int64 attributes (Attr.h), so import is a cast.
#ifndef MSTEP_IR_DIALECT_MSTEPENUMS_TD
#define MSTEP_IR_DIALECT_MSTEPENUMS_TD

include "mlir/IR/EnumAttr.td"
include "mstep/ir/dialect/MstepDialect.td"

class Mstep_I32Enum<string name, string summary, list<I32EnumAttrCase> cases>
    : I32EnumAttr<name, summary, cases> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::mstep::dialect";
}

// An enum stored as a dialect attribute, printed `#mstep.<mnemonic><case>`
// in attribute dictionaries and `<case>` inside an op's own syntax.
class Mstep_EnumAttr<EnumAttrInfo info, string mnemonic>
    : EnumAttr<Mstep_Dialect, info, mnemonic> {
  let assemblyFormat = "`<` $value `>`";
}

def Mstep_PaddingSide : Mstep_I32Enum<"PaddingSide",
    "where the padding of a sequence sits", [
      I32EnumAttrCase<"right", 0>,  // valid positions [0, len)
      I32EnumAttrCase<"left", 1>    // valid positions [S - len, S)
    ]>;
def Mstep_PaddingSideAttr : Mstep_EnumAttr<Mstep_PaddingSide, "padding_side">;

def Mstep_SoftmaxMode : Mstep_I32Enum<"SoftmaxMode",
    "FusedSDPA softmax_mode", [
      I32EnumAttrCase<"none", 0>,  // exact softmax
      I32EnumAttrCase<"fast", 1>   // reduced-precision fast softmax
    ]>;
def Mstep_SoftmaxModeAttr : Mstep_EnumAttr<Mstep_SoftmaxMode, "softmax_mode">;

def Mstep_LossReduction : Mstep_I32Enum<"LossReduction",
    "how a loss reduces its per-element values", [
      I32EnumAttrCase<"none", 0>,
      I32EnumAttrCase<"mean", 1>,
      I32EnumAttrCase<"sum", 2>
    ]>;
def Mstep_LossReductionAttr : Mstep_EnumAttr<Mstep_LossReduction, "reduction">;

def Mstep_ReduceOp : Mstep_I32Enum<"ReduceOp",
    "how a collective combines the ranks' tensors", [
      I32EnumAttrCase<"sum", 0>,
      I32EnumAttrCase<"mean", 1>,
      I32EnumAttrCase<"max", 2>,
      I32EnumAttrCase<"min", 3>
    ]>;
def Mstep_ReduceOpAttr : Mstep_EnumAttr<Mstep_ReduceOp, "reduce_op">;

def Mstep_GeluApproximation : Mstep_I32Enum<"GeluApproximation",
    "gelu's approximate argument", [
      I32EnumAttrCase<"none", 0>,  // x * Phi(x), with erf
      I32EnumAttrCase<"tanh", 1>
    ]>;
def Mstep_GeluApproximationAttr
    : Mstep_EnumAttr<Mstep_GeluApproximation, "gelu_approximation">;

def Mstep_OptimizerKind : Mstep_I32Enum<"OptimizerKind",
    "the update rule of a fused optimizer step", [
      I32EnumAttrCase<"sgd", 0>,
      I32EnumAttrCase<"adam", 1>,
      I32EnumAttrCase<"adamw", 2>,
      I32EnumAttrCase<"adadelta", 3>
    ]>;
def Mstep_OptimizerKindAttr : Mstep_EnumAttr<Mstep_OptimizerKind, "optimizer">;

#endif  // MSTEP_IR_DIALECT_MSTEPENUMS_TD
