// mstep-sink-collective-readers: moves the pure readers of a collective's
// result down to their first user, so that an asynchronous collective
// overlaps the ops before them. See Passes.td.
#include "llvm/ADT/DenseSet.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/passes/Passes.h"

namespace mstep::passes {
#define GEN_PASS_DEF_SINKCOLLECTIVEREADERS
#include "mstep/passes/Passes.h.inc"

namespace {

bool isCollective(mlir::Operation* op) {
  return mlir::isa<dialect::AllReduceOp, dialect::AllGatherOp, dialect::BroadcastOp,
                   dialect::ReduceScatterOp>(op);
}

struct SinkCollectiveReadersPass
    : impl::SinkCollectiveReadersBase<SinkCollectiveReadersPass> {
  using Base::Base;

  void runOnOperation() override {
    mlir::func::FuncOp func = getOperation();
    if (func.isExternal()) return;
    mlir::Block& block = func.getBody().front();
    // 1. The readers: pure ops reading a collective or another reader.
    llvm::DenseSet<mlir::Operation*> readers;
    llvm::SmallVector<mlir::Operation*> order;
    for (mlir::Operation& op : block) {
      if (op.hasTrait<mlir::OpTrait::IsTerminator>() || !mlir::isMemoryEffectFree(&op)) continue;
      const bool reads = llvm::any_of(op.getOperands(), [&](mlir::Value v) {
        mlir::Operation* def = v.getDefiningOp();
        return def && (isCollective(def) || readers.contains(def));
      });
      if (!reads) continue;
      readers.insert(&op);
      order.push_back(&op);
    }
    if (order.empty()) return markAllAnalysesPreserved();
    // 2. Last reader first: each goes right before its earliest user,
    //    whose place is final by then.
    for (mlir::Operation* op : llvm::reverse(order)) {
      mlir::Operation* first = nullptr;
      for (mlir::Operation* user : op->getUsers()) {
        mlir::Operation* u = block.findAncestorOpInBlock(*user);
        if (u && (!first || u->isBeforeInBlock(first))) first = u;
      }
      if (!first || first == op->getNextNode()) continue;
      op->moveBefore(first);
      ++numSunk;
    }
  }
};

}  // namespace
}  // namespace mstep::passes
