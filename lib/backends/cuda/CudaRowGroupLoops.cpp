// A row group's kernel: see CudaRowGroupLoops.h.
#include "lib/backends/cuda/CudaRowGroupLoops.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaBlockRows.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "lib/backends/cuda/CudaOpLoops.h"
#include "lib/backends/cuda/CudaRowGroups.h"
#include "llvm/ADT/DenseMap.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/ir/dialect/ScalarForms.h"

namespace mstep::cuda {

namespace {

using namespace mlir;
using namespace loops;

/// Where the values of one phase are built: the row, element j (null in
/// the per-row phase), the statistics finished so far, and the values
/// built so far.
struct Scope {
  Value row, base, j;
  ArrayRef<Value> stats;
  llvm::DenseMap<Value, Value> built;
};

class RowGroupBuilder {
 public:
  RowGroupBuilder(Operation* group, func::FuncOp func)
      : nest_(func), group_(group), wide_(row_group_shape(group)),
        rows_(product(ArrayRef<int64_t>(wide_).drop_back())), n_(wide_.back()) {}

  absl::Status build() {
    Block& body = group_->getRegion(0).front();
    unsigned param = 0;
    for (Value input : row_group_inputs(group_)) inputs_[input] = nest_.flat(param++);
    for (Operation& op : body.without_terminator())
      if (isa<dialect::SumOp, dialect::MeanOp>(op)) {
        statistic_[op.getResult(0)] = static_cast<int>(reductions_.size());
        reductions_.push_back(&op);
      }
    std::vector<std::pair<Value, Flat>> wide_out, row_out;
    for (Value yielded : body.getTerminator()->getOperands()) {
      const Flat out = nest_.flat(param++);
      (row_class(shape_of(yielded), wide_) == RowClass::wide ? wide_out : row_out)
          .push_back({yielded, out});
    }
    ImplicitLocOpBuilder& b = nest_.b;
    row_loops(nest_, /*block=*/true, rows_, n_, [&](Value row) {
      Value base = nest_.affine(row, n_, Value());
      RowSpec spec;
      for (Operation* reduction : reductions_) {
        RowStat stat;
        stat.term = [this, row, base, reduction](Value j, ArrayRef<Value> stats) {
          Scope scope{row, base, j, stats, {}};
          return nest_.ext(value(reduction->getOperand(0), scope));
        };
        stat.combine = [&b](Value s, Value v) -> Value { return b.create<arith::AddFOp>(s, v); };
        const bool mean = isa<dialect::MeanOp>(reduction);
        Type element = cast<ShapedType>(reduction->getResult(0).getType()).getElementType();
        stat.finish = [this, &b, mean, element](Value total) {
          Value v = mean ? b.create<arith::DivFOp>(total, nest_.f64(static_cast<double>(n_)))
                               .getResult()
                         : total;
          return nest_.round_to(v, element);
        };
        spec.stats.push_back(std::move(stat));
      }
      if (!wide_out.empty())
        spec.output = [this, row, base, wide_out](Value j, ArrayRef<Value> stats) {
          Scope scope{row, base, j, stats, {}};
          for (const auto& [v, out] : wide_out)
            nest_.store(value(v, scope), out, nest_.b.create<arith::AddIOp>(base, j));
        };
      if (!row_out.empty())
        spec.row_output = [this, row, base, row_out](ArrayRef<Value> stats) {
          Scope scope{row, base, Value(), stats, {}};
          for (const auto& [v, out] : row_out) nest_.store(value(v, scope), out, row);
        };
      return spec;
    });
    b.create<func::ReturnOp>();
    return status_;
  }

 private:
  static ArrayRef<int64_t> shape_of(Value v) { return cast<ShapedType>(v.getType()).getShape(); }

  /// `v` at the scope's element (or row), built once per scope.
  Value value(Value v, Scope& scope) {
    if (auto it = scope.built.find(v); it != scope.built.end()) return it->second;
    Value built = build_value(v, scope);
    scope.built[v] = built;
    return built;
  }

  Value build_value(Value v, Scope& scope) {
    ImplicitLocOpBuilder& b = nest_.b;
    if (auto input = inputs_.find(v); input != inputs_.end()) return load(v, input->second, scope);
    if (auto stat = statistic_.find(v); stat != statistic_.end()) {
      if (static_cast<size_t>(stat->second) >= scope.stats.size())
        return fail(v, "a statistic read before it is reduced");
      return scope.stats[stat->second];
    }
    // A fusion's body argument is the fusion's input.
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      auto fusion = dyn_cast<dialect::FusionOp>(arg.getOwner()->getParentOp());
      if (!fusion) return fail(v, "a block argument of another op than a fusion");
      return value(fusion.getInputs()[arg.getArgNumber()], scope);
    }
    Operation* op = v.getDefiningOp();
    if (auto fusion = dyn_cast<dialect::FusionOp>(op))
      return value(fusion.getBody().front().getTerminator()->getOperand(
                       cast<OpResult>(v).getResultNumber()),
                   scope);
    if (!dialect::hasScalarForm(op)) return fail(v, "an op without a scalar form");
    SmallVector<Value> operands;
    for (Value operand : op->getOperands()) operands.push_back(value(operand, scope));
    return dialect::emitScalarOp(b, op, operands);
  }

  /// Input `v`'s element at the scope's (row, j), by its class.
  Value load(Value v, const Flat& flat, Scope& scope) {
    std::optional<RowClass> c = row_class(shape_of(v), wide_);
    if (!c) return fail(v, "an input that does not broadcast to the group's rows");
    if ((*c == RowClass::wide || *c == RowClass::column) && !scope.j)
      return fail(v, "a per-row value computed from a whole row");
    switch (*c) {
      case RowClass::wide: return nest_.load(flat, nest_.b.create<arith::AddIOp>(scope.base, scope.j));
      case RowClass::per_row: return nest_.load(flat, scope.row);
      case RowClass::column: return nest_.load(flat, scope.j);
      case RowClass::scalar: return nest_.load(flat, nest_.index(0));
    }
    return Value();
  }

  /// Records an internal error (the grouping let through what the kernel
  /// cannot build) and returns a placeholder of `v`'s element type.
  Value fail(Value v, absl::string_view why) {
    if (status_.ok())
      status_ = absl::InternalError(absl::StrCat("cuda: a row group's kernel met ", why));
    Type element = cast<ShapedType>(v.getType()).getElementType();
    return nest_.poison(element);
  }

  Nest nest_;
  Operation* group_;
  SmallVector<int64_t> wide_;
  int64_t rows_, n_;
  llvm::DenseMap<Value, Flat> inputs_;
  llvm::DenseMap<Value, int> statistic_;
  std::vector<Operation*> reductions_;
  absl::Status status_ = absl::OkStatus();
};

} // namespace

absl::Status build_row_group_loops(Operation* group, func::FuncOp func) {
  return RowGroupBuilder(group, func).build();
}

} // namespace mstep::cuda
