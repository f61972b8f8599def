// The arena memory plan of one step function: which bytes of one arena
// each intermediate tensor occupies, computed from liveness in program
// order. mstep-plan-memory (lib/passes/PlanMemory.cpp) writes it onto the
// IR; a runtime or a benchmark can call plan_memory() directly.
// Includes MLIR headers: compiler code only.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LogicalResult.h"

namespace mstep::passes {

/// Where one op result lives. A view (`view_of` set, see
/// MemoryPlanOptions::views) has no slot of its own: it is bytes
/// [view_offset, view_offset + bytes) of its root `view_of` (arena_offset is
/// the root's + view_offset when the root is in the arena, else -1).
/// Otherwise exactly one of these holds:
/// - `arena_offset >= 0`: bytes [arena_offset, arena_offset + bytes) of
///   the arena (possibly shared with `in_place_operand`, see below);
/// - `aliased_arg >= 0`: the result is written straight into the buffer of
///   that donated function argument (the argument's `mstep.aliased_result`
///   names this result) and takes no arena space;
/// - `outside_arena`: a returned value planned with
///   MemoryPlanOptions::returned_in_arena off; the runtime gives it a
///   buffer of its own (both other fields are -1).
struct PlannedValue {
  mlir::OpResult value;
  /// Unaligned size in bytes (elements x element size).
  int64_t bytes = 0;
  /// Program points (indices of the function's top-level ops) of the
  /// definition and of the last use; returned values live to the
  /// `func.return`, the last point.
  int64_t def_point = 0;
  int64_t last_use_point = 0;
  int64_t arena_offset = -1;
  int64_t aliased_arg = -1;
  /// The operand number of the defining op whose arena slot this result
  /// takes over (that operand dies at this op); -1 if none.
  int64_t in_place_operand = -1;
  bool outside_arena = false;
  /// The root whose bytes this view is (an op result planned here, or a
  /// function argument), or null; and where in the root it starts.
  mlir::Value view_of;
  int64_t view_offset = 0;
};

/// The plan of one function. Every result of every op in the function
/// body (top level only: values inside an `mstep.fusion` region are the
/// kernel's own business) has one PlannedValue, in program order.
/// Function arguments live in their own buffers, outside the arena.
struct MemoryPlan {
  int64_t alignment = 64;
  /// Bytes the arena needs: the largest aligned slot end.
  int64_t arena_bytes = 0;
  /// The largest sum, over program points, of the aligned sizes of the
  /// arena slots live at that point: no packing can use less.
  int64_t liveness_bound_bytes = 0;
  /// Results that take over a dying operand's slot / a donated argument.
  int64_t num_in_place = 0;
  int64_t num_aliased_args = 0;
  std::vector<PlannedValue> values;

  /// The entry of `value`, or nullptr if it is not an op result planned here.
  const PlannedValue* find(mlir::Value value) const;
};

/// A result that is another value's bytes (MemoryPlanOptions::views):
/// bytes [offset, offset + its size) of `value`, which is an operand of the
/// result's op (a reshape of it, a contiguous slice), a function argument,
/// or a later value whose buffer the result's op writes into (a result
/// returned through a reshape: the producer writes straight into it).
struct ViewOf {
  mlir::Value value;
  int64_t offset = 0;
};

/// How plan_memory places values. The defaults are the cpu backend's.
struct MemoryPlanOptions {
  /// Offsets are multiples of this (a power of two).
  int64_t alignment = 64;
  /// Whether a result may take over a dying operand's slot (and a donated
  /// argument's buffer). Off for kernels whose buffers must not alias (the
  /// cuda backend's are `restrict`).
  bool in_place = true;
  /// Whether returned values get arena slots. Off: they are outside_arena,
  /// for a runtime that hands each run's outputs fresh buffers and keeps
  /// the arena for the intermediates (the cuda backend).
  bool returned_in_arena = true;
  /// Which results are views of other values (null: none). A view takes no
  /// slot; chains resolve to one root, whose lifetime is widened to cover
  /// every view of it (from the first definition to the last use), so
  /// nothing reuses its bytes while a view of them can still be read.
  /// Needs in_place off; a returned value (outside the arena) cannot be a
  /// view. plan_memory fails, naming the value, on a view that does not fit
  /// its root or a cycle.
  std::function<std::optional<ViewOf>(mlir::OpResult)> views;
};

/// Plans `func`'s arena with offsets that are multiples of `alignment` (a
/// power of two). The body must be a single block of ops whose results are
/// statically shaped ranked tensors of f32, f64, bf16, f16, i32, i64 or i1.
/// On a function it cannot plan, emits a located error and fails.
mlir::FailureOr<MemoryPlan> plan_memory(mlir::func::FuncOp func, int64_t alignment = 64);
mlir::FailureOr<MemoryPlan> plan_memory(mlir::func::FuncOp func, const MemoryPlanOptions& options);

/// Checks `plan` independently of how it was built: offsets aligned and
/// inside the arena, and no two values live at the same program point
/// overlap in the arena, except an operand and the result that took over
/// its slot at the op where the operand dies. Emits a located error naming
/// both values on the first violation.
mlir::LogicalResult verify_memory_plan(const MemoryPlan& plan, mlir::func::FuncOp func);

} // namespace mstep::passes
