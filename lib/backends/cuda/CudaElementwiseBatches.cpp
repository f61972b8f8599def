// Batches of independent elementwise ops: see CudaElementwiseBatches.h.
#include "lib/backends/cuda/CudaElementwiseBatches.h"

#include "lib/backends/cuda/CudaLoopNest.h"
#include "lib/backends/cuda/CudaOpGroupLoops.h"
#include "lib/backends/cuda/CudaOpGroups.h"
#include "lib/backends/cuda/CudaViews.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/ir/dialect/ScalarForms.h"

namespace mstep::cuda {

namespace {

using namespace mlir;
using namespace loops;

/// The most members, and kernel parameters, of one batch (its parameters
/// stay far under PTX's 4 KiB).
constexpr size_t kMaxMembers = 64;
constexpr size_t kMaxParams = 256;

/// Elements of `value` (a static tensor), or -1.
int64_t elements(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape() ? type.getNumElements() : -1;
}

/// Whether `op` may be a member: elementwise over one shape
/// (CudaOpGroups.h), not empty, and no standalone expand.
bool is_member(Operation* op) {
  return elementwise_over_one_shape(op) && elements(op->getResult(0)) > 0 &&
         !isa<dialect::ExpandOp>(op);
}

/// Ops a member does not move past.
bool barrier(Operation* op) {
  return isa<dialect::MultiTensorUpdateOp, dialect::AllReduceOp, dialect::AllGatherOp,
             dialect::BroadcastOp, dialect::ReduceScatterOp, dialect::CustomOp>(op);
}

/// Moves each member whose first reader is the optimizer update (or that
/// would meet a barrier first) down to just before that barrier, last ones
/// first: the gradients' casts, made one by one through the backward,
/// then meet there. Others stay (a parameter's cast is read by its matmul
/// right away, and the forward's casts are side by side already).
void sink(Block& body, const std::vector<Operation*>& members) {
  for (auto it = members.rbegin(); it != members.rend(); ++it) {
    Operation* op = *it;
    Operation* first = nullptr;
    for (Value result : op->getResults())
      for (Operation* user : result.getUsers())
        if (Operation* outer = body.findAncestorOpInBlock(*user);
            outer && (!first || outer->isBeforeInBlock(first)))
          first = outer;
    Operation* to = op->getNextNode();
    while (to && to != first && !barrier(to)) to = to->getNextNode();
    if (to && barrier(to) && to != op->getNextNode()) op->moveBefore(to);
  }
}

} // namespace

int batch_elementwise(func::FuncOp step, const CudaViews& views) {
  Block& body = step.getBody().front();
  std::vector<Operation*> members;
  for (Operation& op : body)
    if (may_join_op_group(&op, body, views) && is_member(&op)) members.push_back(&op);
  sink(body, members);
  llvm::DenseSet<Operation*> candidate(members.begin(), members.end());
  std::vector<std::vector<Operation*>> runs = independent_runs(
      body, views, [&](Operation* op) { return candidate.contains(op); },
      [](Operation*, Operation*) { return true; }, kMaxMembers, kMaxParams);
  int batches = 0;
  Attribute unit = UnitAttr::get(step.getContext());
  for (const std::vector<Operation*>& run : runs)
    if (run.size() >= 2 && wrap_op_group(body, kElementwiseBatchAttr, unit, run)) ++batches;
  return batches;
}

bool is_elementwise_batch(Operation* op) {
  return isa<scf::ExecuteRegionOp>(op) && op->hasAttr(kElementwiseBatchAttr);
}

absl::Status build_elementwise_batch_loops(Operation* batch, func::FuncOp func) {
  Nest nest(func);
  ImplicitLocOpBuilder& b = nest.b;
  Block& body = batch->getRegion(0).front();
  llvm::DenseMap<Value, Flat> buffers = op_group_buffers(nest, batch);
  int64_t total = 0;
  for (Operation& op : body.without_terminator()) total += elements(op.getResult(0));
  nest.parallel(total, [&](Value i) {
    // Member m owns elements [begin, begin + n): a chain of ifs, each
    // member's element computed in its branch.
    int64_t begin = 0;
    for (Operation& op : body.without_terminator()) {
      const int64_t n = elements(op.getResult(0));
      Value at = b.create<arith::SubIOp>(i, nest.index(begin));
      Value mine = b.create<arith::CmpIOp>(arith::CmpIPredicate::ult, at, nest.index(n));
      auto branch = b.create<scf::IfOp>(mine, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPoint(branch.thenBlock()->getTerminator());
      // An operand: the element of a full-size input, element 0 of a
      // one-element one.
      llvm::DenseMap<Value, Value> element;
      auto read = [&](Value v) -> Value {
        if (auto it = element.find(v); it != element.end()) return it->second;
        const Flat& flat = buffers.at(v);
        return element[v] = nest.load(flat, elements(v) == n ? at : nest.index(0));
      };
      SmallVector<Value> results;
      if (isa<dialect::FusionOp>(op)) {
        results = fusion_elements(nest, &op, read);
      } else {
        SmallVector<Value> operands;
        for (Value operand : op.getOperands()) operands.push_back(read(operand));
        results.push_back(dialect::emitScalarOp(b, &op, operands));
      }
      for (auto [result, value] : llvm::zip(op.getResults(), results))
        if (auto out = buffers.find(result); out != buffers.end())
          nest.store(value, out->second, at);
      begin += n;
    }
  });
  b.create<func::ReturnOp>();
  return absl::OkStatus();
}

} // namespace mstep::cuda
