// FuseElementwise: the mstep-fuse-elementwise pass (see Passes.td). It
// partitions the fusible ops of each block of a function into producer-
// consumer groups that cannot form a cycle (FusionPlanner), outlines each
// group into one mstep.fusion op (outlineGroup) and restores a topological
// order (sortBlockStably).
#include <algorithm>
#include <functional>
#include <limits>
#include <queue>
#include <vector>

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "lib/passes/CustomScalarForms.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/passes/Passes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace mstep::passes {
#define GEN_PASS_DEF_FUSEELEMENTWISE
#include "mstep/passes/Passes.h.inc"

namespace {

using llvm::SmallVector;
using llvm::SmallVectorImpl;
using mlir::Block;
using mlir::Operation;
using mlir::Value;

/// True for the ops the planner puts in groups: every fusible op except
/// mstep.constant, which is cloned into each region that reads it instead.
bool isGroupable(Operation* op) {
  return op->hasTrait<dialect::OpTrait::Fusible>() && !llvm::isa<dialect::ConstantOp>(op);
}

/// True for values a region clones instead of taking as an input.
bool isClonedConstant(Value value) { return value.getDefiningOp<dialect::ConstantOp>() != nullptr; }

/// Calls `fn` on every value `op` reads: its operands and, for an op with
/// regions that are not isolated from above, the operands of its nested ops
/// (values defined inside `op` come along; callers ignore them because they
/// are not defined in the block).
template <typename Fn>
void forEachReadValue(Operation* op, Fn&& fn) {
  for (Value operand : op->getOperands()) fn(operand);
  if (op->getNumRegions() == 0 || op->hasTrait<mlir::OpTrait::IsIsolatedFromAbove>()) return;
  op->walk([&](Operation* nested) {
    if (nested != op)
      for (Value operand : nested->getOperands()) fn(operand);
  });
}

/// A position in an order of the block's nodes (fusion groups and the other
/// ops) that the planner keeps topological. A group runs right after the last
/// value it reads becomes ready, op `anchor` (-1: the start of the block);
/// `depth` orders groups that wait on the same op. Any other op keeps its
/// program position: (its index, 0).
struct Place {
  int anchor = -1;
  unsigned depth = 0;

  auto operator<=>(const Place&) const = default;
  /// Right after this place.
  Place next() const { return {anchor, depth + 1}; }
  /// After every place.
  static Place end() { return {std::numeric_limits<int>::max(), 0}; }
};

/// Partitions the groupable ops of one block into fusion groups.
///
/// 1. Visit the ops in program order. A groupable op X starts a group of its
///    own.
/// 2. For each operand of X in order, X's group tries to absorb the group
///    that produced it. The union is accepted when
///    (a) it reads at most `maxInputs` distinct values from outside itself
///        (constants do not count: they are cloned in), and
///    (b) it has a place: right after the last of its inputs is ready, but
///        before every op and group that reads one of its results.
/// 3. Once X's group is final it gets its place, and X is recorded as a
///    reader of each other group it reads, in that group's `readers` heap.
///
/// Every edge between nodes thus goes from a smaller place to a larger one,
/// so the graph of groups and ops stays acyclic: outlining can never create a
/// cycle, including through multi-output groups whose ops do not depend on
/// each other (checking each group's convexity alone would miss those).
/// Places only ever grow, so a reader recorded with an old place is
/// refreshed lazily when it reaches the top of a heap. Each op is absorbed
/// once and only whole groups merge (the smaller into the larger), so no op
/// is duplicated and the planner runs in O(n log^2 n).
///
/// The rule keeps non-fused ops in program order: a merge that would need an
/// op that reads the group moved after another op is given up.
class FusionPlanner {
 public:
  FusionPlanner(Block& block, unsigned maxInputs) : block(block), maxInputs(maxInputs) {}

  /// Returns the groups ordered by their first op, each group's ops in
  /// program order. Fails, with an error on the op, when one op alone reads
  /// more than `maxInputs` values.
  mlir::FailureOr<std::vector<SmallVector<Operation*>>> plan();

 private:
  using Reader = std::pair<Place, unsigned>;  // (place when recorded, op index)

  struct Group {
    SmallVector<unsigned> ops;     // op indices, in no particular order
    SmallVector<Value, 8> inputs;  // distinct values read from outside
    Place place;                   // valid once `placed`
    bool placed = false;           // false while it is the visited op, alone
    std::vector<Reader> readers;   // min-heap of ops outside that read it
  };

