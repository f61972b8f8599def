// plan_memory (see include/mstep/passes/MemoryPlan.h): liveness-based
// assignment of every op result of a step function to a slot of one arena,
// with in-place reuse and donated arguments; verify_memory_plan, the
// independent checker the pass runs on every plan.
#include "mstep/passes/MemoryPlan.h"

#include <algorithm>
#include <numeric>

#include "lib/passes/CustomScalarForms.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

namespace mstep::passes {

using mlir::failure;
using mlir::LogicalResult;
using mlir::Operation;
using mlir::OpResult;
using mlir::success;
using mlir::Value;

const PlannedValue* MemoryPlan::find(Value value) const {
  for (const PlannedValue& planned : values)
    if (planned.value == value) return &planned;
  return nullptr;
}

namespace {

/// Bytes of a statically shaped ranked tensor of an integer or float
/// element type (i1 takes one byte), or failure for any other type.
mlir::FailureOr<int64_t> tensorBytes(mlir::Type type) {
  auto tensor = llvm::dyn_cast<mlir::RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape() || !tensor.getElementType().isIntOrFloat())
    return failure();
  int64_t elementBytes = llvm::divideCeil(tensor.getElementType().getIntOrFloatBitWidth(), 8);
  return tensor.getNumElements() * elementBytes;
}

int64_t alignUp(int64_t bytes, int64_t alignment) {
  return static_cast<int64_t>(llvm::alignTo(bytes, alignment));
}

/// Whether `op` may write `result` over the buffer of its operand
/// `operandNumber` while it runs: each element of the result depends only
/// on the operand's element at the same position, so a kernel reads that
/// element before it writes it. True for
/// - the positional pairs of `mstep.multi_tensor_update` (new_params[i]
///   over params[i], new_states[j] over states[j], new_steps[k] over
///   steps[k]);
/// - elementwise ops (`Fusible`, `Elementwise`) and `mstep.fusion`, when the
///   operand has the result's shape (a broadcast operand is read at many
///   positions);
/// - `mstep.custom`, for the (output, input) pairs its registered op
///   declares it may alias (CustomOpSchema::aliases: its kernels are
///   written to run in place), when the two have one type.
/// Byte sizes are compared by the caller.
bool mayWriteResultOver(Operation* op, OpResult result, unsigned operandNumber) {
  if (auto call = llvm::dyn_cast<dialect::CustomOp>(op)) {
    std::shared_ptr<const CustomOp> registered = findRegisteredCustomOp(call);
    if (!registered || result.getType() != op->getOperand(operandNumber).getType()) return false;
    return llvm::any_of(registered->schema.aliases, [&](const CustomAlias& alias) {
      return alias.output == static_cast<int>(result.getResultNumber()) &&
             alias.input == static_cast<int>(operandNumber);
    });
  }
  if (auto update = llvm::dyn_cast<dialect::MultiTensorUpdateOp>(op)) {
    auto isPair = [&](mlir::ResultRange results, mlir::OperandRange operands) {
      for (auto [position, candidate] : llvm::enumerate(results))
        if (candidate == result) return operandNumber == operands.getBeginOperandIndex() + position;
      return false;
    };
    return isPair(update.getNewParams(), update.getParams()) ||
           isPair(update.getNewStates(), update.getStates()) ||
           isPair(update.getNewSteps(), update.getSteps());
  }
  // A reshape keeps the row-major bytes as they are: planned over its
  // dying operand it is free (the cpu backend skips the copy onto itself).
  if (llvm::isa<dialect::ReshapeOp>(op)) return true;
  bool positional = llvm::isa<dialect::FusionOp>(op) || op->hasTrait<dialect::OpTrait::Fusible>() ||
                    op->hasTrait<mlir::OpTrait::Elementwise>();
  if (!positional) return false;
  auto resultType = llvm::cast<mlir::ShapedType>(result.getType());
  auto operandType = llvm::cast<mlir::ShapedType>(op->getOperand(operandNumber).getType());
  return resultType.getShape() == operandType.getShape();
}

/// Whether every use of `value` by `op` is an operand `result` may be
/// written over (a value can feed several operands of one op).
bool mayWriteResultOverValue(Operation* op, OpResult result, Value value) {
  for (mlir::OpOperand& operand : op->getOpOperands())
    if (operand.get() == value && !mayWriteResultOver(op, result, operand.getOperandNumber()))
      return false;
  return true;
}

/// An arena slot: the values that share it have disjoint lifetimes, except
/// at the ops that hand it from a dying operand to a result.
struct Slot {
  int64_t bytes = 0; // aligned
  int64_t first_point = 0;
  int64_t last_point = 0;
  int64_t offset = -1;
};

/// Places `slots` in `order`, each at the best-fitting aligned gap left by
/// the already placed slots whose lifetimes overlap its own (the smallest
/// gap that holds it), or above all of them. Returns the offsets and sets
/// `arena_bytes` to the largest slot end.
std::vector<int64_t> packSlots(const std::vector<Slot>& slots, llvm::ArrayRef<size_t> order,
                               int64_t& arena_bytes) {
  std::vector<int64_t> offsets(slots.size(), -1);
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> taken; // [begin, end) of overlapping slots
  arena_bytes = 0;
  for (size_t id : order) {
    const Slot& slot = slots[id];
    taken.clear();
    for (size_t other : placed)
      if (slots[other].first_point <= slot.last_point &&
          slot.first_point <= slots[other].last_point && slots[other].bytes > 0)
        taken.push_back({offsets[other], offsets[other] + slots[other].bytes});
    llvm::sort(taken);
    int64_t best = -1, bestGap = INT64_MAX, gapBegin = 0;
    for (auto [begin, end] : taken) {
      int64_t gap = begin - gapBegin;
      if (gap >= slot.bytes && gap < bestGap) best = gapBegin, bestGap = gap;
      gapBegin = std::max(gapBegin, end);
    }
    offsets[id] = best >= 0 ? best : gapBegin;
    arena_bytes = std::max(arena_bytes, offsets[id] + slot.bytes);
    placed.push_back(id);
  }
  return offsets;
}

/// The program point (index in `body`) of the top-level op that holds `op`.
int64_t pointOf(const llvm::DenseMap<Operation*, int64_t>& points, mlir::Block& body,
                Operation* op) {
  return points.lookup(body.findAncestorOpInBlock(*op));
}

/// Marks the views `views` names (PlannedValue::view_of, resolved to
/// their roots) and widens each root's lifetime over its views'.
LogicalResult planViews(MemoryPlan& plan, const llvm::DenseMap<Value, size_t>& indexOf,
                        const std::function<std::optional<ViewOf>(OpResult)>& views) {
  std::vector<std::optional<ViewOf>> direct(plan.values.size());
  for (auto [id, planned] : llvm::enumerate(plan.values)) {
    direct[id] = views(planned.value);
    if (!direct[id]) continue;
    if (planned.outside_arena)
      return planned.value.getOwner()->emitError()
             << "plan-memory: result #" << planned.value.getResultNumber()
             << " is returned, so it needs a buffer of its own and cannot be a view";
    auto target = llvm::dyn_cast<OpResult>(direct[id]->value);
    if (target && !indexOf.count(target))
      return planned.value.getOwner()->emitError()
             << "plan-memory: a view of a value that is not a top-level result";
  }
  for (auto [id, planned] : llvm::enumerate(plan.values)) {
    if (!direct[id]) continue;
    // Follow the chain to a value that is no view (at most one step per value).
    Value root = direct[id]->value;
    int64_t offset = direct[id]->offset;
    for (size_t steps = 0;; ++steps) {
      auto result = llvm::dyn_cast<OpResult>(root);
      if (!result || !direct[indexOf.lookup(result)]) break;
      if (steps > plan.values.size())
        return planned.value.getOwner()->emitError() << "plan-memory: views form a cycle";
      const ViewOf& next = *direct[indexOf.lookup(result)];
      root = next.value, offset += next.offset;
    }
    int64_t rootBytes = 0;
    if (auto result = llvm::dyn_cast<OpResult>(root))
      rootBytes = plan.values[indexOf.lookup(result)].bytes;
    else if (mlir::FailureOr<int64_t> bytes = tensorBytes(root.getType()); succeeded(bytes))
      rootBytes = *bytes;
    if (offset < 0 || offset + planned.bytes > rootBytes)
      return planned.value.getOwner()->emitError()
             << "plan-memory: a view of " << planned.bytes << " bytes at offset " << offset
             << " does not fit its root's " << rootBytes << " bytes";
    planned.view_of = root;
    planned.view_offset = offset;
  }
  // The root holds the view's bytes from the first definition to the last use.
  for (PlannedValue& planned : plan.values) {
    auto root = llvm::dyn_cast_or_null<OpResult>(planned.view_of);
    if (!root) continue;
    PlannedValue& owner = plan.values[indexOf.lookup(root)];
    owner.def_point = std::min(owner.def_point, planned.def_point);
    owner.last_use_point = std::max(owner.last_use_point, planned.last_use_point);
  }
  return success();
}

} // namespace

