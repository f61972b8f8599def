// Column-sum batches: see CudaColumnSumBatches.h.
#include "lib/backends/cuda/CudaColumnSumBatches.h"

#include "lib/backends/cuda/CudaColumnSums.h"
#include "lib/backends/cuda/CudaKernelGen.h"
#include "lib/backends/cuda/CudaOpGroupLoops.h"
#include "lib/backends/cuda/CudaOpGroups.h"
#include "lib/backends/cuda/CudaViews.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

using namespace mlir;

/// The most sums one batch takes (each adds a tree's shared buffer to the
/// first pass's blocks).
constexpr size_t kMaxSums = 8;

} // namespace

int batch_column_sums(func::FuncOp step, const CudaViews& views,
                      const CudaCodegenOptions& options) {
  if (options.column_reduction != CudaColumnReduction::split) return 0;
  Block& body = step.getBody().front();
  auto member = [&](Operation* op) {
    return loops::leading_columns(op) && may_join_op_group(op, body, views);
  };
  auto same_rows = [](Operation* first, Operation* op) {
    return loops::leading_columns(first) == loops::leading_columns(op);
  };
  int batches = 0;
  Attribute unit = UnitAttr::get(step.getContext());
  for (const std::vector<Operation*>& run :
       independent_runs(body, views, member, same_rows, kMaxSums, 4 * kMaxSums))
    if (run.size() >= 2 && wrap_op_group(body, kColumnSumBatchAttr, unit, run)) ++batches;
  return batches;
}

bool is_column_sum_batch(Operation* op) {
  return isa<scf::ExecuteRegionOp>(op) && op->hasAttr(kColumnSumBatchAttr);
}

absl::Status build_column_sum_batch_loops(Operation* batch, func::FuncOp func,
                                          const CudaCodegenOptions& options) {
  loops::Nest nest(func);
  Block& body = batch->getRegion(0).front();
  llvm::DenseMap<Value, loops::Flat> buffers = op_group_buffers(nest, batch);
  std::vector<loops::ColumnSum> sums;
  for (Operation& op : body.without_terminator())
    if (auto out = buffers.find(op.getResult(0)); out != buffers.end())  // (read after it)
      sums.push_back({buffers.at(op.getOperand(0)), out->second, isa<dialect::MeanOp>(op)});
  loops::column_sums_loops(sums, *loops::leading_columns(&body.front()), options, nest);
  nest.b.create<func::ReturnOp>();
  return absl::OkStatus();
}

} // namespace mstep::cuda
