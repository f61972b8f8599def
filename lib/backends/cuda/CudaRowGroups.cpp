// Row groups: see CudaRowGroups.h.
#include "lib/backends/cuda/CudaRowGroups.h"

#include <algorithm>

#include "lib/backends/cuda/CudaKernelGen.h"
#include "lib/backends/cuda/CudaOpGroups.h"
#include "lib/backends/cuda/CudaViews.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mstep/ir/dialect/MstepOps.h"

namespace mstep::cuda {

namespace {

using namespace mlir;

/// The most statistics (reductions) one group's kernel keeps: each is a
/// block-sized f64 buffer in shared memory.
constexpr size_t kMaxStatistics = 8;

ArrayRef<int64_t> shape_of(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type ? type.getShape() : ArrayRef<int64_t>();
}

bool static_tensor(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return type && type.hasStaticShape();
}

/// A sum or mean over the last dim, keepdim, of a float tensor of rank 2
/// or more: the geometry it seeds (its input's shape), or nullopt.
std::optional<SmallVector<int64_t>> reduction_geometry(Operation* op) {
  ArrayRef<int64_t> dims;
  bool keepdim = false;
  if (auto sum = dyn_cast<dialect::SumOp>(op))
    dims = sum.getDims(), keepdim = sum.getKeepdim();
  else if (auto mean = dyn_cast<dialect::MeanOp>(op))
    dims = mean.getDims(), keepdim = mean.getKeepdim();
  else
    return std::nullopt;
  Value input = op->getOperand(0);
  auto type = dyn_cast<RankedTensorType>(input.getType());
  if (!keepdim || !type || !type.hasStaticShape() || type.getRank() < 2 ||
      !isa<FloatType>(type.getElementType()) || dims.size() != 1 || dims[0] != type.getRank() - 1)
    return std::nullopt;
  return SmallVector<int64_t>(type.getShape());
}

/// softmax or log_softmax over the last dim, or layer_norm or rms_norm
/// over it (their weight and bias [n]), of a float tensor of rank 2 or
/// more: the geometry it seeds (its input's shape), or nullopt.
std::optional<SmallVector<int64_t>> row_op_geometry(Operation* op) {
  if (!isa<dialect::SoftmaxOp, dialect::LogSoftmaxOp, dialect::LayerNormOp, dialect::RmsNormOp>(op))
    return std::nullopt;
  auto type = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  if (!type || !type.hasStaticShape() || type.getRank() < 2 ||
      !isa<FloatType>(type.getElementType()))
    return std::nullopt;
  const int64_t last = type.getRank() - 1;
  int64_t along = -1;
  if (auto softmax = dyn_cast<dialect::SoftmaxOp>(op)) along = static_cast<int64_t>(softmax.getDim());
  if (auto log = dyn_cast<dialect::LogSoftmaxOp>(op)) along = static_cast<int64_t>(log.getDim());
  if (auto norm = dyn_cast<dialect::LayerNormOp>(op))
    along = norm.getNormalizedNdim() == 1 ? last : -1;
  if (auto norm = dyn_cast<dialect::RmsNormOp>(op))
    along = norm.getNormalizedNdim() == 1 ? last : -1;
  if (along != last) return std::nullopt;
  // The weight and bias of a norm: [n], the row's columns.
  for (Value operand : op->getOperands().drop_front())
    if (shape_of(operand) != type.getShape().take_back()) return std::nullopt;
  return SmallVector<int64_t>(type.getShape());
}

}  // namespace

size_t row_statistics(Operation* op) {
  if (reduction_geometry(op)) return 1;
  if (!row_op_geometry(op)) return 0;
  return isa<dialect::RmsNormOp>(op) ? 1 : 2;
}

namespace {

/// The geometry `op` seeds a group with: a reduction's or a row op's.
std::optional<SmallVector<int64_t>> seed_geometry(Operation* op) {
  if (std::optional<SmallVector<int64_t>> geometry = reduction_geometry(op)) return geometry;
  return row_op_geometry(op);
}

/// Whether elementwise `op` (a fusion or a standalone op with a scalar
/// form) fits W: every value it reads, makes or holds broadcasts to W,
/// and its results are wide or per-row.
bool is_elementwise_member(Operation* op, ArrayRef<int64_t> wide) {
  auto fits = [&](Value value) { return static_tensor(value) && row_class(shape_of(value), wide); };
  auto fits_as_result = [&](Value value) {
    if (!static_tensor(value)) return false;
    std::optional<RowClass> c = row_class(shape_of(value), wide);
    return c == RowClass::wide || c == RowClass::per_row;
  };
  return elementwise_over(op, fits, fits_as_result);
}

/// The groups of one step while they grow.
class Grouping {
 public:
  Grouping(func::FuncOp step, const CudaViews& views, const CudaCodegenOptions& options)
      : body_(step.getBody().front()), views_(views), options_(options) {
    for (Operation& op : body_) position_[&op] = static_cast<int64_t>(position_.size());
  }