mlir::FailureOr<MemoryPlan> plan_memory(mlir::func::FuncOp func, int64_t alignment) {
  return plan_memory(func, MemoryPlanOptions{.alignment = alignment});
}

mlir::FailureOr<MemoryPlan> plan_memory(mlir::func::FuncOp func, const MemoryPlanOptions& options) {
  const int64_t alignment = options.alignment;
  if (alignment <= 0 || !llvm::isPowerOf2_64(alignment))
    return func.emitError() << "plan-memory: alignment " << alignment
                            << " is not a power of two; pass e.g. alignment=64";
  if (func.isExternal() || !func.getBody().hasOneBlock())
    return func.emitError() << "plan-memory: @" << func.getSymName()
                            << " must have a body of exactly one block";
  mlir::Block& body = func.getBody().front();
  MemoryPlan plan;
  plan.alignment = alignment;

  // 1. Liveness: each top-level op is one program point, in order. A result
  //    lives from its op to its last user (the top-level op holding it);
  //    returned values are used by func.return, the last point.
  llvm::DenseMap<Operation*, int64_t> points;
  for (Operation& op : body) points.try_emplace(&op, static_cast<int64_t>(points.size()));
  llvm::DenseMap<Value, size_t> indexOf;
  for (Operation& op : body) {
    for (OpResult result : op.getResults()) {
      mlir::FailureOr<int64_t> bytes = tensorBytes(result.getType());
      if (failed(bytes))
        return op.emitError() << "plan-memory: result #" << result.getResultNumber() << " of '"
                              << op.getName() << "' has type " << result.getType()
                              << ", which has no static size; every result must be a statically "
                                 "shaped ranked tensor";
      PlannedValue planned;
      planned.value = result;
      planned.bytes = *bytes;
      planned.def_point = planned.last_use_point = points.lookup(&op);
      for (Operation* user : result.getUsers())
        planned.last_use_point = std::max(planned.last_use_point, pointOf(points, body, user));
      indexOf.try_emplace(result, plan.values.size());
      plan.values.push_back(planned);
    }
  }

  // 2. Donated arguments: the result named by an argument's
  //    `mstep.aliased_result` is written into the argument's buffer when
  //    nothing reads the argument after that result's op, and that op reads
  //    it only at positions it may write over. Otherwise the result gets an
  //    arena slot like any returned value (the runtime copies it back).
  auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(body.getTerminator());
  if (ret && !options.returned_in_arena)
    for (Value value : ret.getOperands())
      if (auto result = llvm::dyn_cast<OpResult>(value))
        plan.values[indexOf.lookup(result)].outside_arena = true;
  if (options.views && options.in_place)
    return func.emitError() << "plan-memory: views need in_place off (a view's root cannot be "
                               "written over while the view is read)";
  if (options.views && failed(planViews(plan, indexOf, options.views))) return failure();
  for (mlir::BlockArgument arg : body.getArguments()) {
    if (!ret || !options.in_place) break;
    auto index =
        func.getArgAttrOfType<mlir::IntegerAttr>(arg.getArgNumber(), "mstep.aliased_result");
    if (!index || index.getInt() < 0 || index.getInt() >= ret.getNumOperands()) continue;
    auto result = llvm::dyn_cast<OpResult>(ret.getOperand(index.getInt()));
    if (!result || result.getType() != arg.getType()) continue;
    PlannedValue& planned = plan.values[indexOf.lookup(result)];
    if (planned.aliased_arg >= 0) continue; // returned twice: the first donor wins
    Operation* def = result.getOwner();
    bool argDeadAfterDef = llvm::all_of(arg.getUses(), [&](mlir::OpOperand& use) {
      int64_t point = pointOf(points, body, use.getOwner());
      if (point < planned.def_point) return true;
      return use.getOwner() == def && mayWriteResultOver(def, result, use.getOperandNumber());
    });
    if (!argDeadAfterDef) continue;
    planned.aliased_arg = arg.getArgNumber();
    ++plan.num_aliased_args;
  }

  // 3. Slots, with in-place reuse: a result takes over the slot of an arena
  //    operand that dies at its op, has its byte size, and that the op may
  //    write over (mayWriteResultOver). An op hands each slot to one result.
  std::vector<Slot> slots;
  std::vector<size_t> slotOf(plan.values.size(), SIZE_MAX);
  for (Operation& op : body) {
    llvm::SmallVector<size_t> handedOver;
    for (OpResult result : op.getResults()) {
      size_t id = indexOf.lookup(result);
      PlannedValue& planned = plan.values[id];
      if (planned.aliased_arg >= 0 || planned.outside_arena || planned.view_of) continue;
      for (mlir::OpOperand& operand : op.getOpOperands()) {
        if (!options.in_place) break;
        auto source = llvm::dyn_cast<OpResult>(operand.get());
        if (!source) continue; // an argument: its buffer is not in the arena
        size_t sourceId = indexOf.lookup(source);
        const PlannedValue& dying = plan.values[sourceId];
        size_t slot = slotOf[sourceId];
        if (dying.aliased_arg >= 0 || dying.outside_arena ||
            dying.last_use_point != planned.def_point || dying.bytes != planned.bytes ||
            llvm::is_contained(handedOver, slot) || !mayWriteResultOverValue(&op, result, source))
          continue;
        handedOver.push_back(slot);
        slotOf[id] = slot;
        slots[slot].last_point = planned.last_use_point;
        planned.in_place_operand = operand.getOperandNumber();
        ++plan.num_in_place;
        break;
      }
      if (slotOf[id] != SIZE_MAX) continue;
      slotOf[id] = slots.size();
      slots.push_back(
          {alignUp(planned.bytes, alignment), planned.def_point, planned.last_use_point});
    }
  }

  // 4. The liveness lower bound: the largest sum of the slots live at one
  //    program point (a difference array over the points).
  int64_t numPoints = static_cast<int64_t>(points.size());
  std::vector<int64_t> breadth(numPoints + 1, 0);
  for (const Slot& slot : slots) {
    breadth[slot.first_point] += slot.bytes;
    breadth[slot.last_point + 1] -= slot.bytes;
  }
  std::partial_sum(breadth.begin(), breadth.end(), breadth.begin());
  breadth.pop_back();
  plan.liveness_bound_bytes =
      breadth.empty() ? 0 : *std::max_element(breadth.begin(), breadth.end());

  // 5. Offsets: pack the slots in several greedy orders and keep the
  //    smallest arena (the first on a tie): (a) largest first; (b) by
  //    breadth: program points from the most to the least crowded, each
  //    point's unplaced slots largest first; (c) longest-lived first;
  //    (d) largest bytes x lifetime first.
  auto lifetime = [&](size_t id) { return slots[id].last_point - slots[id].first_point + 1; };
  auto orderBy = [&](auto key) {
    std::vector<size_t> order(slots.size());
    std::iota(order.begin(), order.end(), 0);
    llvm::stable_sort(order, [&](size_t a, size_t b) { return key(a) > key(b); });
    return order;
  };
  std::vector<size_t> bySize = orderBy([&](size_t id) { return slots[id].bytes; });
  std::vector<std::vector<size_t>> liveAt(numPoints);
  for (size_t id : bySize)
    for (int64_t point = slots[id].first_point; point <= slots[id].last_point; ++point)
      liveAt[point].push_back(id);
  std::vector<size_t> crowdedFirst(numPoints);
  std::iota(crowdedFirst.begin(), crowdedFirst.end(), 0);
  llvm::stable_sort(crowdedFirst, [&](size_t a, size_t b) { return breadth[a] > breadth[b]; });
  std::vector<size_t> byBreadth;
  std::vector<bool> queued(slots.size(), false);
  for (size_t point : crowdedFirst)
    for (size_t id : liveAt[point])
      if (!queued[id]) queued[id] = true, byBreadth.push_back(id);
  std::vector<size_t> byLifetime = orderBy(lifetime);
  std::vector<size_t> byArea = orderBy([&](size_t id) { return slots[id].bytes * lifetime(id); });

  std::vector<int64_t> offsets;
  plan.arena_bytes = INT64_MAX;
  for (const std::vector<size_t>* order : {&bySize, &byBreadth, &byLifetime, &byArea}) {
    int64_t arena = 0;
    std::vector<int64_t> candidate = packSlots(slots, *order, arena);
    if (arena < plan.arena_bytes) plan.arena_bytes = arena, offsets = std::move(candidate);
  }

  // 6. Every arena value gets its slot's offset, and a view its root's
  //    (plus its own) when the root is in the arena.
  for (auto [id, planned] : llvm::enumerate(plan.values))
    if (slotOf[id] != SIZE_MAX) planned.arena_offset = offsets[slotOf[id]];
  for (PlannedValue& planned : plan.values) {
    auto root = llvm::dyn_cast_or_null<OpResult>(planned.view_of);
    if (!root) continue;
    const PlannedValue& owner = plan.values[indexOf.lookup(root)];
    if (owner.arena_offset >= 0) planned.arena_offset = owner.arena_offset + planned.view_offset;
  }
  return plan;
}