  /// The index of the op in the block that defines `value`, or -1.
  int producerIndex(Value value) const;
  /// The group (its root index) that holds op `index`, or -1.
  int groupOf(int index);
  /// The node op `index` belongs to: its group's root, or itself.
  int nodeOf(int index) {
    const int root = groupOf(index);
    return root >= 0 ? root : index;
  }
  Place placeOf(int node) { return groupOf(node) == node ? groups[node].place : Place{node, 0}; }
  /// The place right after all of `inputs` are ready.
  Place readyPlace(llvm::ArrayRef<Value> inputs);
  /// The smallest place of a node, other than `other`, that reads group
  /// `root`; the heap entries of readers in `other` are moved to `setAside`.
  Place firstReaderPlace(int root, int other, SmallVectorImpl<Reader>& setAside);
  static void pushReader(Group& group, Reader reader) {
    group.readers.push_back(reader);
    std::push_heap(group.readers.begin(), group.readers.end(), std::greater<>());
  }
  /// Merges group `other` into group `root` when rules (a) and (b) allow;
  /// returns the root of the result.
  int tryMerge(int root, int other);

  Block& block;
  unsigned maxInputs;
  std::vector<Operation*> ops;
  llvm::DenseMap<Operation*, unsigned> indexOf;
  std::vector<int> parent;  // union-find forest over op indices; -1 outside groups
  std::vector<Group> groups;
};

int FusionPlanner::producerIndex(Value value) const {
  Operation* producer = value.getDefiningOp();
  if (!producer || producer->getBlock() != &block) return -1;
  return indexOf.lookup(producer);
}

int FusionPlanner::groupOf(int index) {
  if (index < 0 || parent[index] < 0) return -1;
  while (parent[index] != index) {
    parent[index] = parent[parent[index]];  // path halving
    index = parent[index];
  }
  return index;
}

Place FusionPlanner::readyPlace(llvm::ArrayRef<Value> inputs) {
  Place last;
  for (Value input : inputs) {
    const int producer = producerIndex(input);
    if (producer >= 0) last = std::max(last, placeOf(nodeOf(producer)));
  }
  return last.next();
}

Place FusionPlanner::firstReaderPlace(int root, int other, SmallVectorImpl<Reader>& setAside) {
  std::vector<Reader>& heap = groups[root].readers;
  auto pop = [&] {
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    heap.pop_back();
  };
  while (!heap.empty()) {
    const auto [recorded, reader] = heap.front();
    const int node = nodeOf(reader);
    if (node == root) {  // merged in since: no longer a reader, for good
      pop();
      continue;
    }
    if (node == other) {
      setAside.push_back(heap.front());
      pop();
      continue;
    }
    const Place current = placeOf(node);
    if (recorded == current) return current;
    pop();  // its group has moved on (places only grow): re-file it
    pushReader(groups[root], {current, reader});
  }
  return Place::end();
}

int FusionPlanner::tryMerge(int root, int other) {
  Group& a = groups[root];
  Group& b = groups[other];
  // (a) The union's inputs: each side's inputs not produced by the other side.
  auto isDefinedIn = [&](Value v, int group) { return groupOf(producerIndex(v)) == group; };
  SmallVector<Value, 8> inputs;
  for (Value v : a.inputs)
    if (!isDefinedIn(v, other)) inputs.push_back(v);
  for (Value v : b.inputs)
    if (!isDefinedIn(v, root) && !llvm::is_contained(inputs, v)) inputs.push_back(v);
  if (inputs.size() > maxInputs) return root;
  // (b) A place after the inputs and before the readers. It never goes below
  // a place already published, so the readers' heaps stay valid.
  Place place = readyPlace(inputs);
  if (a.placed) place = std::max(place, a.place);
  if (b.placed) place = std::max(place, b.place);
  SmallVector<Reader> aReadersInB, bReadersInA;  // not readers of the union
  const Place firstReader = std::min(firstReaderPlace(root, other, aReadersInB),
                                     firstReaderPlace(other, root, bReadersInA));
  for (const Reader& reader : aReadersInB) pushReader(a, reader);
  for (const Reader& reader : bReadersInA) pushReader(b, reader);
  if (!(place < firstReader)) return root;
  // Merge the smaller group into the larger one.
  const bool keepRoot = a.ops.size() >= b.ops.size();
  Group& kept = keepRoot ? a : b;
  Group& absorbed = keepRoot ? b : a;
  kept.ops.append(absorbed.ops.begin(), absorbed.ops.end());
  for (const Reader& reader : absorbed.readers) pushReader(kept, reader);
  kept.inputs = std::move(inputs);
  kept.place = place;
  kept.placed = a.placed || b.placed;
  absorbed = Group();
  const int newRoot = keepRoot ? root : other;
  parent[keepRoot ? other : root] = newRoot;
  return newRoot;
}

mlir::FailureOr<std::vector<SmallVector<Operation*>>> FusionPlanner::plan() {
  for (Operation& op : block) {
    indexOf[&op] = ops.size();
    ops.push_back(&op);
  }
  const size_t n = ops.size();
  parent.assign(n, -1);
  groups.resize(n);

  for (unsigned i = 0; i < n; ++i) {
    Operation* op = ops[i];
    if (isGroupable(op)) {
      // 1. A group of its own.
      parent[i] = i;
      Group& own = groups[i];
      own.ops = {i};
      for (Value operand : op->getOperands())
        if (!isClonedConstant(operand) && !llvm::is_contained(own.inputs, operand))
          own.inputs.push_back(operand);
      if (own.inputs.size() > maxInputs)
        return op->emitError() << "'" << op->getName() << "' reads " << own.inputs.size()
                               << " tensors but mstep-fuse-elementwise was given max-inputs="
                               << maxInputs << "; every fusible op needs a region of its own, "
                               << "so raise max-inputs to at least " << own.inputs.size();
      // 2. Absorb the producers' groups, in operand order.
      int root = i;
      for (Value operand : op->getOperands()) {
        const int producerGroup = groupOf(producerIndex(operand));
        if (producerGroup >= 0 && producerGroup != root) root = tryMerge(root, producerGroup);
      }
      // 3. Its place (already set if it merged; a lone op's inputs fix it).
      Group& final = groups[root];
      if (!final.placed) final.place = readyPlace(final.inputs);
      final.placed = true;
    }
    // 3. Record the op as a reader of the other groups it reads.
    const int node = nodeOf(i);
    forEachReadValue(op, [&](Value read) {
      const int producerGroup = groupOf(producerIndex(read));
      if (producerGroup < 0 || producerGroup == node) return;
      pushReader(groups[producerGroup], {placeOf(node), i});
    });
  }

  // Collect the groups, ordered by first op, each in program order.
  std::vector<SmallVector<Operation*>> result;
  for (unsigned i = 0; i < n; ++i) {
    if (groupOf(i) != static_cast<int>(i)) continue;
    llvm::sort(groups[i].ops);
    SmallVector<Operation*>& members = result.emplace_back();
    for (unsigned index : groups[i].ops) members.push_back(ops[index]);
  }
  llvm::sort(result, [&](const auto& x, const auto& y) {
    return indexOf.lookup(x.front()) < indexOf.lookup(y.front());
  });
  return result;
}

/// Replaces the ops of one group (in program order, from a FusionPlanner) by
/// an mstep.fusion placed where the last of them was. The fusion's inputs
/// are the distinct non-constant values the group reads from outside, in
/// order of first use; constants are cloned into the body; its results are
/// the values used outside the group, in program order. Adds the constants
/// it cloned to `clonedConstants`.
void outlineGroup(Block& block, llvm::ArrayRef<Operation*> members,
                  llvm::SetVector<Operation*>& clonedConstants) {
  llvm::SmallPtrSet<Operation*, 16> memberSet(members.begin(), members.end());
  auto isOutside = [&](mlir::OpOperand& use) {
    return !memberSet.contains(block.findAncestorOpInBlock(*use.getOwner()));
  };
  llvm::SetVector<Value> inputs;
  llvm::SetVector<Operation*> constants;
  SmallVector<Value> yielded;
  SmallVector<mlir::Location> locations;
  for (Operation* op : members) {
    locations.push_back(op->getLoc());
    for (Value operand : op->getOperands()) {
      if (memberSet.contains(operand.getDefiningOp())) continue;
      if (isClonedConstant(operand))
        constants.insert(operand.getDefiningOp());
      else
        inputs.insert(operand);
    }
    for (Value result : op->getResults())
      if (llvm::any_of(result.getUses(), isOutside)) yielded.push_back(result);
  }

  mlir::OpBuilder builder(members.back());
  mlir::MLIRContext* context = builder.getContext();
  auto fusion = builder.create<dialect::FusionOp>(mlir::FusedLoc::get(context, locations),
                                                  mlir::ValueRange(yielded).getTypes(),
                                                  inputs.getArrayRef());
  SmallVector<mlir::Location> inputLocations;
  for (Value input : inputs) inputLocations.push_back(input.getLoc());
  Block* body = builder.createBlock(&fusion.getBody(), {},
                                    mlir::ValueRange(inputs.getArrayRef()).getTypes(),
                                    inputLocations);
  mlir::IRMapping mapping;
  mapping.map(inputs.getArrayRef(), body->getArguments());
  for (Operation* constant : constants) builder.clone(*constant, mapping);

  for (auto [value, result] : llvm::zip_equal(yielded, fusion.getResults()))
    value.replaceUsesWithIf(result, isOutside);
  for (Operation* op : members) {
    op->moveBefore(body, body->end());
    for (mlir::OpOperand& operand : op->getOpOperands())
      if (Value mapped = mapping.lookupOrNull(operand.get())) operand.set(mapped);
  }
  builder.setInsertionPointToEnd(body);
  builder.create<dialect::YieldOp>(fusion.getLoc(), yielded);
  clonedConstants.insert(constants.begin(), constants.end());
}

/// Reorders the ops of `block` (not its terminator) so that each comes after
/// the ops whose results it reads, keeping the current order wherever it
/// already is so: Kahn's algorithm, always emitting the ready op that comes
/// first now. O(E log N). mlir::sortTopologically gives the same order but
/// rescans the rest of the block once per op it has to defer, which took
/// 25 ms on a 7800-op training graph.
void sortBlockStably(Block& block) {
  std::vector<Operation*> ops;
  llvm::DenseMap<Operation*, unsigned> position;
  for (Operation& op : block.without_terminator()) {
    position[&op] = ops.size();
    ops.push_back(&op);
  }
  std::vector<SmallVector<unsigned, 4>> readers(ops.size());
  std::vector<unsigned> unmetReads(ops.size(), 0);
  for (unsigned i = 0; i < ops.size(); ++i)
    forEachReadValue(ops[i], [&](Value read) {
      Operation* producer = read.getDefiningOp();
      if (!producer || producer->getBlock() != &block || producer == ops[i]) return;
      readers[position.lookup(producer)].push_back(i);
      ++unmetReads[i];
    });
  std::priority_queue<unsigned, std::vector<unsigned>, std::greater<>> ready;
  for (unsigned i = 0; i < ops.size(); ++i)
    if (unmetReads[i] == 0) ready.push(i);
  Operation* insertionPoint = block.mightHaveTerminator() ? block.getTerminator() : nullptr;
  auto moveToEnd = [&](Operation* op) {
    if (insertionPoint)
      op->moveBefore(insertionPoint);
    else
      op->moveBefore(&block, block.end());
  };
  while (!ready.empty()) {
    const unsigned next = ready.top();
    ready.pop();
    moveToEnd(ops[next]);
    for (unsigned reader : readers[next])
      if (--unmetReads[reader] == 0) ready.push(reader);
  }
}

struct FuseElementwisePass : impl::FuseElementwiseBase<FuseElementwisePass> {
  using FuseElementwiseBase::FuseElementwiseBase;

