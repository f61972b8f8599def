// Sets of ops of a step that the cuda compiler lowers as one kernel: row
// groups (CudaRowGroups.h) and batches of independent elementwise ops
// (CudaElementwiseBatches.h). A set is wrapped in an scf.execute_region at
// the place of its last op, holding its ops in order and yielding the
// values read outside it, marked with the attribute that says which kind
// it is; ops between its first and last op that depend on it move after
// it. The memory planner then sees one op: the set's inputs live until it
// ends, its results from then on, and the values inside get no bytes.
// Library-internal; MLIR.
#pragma once

#include <functional>

#include "llvm/ADT/STLFunctionalExtras.h"
#include <vector>

#include "llvm/ADT/SmallVector.h"
#include "mlir/IR/Attributes.h"
#include "mlir/IR/Value.h"

namespace mlir {
class Block;
class Operation;
} // namespace mlir

namespace mstep::cuda {

class CudaViews;

/// Whether `op` (of `body`) may join a set: a top-level op that launches a
/// kernel of its own and whose results have bytes of their own (no role
/// in the views analysis: aliases, cuBLASLt epilogues, bias gradients,
/// cuDNN's strided operands).
bool may_join_op_group(mlir::Operation* op, mlir::Block& body, const CudaViews& views);

/// Whether `op` computes elementwise from scalar forms alone: an
/// mstep.fusion, or a standalone op with a scalar form that is not a
/// constant or full fill (those are fills of their own); every value it
/// reads or holds passes `fits`, and every result `fits_result`.
bool elementwise_over(mlir::Operation* op, llvm::function_ref<bool(mlir::Value)> fits,
                      llvm::function_ref<bool(mlir::Value)> fits_result);

/// elementwise_over with all results of one static shape and every other
/// value of that shape or of one element: one lane per element computes
/// the op (batches, a fusion with its slice_scatters).
bool elementwise_over_one_shape(mlir::Operation* op);

/// Wraps `members` (ops of `body`, in program order) at the last one's
/// place, marked `attr` = `value`; false, and nothing changed, where an op
/// that depends on them would have to move past a collective or a custom
/// op (their order is part of the step's contract with other ranks or the
/// outside world).
bool wrap_op_group(mlir::Block& body, llvm::StringRef attr, mlir::Attribute value,
                   const std::vector<mlir::Operation*>& members);

/// Runs of independent ops of `body` in program order that `member` takes:
/// a run ends at the first op that launches something and reads a result
/// of the run, directly or through views (which launch nothing; such a
/// view moves after the wrapped run), at a member that `same_run` (given
/// the run's first member) refuses, and at `max_members` members or
/// `max_params` kernel parameters. Runs of one member included.
std::vector<std::vector<mlir::Operation*>> independent_runs(
    mlir::Block& body, const CudaViews& views,
    const std::function<bool(mlir::Operation*)>& member,
    const std::function<bool(mlir::Operation*, mlir::Operation*)>& same_run, size_t max_members,
    size_t max_params);

/// The values a wrapped set reads from outside it, in order of first use:
/// its kernel's first parameters (its results follow).
llvm::SmallVector<mlir::Value> op_group_inputs(mlir::Operation* group);

} // namespace mstep::cuda