LogicalResult verify_memory_plan(const MemoryPlan& plan, mlir::func::FuncOp func) {
  auto describe = [](const PlannedValue& planned) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "result #" << planned.value.getResultNumber() << " of '"
       << planned.value.getOwner()->getName() << "' (" << planned.bytes << " bytes at offset "
       << planned.arena_offset << ", live over points " << planned.def_point << ".."
       << planned.last_use_point << ")";
    return text;
  };
  // 1. Each value is in the arena (aligned, inside it) or in a donated
  //    argument that names it; an in-place result shares its operand's slot.
  //    Occupancy is counted in half-points: a value occupies [2 def, 2 last],
  //    except that an operand handing its slot to a result at the point
  //    where it dies stops one half-point earlier.
  mlir::Block& body = func.getBody().front();
  auto ret = llvm::dyn_cast<mlir::func::ReturnOp>(body.getTerminator());
  std::vector<int64_t> occupiedUntil(plan.values.size());
  llvm::DenseMap<Value, size_t> indexOf;
  for (auto [id, planned] : llvm::enumerate(plan.values)) {
    indexOf.try_emplace(planned.value, id);
    occupiedUntil[id] = 2 * planned.last_use_point;
  }
  for (const PlannedValue& planned : plan.values) {
    Operation* op = planned.value.getOwner();
    if (planned.view_of) {
      // A view lives in its root's bytes (the root's lifetime covers it).
      auto root = llvm::dyn_cast<OpResult>(planned.view_of);
      const PlannedValue* owner = root ? plan.find(root) : nullptr;
      const int64_t expected =
          owner && owner->arena_offset >= 0 ? owner->arena_offset + planned.view_offset : -1;
      if (planned.arena_offset != expected || (owner && owner->view_of) ||
          (owner && (owner->def_point > planned.def_point ||
                     owner->last_use_point < planned.last_use_point)))
        return op->emitError() << "memory plan: " << describe(planned)
                               << " is a view outside its root's bytes or lifetime";
      continue;
    }
    if (planned.outside_arena) {
      if (planned.arena_offset >= 0 || planned.aliased_arg >= 0 || !ret ||
          !llvm::is_contained(ret.getOperands(), Value(planned.value)))
        return op->emitError() << "memory plan: " << describe(planned)
                               << " is outside the arena but not a returned value";
      continue;
    }
    if (planned.aliased_arg >= 0) {
      auto index =
          func.getArgAttrOfType<mlir::IntegerAttr>(planned.aliased_arg, "mstep.aliased_result");
      if (planned.arena_offset >= 0 || !ret || !index || index.getInt() < 0 ||
          index.getInt() >= ret.getNumOperands() || ret.getOperand(index.getInt()) != planned.value)
        return op->emitError() << "memory plan: " << describe(planned)
                               << " is written into argument #" << planned.aliased_arg
                               << ", which does not donate its buffer to it";
      continue;
    }
    if (planned.arena_offset < 0 || planned.arena_offset % plan.alignment != 0 ||
        planned.arena_offset + planned.bytes > plan.arena_bytes)
      return op->emitError() << "memory plan: " << describe(planned)
                             << " is not at an offset aligned to " << plan.alignment
                             << " inside the " << plan.arena_bytes << "-byte arena";
    if (planned.in_place_operand < 0) continue;
    auto source = llvm::dyn_cast<OpResult>(op->getOperand(planned.in_place_operand));
    const PlannedValue* dying = source ? &plan.values[indexOf.lookup(source)] : nullptr;
    if (!dying || dying->arena_offset != planned.arena_offset)
      return op->emitError() << "memory plan: " << describe(planned) << " reuses operand #"
                             << planned.in_place_operand << ", which is not at its offset";
    if (dying->last_use_point == planned.def_point)
      occupiedUntil[indexOf.lookup(source)] = 2 * planned.def_point - 1;
  }

  // 2. No two values occupy the arena at the same half-point and overlap in
  //    it: a sweep in order of definition against the values still live.
  std::vector<size_t> order;
  for (auto [id, planned] : llvm::enumerate(plan.values))
    if (planned.aliased_arg < 0 && !planned.outside_arena && !planned.view_of && planned.bytes > 0)
      order.push_back(id);
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return plan.values[a].def_point < plan.values[b].def_point;
  });
  std::vector<size_t> live;
  for (size_t id : order) {
    const PlannedValue& planned = plan.values[id];
    llvm::erase_if(live,
                   [&](size_t other) { return occupiedUntil[other] < 2 * planned.def_point; });
    for (size_t other : live) {
      const PlannedValue& earlier = plan.values[other];
      if (earlier.arena_offset < planned.arena_offset + planned.bytes &&
          planned.arena_offset < earlier.arena_offset + earlier.bytes) {
        mlir::InFlightDiagnostic error = planned.value.getOwner()->emitError()
                                         << "memory plan: " << describe(planned) << " overlaps "
                                         << describe(earlier) << " while both are live";
        error.attachNote(earlier.value.getLoc()) << "the other value is defined here";
        return error;
      }
    }
    live.push_back(id);
  }
  return success();
}

} // namespace mstep::passes
