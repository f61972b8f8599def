// The loops of mstep.cat on cuda, per operand as CudaViews decided: an
// operand whose op already wrote it into the result (a plan alias) gets
// nothing; an operand that is a fill of a constant (DDP's zero padding
// between gradients) is written by the cat, one launch for all such
// operands; any other operand is a copy kernel of its own (RefShape.cpp's
// cat: one lane per element). Library-internal; MLIR.
#pragma once

#include <cstdint>

#include "llvm/ADT/ArrayRef.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace loops {
class Nest;  // CudaLoopNest.h (not included: its `Value` is MLIR's)
}

/// How one operand of a cat reaches the cat's result.
struct CatOperandWay {
  enum class Kind { copy, in_place, fill };
  Kind kind = Kind::copy;
  double value = 0;  ///< for `fill`: the constant (the operand's mstep.full)
};

/// The cat's loops in `nest` (parameters: the cat's operands, then its
/// result): `ways` per operand, or empty for a copy of every operand.
void cat_loops(dialect::CatOp cat, llvm::ArrayRef<CatOperandWay> ways, loops::Nest& nest);
/// The same as the whole body of `func`'s empty entry block, with a return.
void build_cat_func(dialect::CatOp cat, llvm::ArrayRef<CatOperandWay> ways, mlir::func::FuncOp func);

}  // namespace mstep::cuda
