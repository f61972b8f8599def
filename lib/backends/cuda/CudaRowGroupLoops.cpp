// A row group's kernel: see CudaRowGroupLoops.h.
#include "lib/backends/cuda/CudaRowGroupLoops.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaBlockRows.h"
#include "lib/backends/cuda/CudaLoopNest.h"
#include "lib/backends/cuda/CudaOpLoops.h"
#include "lib/backends/cuda/CudaRowForms.h"
#include "lib/backends/cuda/CudaOpGroups.h"
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
  Scope(Value row, Value base, Value j, ArrayRef<Value> stats)
      : row(row), base(base), j(j), stats(stats) {}
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
    for (Value input : op_group_inputs(group_)) inputs_[input] = nest_.flat(param++);
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
      for (Operation& op : body.without_terminator()) add_statistics(&op, spec.stats);
      // Each statistic's term, and the outputs, in a scope of their own.
      for (RowStat& stat : spec.stats)
        stat.term = [this, row, base, term = std::move(stat.term)](Value j, ArrayRef<Value> stats) {
          Scope scope(row, base, j, stats);
          current_ = &scope;
          return term(j, stats);
        };
      if (!wide_out.empty())
        spec.output = [this, row, base, wide_out](Value j, ArrayRef<Value> stats) {
          Scope scope(row, base, j, stats);
          current_ = &scope;
          for (const auto& [v, out] : wide_out)
            nest_.store(value(v, scope), out, nest_.b.create<arith::AddIOp>(base, j));
        };
      if (!row_out.empty())
        spec.row_output = [this, row, base, row_out](ArrayRef<Value> stats) {
          Scope scope(row, base, Value(), stats);
          current_ = &scope;
          for (const auto& [v, out] : row_out) nest_.store(value(v, scope), out, row);
        };
      return spec;
    });
    b.create<func::ReturnOp>();
    return status_;
  }

 private:
  static ArrayRef<int64_t> shape_of(Value v) { return cast<ShapedType>(v.getType()).getShape(); }

  /// `op`'s statistics, appended to `stats` (whose terms read the element
  /// values of the scope current_ points at): a reduction's one, a row
  /// op's (CudaRowForms.h).
  void add_statistics(Operation* op, std::vector<RowStat>& stats) {
    ImplicitLocOpBuilder& b = nest_.b;
    const int first = static_cast<int>(stats.size());
    auto read = [this](Value operand) -> RowElement {
      return [this, operand](Value) { return nest_.ext(value(operand, *current_)); };
    };
    if (isa<dialect::SumOp, dialect::MeanOp>(op)) {
      RowStat stat;
      stat.term = [read = read(op->getOperand(0))](Value j, ArrayRef<Value>) { return read(j); };
      stat.combine = [&b](Value s, Value v) -> Value { return b.create<arith::AddFOp>(s, v); };
      const bool mean = isa<dialect::MeanOp>(op);
      Type element = cast<ShapedType>(op->getResult(0).getType()).getElementType();
      // The reduction's result is the statistic, rounded as it alone
      // rounds it.
      stat.finish = [this, &b, mean, element](Value total) {
        Value v = mean ? b.create<arith::DivFOp>(total, nest_.f64(static_cast<double>(n_)))
                             .getResult()
                       : total;
        return nest_.round_to(v, element);
      };
      statistic_[op->getResult(0)] = first;
      stats.push_back(std::move(stat));
      return;
    }
    std::optional<RowForm> form;
    if (auto softmax = dyn_cast<dialect::SoftmaxOp>(op))
      form = softmax_form(nest_, /*log=*/false, read(op->getOperand(0)));
    else if (isa<dialect::LogSoftmaxOp>(op))
      form = softmax_form(nest_, /*log=*/true, read(op->getOperand(0)));
    else if (auto norm = dyn_cast<dialect::LayerNormOp>(op))
      form = norm_form(nest_, n_, norm.getEps().convertToDouble(), /*rms=*/false,
                       read(norm.getInput()), norm.getWeight() ? read(norm.getWeight()) : nullptr,
                       norm.getBias() ? read(norm.getBias()) : nullptr);
    else if (auto norm = dyn_cast<dialect::RmsNormOp>(op))
      form = norm_form(nest_, n_, norm.getEps().convertToDouble(), /*rms=*/true,
                       read(norm.getInput()), norm.getWeight() ? read(norm.getWeight()) : nullptr,
                       nullptr);
    if (!form) return;
    // A row op's statistics read the ones before them in the form: the
    // slice of the group's from its first.
    const int count = static_cast<int>(form->stats.size());
    for (RowStat& stat : form->stats)
      stat.term = [first, term = std::move(stat.term)](Value j, ArrayRef<Value> all) {
        return term(j, all.drop_front(first));
      };
    row_ops_[op->getResult(0)] = {std::move(form->element), first, count};
    for (RowStat& stat : form->stats) stats.push_back(std::move(stat));
  }

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
    if (auto row_op = row_ops_.find(v); row_op != row_ops_.end()) {
      const RowOpValue& r = row_op->second;
      if (static_cast<size_t>(r.first + r.count) > scope.stats.size() || !scope.j)
        return fail(v, "a row op's element read before its statistics are reduced");
      Value element = r.element(scope.j, scope.stats.slice(r.first, r.count));
      return nest_.round_to(element, cast<ShapedType>(v.getType()).getElementType());
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
    const bool along_row = shape_of(v).empty() ? false : shape_of(v).back() == n_;
    if (along_row && !scope.j) return fail(v, "a per-row value computed from a whole row");
    ImplicitLocOpBuilder& b = nest_.b;
    switch (*c) {
      case RowClass::wide: return nest_.load(flat, b.create<arith::AddIOp>(scope.base, scope.j));
      case RowClass::per_row: return nest_.load(flat, scope.row);
      case RowClass::column: return nest_.load(flat, scope.j);
      case RowClass::scalar: return nest_.load(flat, nest_.index(0));
      case RowClass::strided: break;
    }
    // The row's batch coordinates at the value's own strides, 0 along the
    // dims it broadcasts over.
    ArrayRef<int64_t> batch = ArrayRef<int64_t>(wide_).drop_back();
    SmallVector<int64_t> padded(wide_.size() - shape_of(v).size(), 1);
    llvm::append_range(padded, shape_of(v));
    std::vector<int64_t> strides = strides_of(padded);
    strides.pop_back();
    for (size_t k = 0; k < batch.size(); ++k)
      if (padded[k] == 1) strides[k] = 0;
    Value at = nest_.strided(scope.row, batch, strides, 0);
    if (along_row) at = b.create<arith::AddIOp>(at, scope.j);
    return nest_.load(flat, at);
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
  /// A reduction's result: its statistic.
  llvm::DenseMap<Value, int> statistic_;
  /// A row op's result: its element, from its statistics.
  struct RowOpValue {
    std::function<Value(Value, ArrayRef<Value>)> element;
    int first = 0, count = 0;
  };
  llvm::DenseMap<Value, RowOpValue> row_ops_;
  /// The scope of the phase being built, for the row ops' element reads.
  Scope* current_ = nullptr;
  absl::Status status_ = absl::OkStatus();
};

} // namespace

absl::Status build_row_group_loops(Operation* group, func::FuncOp func) {
  return RowGroupBuilder(group, func).build();
}

} // namespace mstep::cuda
