// What every op family shares: the dialect, its enums, the tensor type
// constraints, the native traits and the base op class.
#ifndef MSTEP_IR_DIALECT_MSTEPBASE_TD
#define MSTEP_IR_DIALECT_MSTEPBASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/BuiltinAttributes.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mstep/ir/dialect/MstepDialect.td"
include "mstep/ir/dialect/MstepEnums.td"

//===----------------------------------------------------------------------===//
// Types. Every tensor is ranked and statically shaped: the trace graph
// knows every shape, and a new shape is a new cache key, not a dynamic dim.
//===----------------------------------------------------------------------===//

defvar MstepFloatTypes = [F32, F64, BF16, F16];
defvar MstepIntTypes = [I32, I64];
defvar MstepNumericTypes = !listconcat(MstepFloatTypes, MstepIntTypes);
defvar MstepElementTypes = !listconcat(MstepNumericTypes, [I1]);

def Mstep_Tensor : StaticShapeTensorOf<MstepElementTypes>;
def Mstep_FloatTensor : StaticShapeTensorOf<MstepFloatTypes>;
def Mstep_NumericTensor : StaticShapeTensorOf<MstepNumericTypes>;
def Mstep_IntTensor : StaticShapeTensorOf<MstepIntTypes>;
def Mstep_BoolTensor : StaticShapeTensorOf<[I1]>;
def Mstep_I64Tensor : StaticShapeTensorOf<[I64]>;

// A device scalar: a 0-d tensor.
def Mstep_Scalar : 0DTensorOf<MstepElementTypes>;
def Mstep_FloatScalar : 0DTensorOf<MstepFloatTypes>;

// An f64 device scalar (optimizer hyperparameters). Its type is implied,
// so op syntax leaves it out.
def Mstep_F64Scalar : 0DTensorOf<[F64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getF64Type())">;

// A per-parameter optimizer step counter: 0-d i64.
def Mstep_StepCounter : 0DTensorOf<[I64]>,
    BuildableType<"::mlir::RankedTensorType::get({}, $_builder.getI64Type())">;

// The Philox RNG state (seed, base offset): tensor<2xi64>. An op that draws
// random numbers takes it plus its own `offset` into the stream.
def Mstep_RngState : Type<
    And<[IsRankedTensorTypePred,
         CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getShape() == "
               "::llvm::ArrayRef<int64_t>{2}">,
         SubstLeaves<"$_self",
                     "::llvm::cast<::mlir::ShapedType>($_self).getElementType()",
                     I64.predicate>]>,
    "RNG state tensor<2xi64>", "::mlir::RankedTensorType">,
    BuildableType<"::mlir::RankedTensorType::get({2}, $_builder.getI64Type())">;

//===----------------------------------------------------------------------===//
// Attributes.
//===----------------------------------------------------------------------===//

// (height, width) pairs of conv and pooling windows.
def Mstep_PositivePair : ConfinedAttr<DenseI64ArrayAttr,
    [DenseArrayCount<2>, DenseArrayStrictlyPositive<DenseI64ArrayAttr>]>;
def Mstep_NonNegativePair : ConfinedAttr<DenseI64ArrayAttr,
    [DenseArrayCount<2>, DenseArrayNonNegative<DenseI64ArrayAttr>]>;
def Mstep_NonNegativeI64 : ConfinedAttr<I64Attr, [IntNonNegative]>;
def Mstep_PositiveI64 : ConfinedAttr<I64Attr, [IntPositive]>;

//===----------------------------------------------------------------------===//
// Traits.
//===----------------------------------------------------------------------===//

// The op may sit inside an `mstep.fusion` region: it computes each result
// element from the elements at the same (broadcast) position of its
// operands, with no reduction, reordering or randomness.
def Mstep_Fusible : NativeOpTrait<"Fusible"> {
  let cppNamespace = "::mstep::dialect::OpTrait";
}

//===----------------------------------------------------------------------===//
// Base op class.
//===----------------------------------------------------------------------===//

class Mstep_Op<string mnemonic, list<Trait> traits = []>
    : Op<Mstep_Dialect, mnemonic, traits>;

#endif  // MSTEP_IR_DIALECT_MSTEPBASE_TD