  /// Seeds a group per reduction, grows them to a fixpoint, and returns
  /// those of two ops or more, each in program order.
  std::vector<std::pair<SmallVector<int64_t>, std::vector<Operation*>>> find() {
    for (Operation& op : body_) {
      std::optional<SmallVector<int64_t>> geometry = seed_geometry(&op);
      if (!geometry || !free(&op) || geometry->back() < options_.block_row_min) continue;
      group_of_[&op] = static_cast<int>(groups_.size());
      groups_.push_back({*geometry, {&op}, row_statistics(&op), true});
    }
    // Consumers and merges first, then producers: a producer taken early
    // can tie a group to an earlier part of the step and keep it from the
    // group it belongs with (layer_norm's backward recomputes its input's
    // statistics: their group must not take the forward's residual add).
    for (bool producers : {false, true})
      for (bool changed = true; changed;) {
        changed = false;
        for (size_t g = 0; g < groups_.size(); ++g)
          if (groups_[g].alive) changed |= grow(static_cast<int>(g), producers);
      }
    std::vector<std::pair<SmallVector<int64_t>, std::vector<Operation*>>> found;
    for (Group& group : groups_) {
      if (!group.alive || group.members.size() < 2) continue;
      std::sort(group.members.begin(), group.members.end(),
                [&](Operation* a, Operation* b) { return position_[a] < position_[b]; });
      found.push_back({group.wide, group.members});
    }
    return found;
  }

 private:
  struct Group {
    SmallVector<int64_t> wide;
    std::vector<Operation*> members;
    size_t statistics = 0;
    bool alive = false;
  };

  bool free(Operation* op) const { return may_join_op_group(op, body_, views_); }

  /// The top-level op holding `op`.
  Operation* top(Operation* op) const { return body_.findAncestorOpInBlock(*op); }

  /// The ops next to group g's members: their results' users, and with
  /// `producers` their operands' producers.
  std::vector<Operation*> neighbours(int g, bool producers) const {
    std::vector<Operation*> next;
    for (Operation* member : groups_[g].members) {
      for (Value operand : member->getOperands())
        if (Operation* producer = operand.getDefiningOp();
            producers && producer && producer->getBlock() == &body_)
          next.push_back(producer);
      for (Value result : member->getResults())
        for (Operation* user : result.getUsers())
          if (Operation* outer = top(user)) next.push_back(outer);
    }
    return next;
  }

  /// Whether `set` is convex: no path from a member through ops outside
  /// the set back to a member (such a path ends before the last member).
  bool convex(const llvm::DenseSet<Operation*>& set) const {
    int64_t last = 0;
    for (Operation* op : set) last = std::max(last, position_.lookup(op));
    llvm::DenseSet<Operation*> seen;
    std::vector<Operation*> work;
    for (Operation* op : set) work.push_back(op);
    while (!work.empty()) {
      Operation* op = work.back();
      work.pop_back();
      const bool outside = !set.contains(op);
      for (Value result : op->getResults())
        for (Operation* user : result.getUsers()) {
          Operation* outer = top(user);
          if (!outer) continue;
          if (set.contains(outer)) {
            if (outside) return false;  // left the set and came back
            continue;
          }
          if (position_.lookup(outer) <= last && seen.insert(outer).second) work.push_back(outer);
        }
    }
    return true;
  }

