// hoist_bias_casts and sink_bias_grad_casts: see CudaAutocastBias.h.
#include "lib/backends/cuda/CudaAutocastBias.h"

#include "lib/backends/cuda/CudaViews.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

/// The bias cast of `fusion` when it is `cast(bias) + product` [then an
/// activation cuBLASLt applies], `product` (a block argument) the only
/// other operand: the cast in the body, or null.
dialect::CastOp bias_cast_of(dialect::FusionOp fusion, mlir::Value product) {
  if (fusion->getNumOperands() != 2 || fusion->getNumResults() != 1 ||
      fusion->getResult(0).getType() != product.getType())
    return nullptr;
  const unsigned at = fusion->getOperand(0) == product ? 0 : 1;
  if (fusion->getOperand(1 - at) == product) return nullptr;
  mlir::Block& body = fusion.getBody().front();
  mlir::Value product_arg = body.getArgument(at), bias_arg = body.getArgument(1 - at);
  auto product_type = llvm::cast<mlir::ShapedType>(product.getType());
  auto bias_type = llvm::cast<mlir::ShapedType>(bias_arg.getType());
  if (bias_type.getRank() != 1 || bias_type.getDimSize(0) != product_type.getShape().back() ||
      !llvm::isa<mlir::FloatType>(bias_type.getElementType()) || !bias_arg.hasOneUse())
    return nullptr;
  // cast, add [activation], yield: nothing else.
  auto ops = body.without_terminator();
  auto it = ops.begin();
  auto cast = it == ops.end() ? nullptr : llvm::dyn_cast<dialect::CastOp>(*it++);
  if (!cast || cast.getInput() != bias_arg ||
      llvm::cast<mlir::ShapedType>(cast.getResult().getType()).getElementType() !=
          product_type.getElementType() ||
      !cast.getResult().hasOneUse())
    return nullptr;
  if (it == ops.end()) return nullptr;
  mlir::Operation* add = &*it++;
  if (!llvm::isa<dialect::AddOp>(add) || add->getResult(0).getType() != product.getType() ||
      !((add->getOperand(0) == product_arg && add->getOperand(1) == cast.getResult()) ||
        (add->getOperand(1) == product_arg && add->getOperand(0) == cast.getResult())))
    return nullptr;
  mlir::Value last = add->getResult(0);
  if (it != ops.end()) {
    if (!cublaslt_activation_of(&*it) || it->getOperand(0) != last) return nullptr;
    last = it->getResult(0);
    ++it;
  }
  mlir::Operation* yield = body.getTerminator();
  if (it != ops.end() || yield->getNumOperands() != 1 || yield->getOperand(0) != last)
    return nullptr;
  return cast;
}

/// The [k, cols] matrices whose column sums `matmul` can write beside its
/// product as a bias gradient (CudaViews step 4): a 2-D matmul's rhs, and
/// the operand of a permute that transposes its lhs.
llvm::SmallVector<mlir::Value, 2> summable_matrices(dialect::MatmulOp matmul) {
  llvm::SmallVector<mlir::Value, 2> matrices;
  auto rank = [](mlir::Value v) { return llvm::cast<mlir::ShapedType>(v.getType()).getRank(); };
  if (rank(matmul.getLhs()) != 2 || rank(matmul.getRhs()) != 2) return matrices;
  matrices.push_back(matmul.getRhs());
  if (auto permute = matmul.getLhs().getDefiningOp<dialect::PermuteOp>())
    matrices.push_back(permute.getInput());
  return matrices;
}

/// Whether `sum` adds up the columns of `matrix` (its bytes, [k, cols]).
bool sums_columns_of(dialect::SumOp sum, mlir::Value matrix) {
  auto in = llvm::cast<mlir::ShapedType>(sum.getInput().getType());
  auto m = llvm::cast<mlir::ShapedType>(matrix.getType());
  return reshape_root(sum.getInput()) == reshape_root(matrix) &&
         in.getShape().back() == m.getShape().back() && in.getNumElements() == m.getNumElements();
}

/// The first matmul after `sum` that can write it as a bias gradient, or null.
mlir::Operation* bias_grad_matmul(dialect::SumOp sum) {
  for (mlir::Operation* op = sum->getNextNode(); op != nullptr; op = op->getNextNode())
    if (auto matmul = llvm::dyn_cast<dialect::MatmulOp>(op))
      for (mlir::Value matrix : summable_matrices(matmul))
        if (sums_columns_of(sum, matrix)) return op;
  return nullptr;
}

}  // namespace

int sink_bias_grad_casts(mlir::func::FuncOp step) {
  llvm::SmallVector<dialect::SumOp> sums;
  step.walk([&](dialect::SumOp sum) {
    if (sums_all_but_last(sum)) sums.push_back(sum);
  });
  int moved = 0;
  for (dialect::SumOp sum : sums) {
    mlir::Operation* matmul = bias_grad_matmul(sum);
    if (!matmul) continue;
    // The sum's readers before the matmul, through reshapes (views): each
    // a one-operand fusion (the cast) whose results are read after it.
    llvm::SmallVector<mlir::Operation*> readers;
    llvm::SmallVector<mlir::Value> values = {sum.getResult()};
    bool movable = true;
    while (!values.empty() && movable) {
      mlir::Value value = values.pop_back_val();
      for (mlir::Operation* user : value.getUsers()) {
        if (matmul->isBeforeInBlock(user)) continue;
        if (auto reshape = llvm::dyn_cast<dialect::ReshapeOp>(user)) {
          values.push_back(reshape.getResult());
          continue;
        }
        movable = llvm::isa<dialect::FusionOp>(user) && user->getNumOperands() == 1 &&
                  llvm::all_of(user->getUsers(), [&](mlir::Operation* later) {
                    return matmul->isBeforeInBlock(later);
                  });
        if (!movable) break;
        readers.push_back(user);
      }
    }
    if (!movable || readers.empty()) continue;
    llvm::sort(readers, [](mlir::Operation* a, mlir::Operation* b) { return a->isBeforeInBlock(b); });
    mlir::Operation* after = matmul;
    for (mlir::Operation* reader : readers) {
      reader->moveAfter(after);
      after = reader;
      ++moved;
    }
  }
  return moved;
}

int hoist_bias_casts(mlir::func::FuncOp step) {
  int moved = 0;
  step.walk([&](dialect::MatmulOp matmul) {
    mlir::Value product = matmul.getResult();
    if (!product.hasOneUse()) return;
    auto fusion = llvm::dyn_cast<dialect::FusionOp>(*product.getUsers().begin());
    if (!fusion) return;
    dialect::CastOp cast = bias_cast_of(fusion, product);
    if (!cast) return;
    // The cast of the fusion's bias operand, before the matmul (whose call
    // reads the bias); the fusion takes its result (the product's dtype)
    // as that operand.
    auto bias_arg = llvm::cast<mlir::BlockArgument>(cast.getInput());
    const unsigned position = bias_arg.getArgNumber();
    mlir::Operation* bias_op = fusion->getOperand(position).getDefiningOp();
    if (bias_op != nullptr && !bias_op->isBeforeInBlock(matmul)) return;
    mlir::OpBuilder b(matmul);
    auto outside = b.create<dialect::CastOp>(cast.getLoc(), cast.getResult().getType(),
                                             fusion->getOperand(position));
    fusion->setOperand(position, outside.getResult());
    bias_arg.setType(outside.getResult().getType());
    cast.getResult().replaceAllUsesWith(bias_arg);
    cast.erase();
    ++moved;
  });
  return moved;
}

}  // namespace mstep::cuda
