// Fusions with the slice_scatters they read: see CudaSliceScatterFusions.h.
#include "lib/backends/cuda/CudaSliceScatterFusions.h"

#include "lib/backends/cuda/CudaLoopNest.h"
#include "lib/backends/cuda/CudaOpGroupLoops.h"
#include "lib/backends/cuda/CudaOpGroups.h"
#include "lib/backends/cuda/CudaViews.h"
#include "llvm/ADT/DenseMap.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

using namespace mlir;
using namespace loops;


bool static_shape(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape();
}

/// The slice_scatters `fusion` reads that may join it: read by it alone,
/// of its result's shape. Empty where the fusion itself cannot take them
/// (results of two shapes, an input of another shape than the result's
/// or one element, a body value of another).
std::vector<Operation*> joining_scatters(dialect::FusionOp fusion, Block& body,
                                         const CudaViews& views) {
  if (!may_join_op_group(fusion, body, views) || !elementwise_over_one_shape(fusion)) return {};
  ArrayRef<int64_t> shape = shape_of(fusion.getResult(0));
  std::vector<Operation*> scatters;
  for (Value input : fusion.getInputs()) {
    auto scatter = input.getDefiningOp<dialect::SliceScatterOp>();
    if (!scatter || !input.hasOneUse() || shape_of(input) != shape ||
        !static_shape(scatter.getSrc()) || !may_join_op_group(scatter, body, views) ||
        llvm::is_contained(scatters, scatter.getOperation()))
      continue;
    scatters.push_back(scatter);
  }
  return scatters;
}

} // namespace

int fuse_slice_scatters(func::FuncOp step, const CudaViews& views) {
  Block& body = step.getBody().front();
  std::vector<std::vector<Operation*>> groups;
  for (Operation& op : body)
    if (auto fusion = dyn_cast<dialect::FusionOp>(op)) {
      std::vector<Operation*> members = joining_scatters(fusion, body, views);
      if (members.empty()) continue;
      std::sort(members.begin(), members.end(),
                [](Operation* a, Operation* b) { return a->isBeforeInBlock(b); });
      members.push_back(fusion);
      groups.push_back(std::move(members));
    }
  int wrapped = 0;
  Attribute unit = UnitAttr::get(step.getContext());
  for (const std::vector<Operation*>& members : groups)
    wrapped += wrap_op_group(body, kSliceScatterFusionAttr, unit, members) ? 1 : 0;
  return wrapped;
}

bool is_slice_scatter_fusion(Operation* op) {
  return isa<scf::ExecuteRegionOp>(op) && op->hasAttr(kSliceScatterFusionAttr);
}

absl::Status build_slice_scatter_fusion_loops(Operation* group, func::FuncOp func) {
  Nest nest(func);
  ImplicitLocOpBuilder& b = nest.b;
  Block& body = group->getRegion(0).front();
  llvm::DenseMap<Value, Flat> buffers = op_group_buffers(nest, group);
  auto fusion = cast<dialect::FusionOp>(body.getTerminator()->getPrevNode());
  ArrayRef<int64_t> shape = shape_of(fusion.getResult(0));
  const int64_t n = product(shape);
  nest.parallel(n, [&](Value e) {
    // An input of the fusion at element e: a joined slice_scatter's
    // source or base, or a buffer (element 0 of a one-element one).
    auto read = [&](Value v) -> Value {
      auto scatter = v.getDefiningOp<dialect::SliceScatterOp>();
      if (!scatter || !group->isAncestor(scatter)) {
        const Flat& flat = buffers.at(v);
        return nest.load(flat, product(shape_of(v)) == n ? e : nest.index(0));
      }
      const int64_t dim = static_cast<int64_t>(scatter.getDim());
      const int64_t size = shape[dim], inner = product(shape.drop_front(dim + 1));
      const int64_t start = static_cast<int64_t>(scatter.getStart());
      const int64_t end = std::min<int64_t>(static_cast<int64_t>(scatter.getEnd()), size);
      const int64_t step = static_cast<int64_t>(scatter.getStep());
      const int64_t src_size = shape_of(scatter.getSrc())[dim];
      // e's coordinate along dim, whether the slice holds it, and where.
      Value outer = nest.div(e, size * inner), rest = nest.rem(e, inner);
      Value c = nest.rem(nest.div(e, inner), size);
      Value from = b.create<arith::SubIOp>(c, nest.index(start));
      Value in = b.create<arith::AndIOp>(
          b.create<arith::CmpIOp>(arith::CmpIPredicate::sge, from, nest.index(0)),
          b.create<arith::CmpIOp>(arith::CmpIPredicate::slt, c, nest.index(end)));
      if (step > 1)
        in = b.create<arith::AndIOp>(
            in, b.create<arith::CmpIOp>(arith::CmpIPredicate::eq, nest.rem(from, step),
                                        nest.index(0)));
      auto pick = b.create<scf::IfOp>(TypeRange{cast<ShapedType>(v.getType()).getElementType()},
                                      in, /*withElseRegion=*/true);
      {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(pick.thenBlock());
        // (a lane outside the slice reads nothing of the source)
        Value at = nest.affine(nest.affine(outer, src_size, nest.div(from, step)), inner, rest);
        b.create<scf::YieldOp>(nest.load(buffers.at(scatter.getSrc()), at));
        b.setInsertionPointToStart(pick.elseBlock());
        b.create<scf::YieldOp>(nest.load(buffers.at(scatter.getInput()), e));
      }
      return pick.getResult(0);
    };
    SmallVector<Value> results = fusion_elements(nest, fusion, read);
    for (auto [result, value] : llvm::zip(fusion.getResults(), results))
      if (auto out = buffers.find(result); out != buffers.end()) nest.store(value, out->second, e);
  });
  b.create<func::ReturnOp>();
  return absl::OkStatus();
}

} // namespace mstep::cuda