  /// One round of growth of group g: neighbours that fit join it, and
  /// neighbouring groups on the same rows merge into it, where the union
  /// stays convex. Whether anything changed.
  bool grow(int g, bool producers) {
    bool changed = false;
    for (Operation* next : neighbours(g, producers)) {
      Group& group = groups_[g];
      auto it = group_of_.find(next);
      if (it != group_of_.end() && it->second == g) continue;
      llvm::DenseSet<Operation*> joined(group.members.begin(), group.members.end());
      if (it != group_of_.end()) {
        Group& other = groups_[it->second];
        if (other.wide != group.wide || group.statistics + other.statistics > kMaxStatistics)
          continue;
        joined.insert(other.members.begin(), other.members.end());
        if (!convex(joined)) continue;
        for (Operation* member : other.members) group_of_[member] = g;
        group.members.insert(group.members.end(), other.members.begin(), other.members.end());
        group.statistics += other.statistics;
        other.members.clear();
        other.alive = false;
        changed = true;
        continue;
      }
      if (!free(next) || !is_elementwise_member(next, group.wide)) continue;
      joined.insert(next);
      if (!convex(joined)) continue;
      group_of_[next] = g;
      group.members.push_back(next);
      changed = true;
    }
    return changed;
  }

  Block& body_;
  const CudaViews& views_;
  const CudaCodegenOptions& options_;
  llvm::DenseMap<Operation*, int64_t> position_;
  llvm::DenseMap<Operation*, int> group_of_;
  std::vector<Group> groups_;
};

} // namespace

std::optional<RowClass> row_class(ArrayRef<int64_t> shape, ArrayRef<int64_t> wide) {
  if (shape.size() > wide.size() || wide.empty()) return std::nullopt;
  SmallVector<int64_t> padded(wide.size() - shape.size(), 1);
  llvm::append_range(padded, shape);
  for (auto [d, w] : llvm::zip(padded, wide))
    if (d != w && d != 1) return std::nullopt;
  ArrayRef<int64_t> batch = ArrayRef<int64_t>(padded).drop_back();
  const bool ones = llvm::all_of(batch, [](int64_t d) { return d == 1; });
  const int64_t last = padded.back();
  if (ArrayRef<int64_t>(padded) == wide) return RowClass::wide;
  if (last == 1 && batch == wide.drop_back()) return RowClass::per_row;
  if (ones && last == wide.back()) return RowClass::column;
  if (ones && last == 1) return RowClass::scalar;
  return RowClass::strided;
}

int group_rows(func::FuncOp step, const CudaViews& views, const CudaCodegenOptions& options) {
  if (options.row_reduction != CudaRowReduction::fused) return 0;
  step.getContext()->getOrLoadDialect<scf::SCFDialect>();
  Grouping grouping(step, views, options);
  int wrapped = 0;
  for (auto& [wide, members] : grouping.find())
    wrapped += wrap_op_group(step.getBody().front(), kRowGroupAttr,
                             OpBuilder(step).getDenseI64ArrayAttr(wide), members)
                   ? 1
                   : 0;
  return wrapped;
}

bool is_row_group(Operation* op) {
  return isa<scf::ExecuteRegionOp>(op) && op->hasAttr(kRowGroupAttr);
}

SmallVector<int64_t> row_group_shape(Operation* group) {
  return SmallVector<int64_t>(cast<DenseI64ArrayAttr>(group->getAttr(kRowGroupAttr)).asArrayRef());
}

} // namespace mstep::cuda
