// Rematerialization under a memory limit for the xla backend's arena
// (RuntimeOptions::xla_memory_limit: MSTEP_XLA_MEMORY_LIMIT, the C API's
// option xla_memory_limit or --xla-memory-limit, bytes): before the arena is planned, a step
// whose planned arena exceeds the limit recomputes cheap values instead of
// keeping them alive. A cheap value is the one result of an elementwise
// fusion whose operands are all arguments that the step does not overwrite
// (no mstep.aliased_result): recomputing it needs nothing else alive. Such
// a value read by several ops is computed right before its first reader,
// and again right before each later one, so it no longer spans the ops in
// between. Values are taken largest first, re-planning after each, until
// the arena fits. Library-internal (compile half).
#pragma once

#include <cstdint>
#include <memory>
#include <string>


namespace mlir {
class Pass;
}

namespace mstep::xla {

/// The pass (on each func.func) for `limit_text`, the limit as written
/// (parsed by mstep::parse_xla_memory_limit, mstep/runtime/Options.h). It
/// reports once per function on stderr:
///   mstep xla: arena A bytes, B bytes under MSTEP_XLA_MEMORY_LIMIT=L (N values recomputed)
/// and records A on the function as mstep.arena_size_unlimited. A limit that
/// cannot be met, or that is not a number, fails the pass with an error
/// that says so and gives the smallest limit that can be met.
std::unique_ptr<mlir::Pass> create_remat_pass(std::string limit_text);

} // namespace mstep::xla