  void runOnOperation() override {
    for (Block& block : getOperation().getBody())
      if (mlir::failed(fuseBlock(block))) return signalPassFailure();
  }

  mlir::LogicalResult fuseBlock(Block& block) {
    // Custom ops with a scalar form become the mstep ops of the form, which
    // then fuse like any others.
    if (customScalarForms) numCustomExpanded += expandCustomScalarForms(block);
    // Dead fusible ops (all pure) would make regions with nothing to yield.
    for (Operation& op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (op.hasTrait<dialect::OpTrait::Fusible>() && mlir::isOpTriviallyDead(&op)) op.erase();

    FusionPlanner planner(block, maxInputs);
    mlir::FailureOr<std::vector<SmallVector<Operation*>>> groups = planner.plan();
    if (mlir::failed(groups)) return mlir::failure();
    if (groups->empty()) return mlir::success();

    llvm::SetVector<Operation*> clonedConstants;
    for (const SmallVector<Operation*>& members : *groups) {
      outlineGroup(block, members, clonedConstants);
      numFusedOps += members.size();
      ++numFusions;
    }
    // A fusion sits where its last op was; users of its results that came
    // earlier move after it. Stable, so the order is otherwise kept.
    sortBlockStably(block);
    for (Operation* constant : clonedConstants)
      if (constant->use_empty()) constant->erase();
    return mlir::success();
  }
};

}  // namespace
}  // namespace mstep::passes
