// Elementwise ops. Unary ops keep the shape. Binary and ternary ops take
// broadcast-compatible operands (numpy rules, trailing dims equal or 1) of
// one element type and produce the broadcast shape; type promotion is done
// by explicit `mstep.cast` ops before them, as in the trace graph.
#ifndef MSTEP_IR_DIALECT_ELEMENTWISEOPS_TD
#define MSTEP_IR_DIALECT_ELEMENTWISEOPS_TD

include "mstep/ir/dialect/MstepBase.td"

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

// x -> f(x), same type.
class Mstep_UnaryOp<string mnemonic, Type type, string fn, list<Trait> traits = []>
    : Mstep_Op<mnemonic, !listconcat([Pure, Elementwise, SameOperandsAndResultType,
                                      Mstep_Fusible], traits)> {
  let summary = "elementwise " # fn;
  let arguments = (ins type:$input);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

// x -> predicate(x) as i1, same shape.
class Mstep_UnaryPredicateOp<string mnemonic, string fn>
    : Mstep_Op<mnemonic, [Pure, Elementwise, SameOperandsAndResultShape,
                          Mstep_Fusible]> {
  let summary = "elementwise " # fn # ", as i1";
  let arguments = (ins Mstep_Tensor:$input);
  let results = (outs Mstep_BoolTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
}

def Mstep_NegOp : Mstep_UnaryOp<"neg", Mstep_NumericTensor, "-x"> {
  let hasFolder = 1;  // neg(neg(x)) = x
}
def Mstep_AbsOp : Mstep_UnaryOp<"abs", Mstep_NumericTensor, "|x|">;
def Mstep_ExpOp : Mstep_UnaryOp<"exp", Mstep_FloatTensor, "e^x">;
def Mstep_LogOp : Mstep_UnaryOp<"log", Mstep_FloatTensor, "natural log">;
def Mstep_Log1pOp : Mstep_UnaryOp<"log1p", Mstep_FloatTensor, "log(1 + x)">;
def Mstep_SqrtOp : Mstep_UnaryOp<"sqrt", Mstep_FloatTensor, "square root">;
def Mstep_RsqrtOp : Mstep_UnaryOp<"rsqrt", Mstep_FloatTensor, "1 / sqrt(x)">;
def Mstep_SinOp : Mstep_UnaryOp<"sin", Mstep_FloatTensor, "sine">;
def Mstep_CosOp : Mstep_UnaryOp<"cos", Mstep_FloatTensor, "cosine">;
def Mstep_TanhOp : Mstep_UnaryOp<"tanh", Mstep_FloatTensor, "tanh">;
def Mstep_SigmoidOp : Mstep_UnaryOp<"sigmoid", Mstep_FloatTensor, "1 / (1 + e^-x)">;
def Mstep_ReluOp : Mstep_UnaryOp<"relu", Mstep_NumericTensor, "max(x, 0)">;
def Mstep_SiluOp : Mstep_UnaryOp<"silu", Mstep_FloatTensor, "x * sigmoid(x)">;
def Mstep_ErfOp : Mstep_UnaryOp<"erf", Mstep_FloatTensor, "error function">;
def Mstep_ReciprocalOp : Mstep_UnaryOp<"reciprocal", Mstep_FloatTensor, "1 / x">;
def Mstep_LogicalNotOp : Mstep_UnaryOp<"logical_not", Mstep_BoolTensor, "not">;

def Mstep_GeluOp : Mstep_UnaryOp<"gelu", Mstep_FloatTensor, "GELU"> {
  let description = [{
    ```mlir
    %y = mstep.gelu %x {approximate = #mstep.gelu_approximation<tanh>} : tensor<4xf32>
    ```
  }];
  let arguments = (ins Mstep_FloatTensor:$input,
      DefaultValuedAttr<Mstep_GeluApproximationAttr,
                        "::mstep::dialect::GeluApproximation::none">:$approximate);
}

def Mstep_IsNanOp : Mstep_UnaryPredicateOp<"isnan", "x != x">;
def Mstep_IsFiniteOp : Mstep_UnaryPredicateOp<"isfinite", "not inf and not nan">;

def Mstep_CastOp : Mstep_Op<"cast", [Pure, Elementwise, SameOperandsAndResultShape,
                                     Mstep_Fusible]> {
  let summary = "elementwise conversion to the result's element type";
  let description = [{
    PyTorch's `to(dtype)`: floats round to nearest even, float to int
    truncates, nonzero converts to true.

    ```mlir
    %y = mstep.cast %x : tensor<2x3xi64> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Mstep_Tensor:$input);
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Binary, with implicit broadcasting
//===----------------------------------------------------------------------===//

class Mstep_BinaryOp<string mnemonic, Type operandType, Type resultType,
                     string fn, list<Trait> traits = []>
    : Mstep_Op<mnemonic, !listconcat([Pure, SameOperandsElementType, Mstep_Fusible],
                                     traits)> {
  let summary = "elementwise " # fn # " with broadcasting";
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs resultType:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return verifyBroadcastingOperands(getOperation(), {"lhs", "rhs"});
    }
  }];
}

// Arithmetic: the result has the operands' element type.
class Mstep_ArithmeticOp<string mnemonic, Type type, string fn,
                         list<Trait> traits = []>
    : Mstep_BinaryOp<mnemonic, type, type, fn,
                     !listconcat([SameOperandsAndResultElementType], traits)>;

// Comparison and logic: the result is i1.
class Mstep_CompareOp<string mnemonic, Type type, string fn, list<Trait> traits = []>
    : Mstep_BinaryOp<mnemonic, type, Mstep_BoolTensor, fn, traits>;

def Mstep_AddOp : Mstep_ArithmeticOp<"add", Mstep_Tensor, "a + b", [Commutative]> {
  let description = [{
    ```mlir
    %c = mstep.add %a, %b : tensor<2x3xf32>, tensor<3xf32> -> tensor<2x3xf32>
    ```
  }];
}
// Folders: x - 0, x * 1 and x / 1 are x when the result has x's type
// (exact in IEEE arithmetic; x + 0 is not folded: -0 + 0 is +0).
def Mstep_SubOp : Mstep_ArithmeticOp<"sub", Mstep_NumericTensor, "a - b"> {
  let hasFolder = 1;
}
def Mstep_MulOp : Mstep_ArithmeticOp<"mul", Mstep_Tensor, "a * b", [Commutative]> {
  let hasFolder = 1;
}
def Mstep_DivOp : Mstep_ArithmeticOp<"div", Mstep_FloatTensor, "a / b"> {
  let hasFolder = 1;
}
def Mstep_PowOp : Mstep_ArithmeticOp<"pow", Mstep_NumericTensor, "a ^ b">;
def Mstep_MaximumOp : Mstep_ArithmeticOp<"maximum", Mstep_Tensor, "max(a, b)",
                                         [Commutative]>;
def Mstep_MinimumOp : Mstep_ArithmeticOp<"minimum", Mstep_Tensor, "min(a, b)",
                                         [Commutative]>;

def Mstep_EqOp : Mstep_CompareOp<"eq", Mstep_Tensor, "a == b", [Commutative]>;
def Mstep_NeOp : Mstep_CompareOp<"ne", Mstep_Tensor, "a != b", [Commutative]>;
def Mstep_LtOp : Mstep_CompareOp<"lt", Mstep_Tensor, "a < b">;
def Mstep_LeOp : Mstep_CompareOp<"le", Mstep_Tensor, "a <= b">;
def Mstep_GtOp : Mstep_CompareOp<"gt", Mstep_Tensor, "a > b">;
def Mstep_GeOp : Mstep_CompareOp<"ge", Mstep_Tensor, "a >= b">;
def Mstep_LogicalAndOp : Mstep_CompareOp<"logical_and", Mstep_BoolTensor, "a and b",
                                         [Commutative]>;
def Mstep_LogicalOrOp : Mstep_CompareOp<"logical_or", Mstep_BoolTensor, "a or b",
                                        [Commutative]>;

//===----------------------------------------------------------------------===//
// Ternary
//===----------------------------------------------------------------------===//

def Mstep_WhereOp : Mstep_Op<"where", [Pure, Mstep_Fusible,
    AllElementTypesMatch<["true_value", "false_value", "result"]>]> {
  let summary = "elementwise select with broadcasting";
  let description = [{
    `condition ? true_value : false_value`; all three broadcast to the
    result.

    ```mlir
    %r = mstep.where %c, %a, %b : tensor<2x3xi1>, tensor<2x3xf32>, tensor<f32> -> tensor<2x3xf32>
    ```
  }];
  let arguments = (ins Mstep_BoolTensor:$condition, Mstep_Tensor:$true_value,
                       Mstep_Tensor:$false_value);
  let results = (outs Mstep_Tensor:$result);
  let assemblyFormat = [{
    $condition `,` $true_value `,` $false_value attr-dict `:` type($condition) `,`
    type($true_value) `,` type($false_value) `->` type($result)
  }];
  let hasVerifier = 1;
  let extraClassDefinition = [{
    ::llvm::LogicalResult $cppClass::verify() {
      return verifyBroadcastingOperands(getOperation(),
                                        {"condition", "true_value", "false_value"});
    }
  }];
}

#endif  // MSTEP_IR_DIALECT_ELEMENTWISEOPS_TD
