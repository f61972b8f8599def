// Rematerialization under a memory limit for the xla backend's arena
// (MSTEP_XLA_MEMORY_LIMIT, bytes): before the arena is planned, a step
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

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mlir {
class Pass;
}

namespace mstep::xla {

/// The environment variable that sets the limit.
inline constexpr char kMemoryLimitVariable[] = "MSTEP_XLA_MEMORY_LIMIT";

/// `text` (the variable's value) as bytes: a positive integer. An error
/// names the variable and the value.
absl::StatusOr<int64_t> parse_memory_limit(absl::string_view text);

/// The pass (on each func.func) for `limit_text`, the variable's value. It
/// reports once per function on stderr:
///   mstep xla: arena A bytes, B bytes under MSTEP_XLA_MEMORY_LIMIT=L (N values recomputed)
/// and records A on the function as mstep.arena_size_unlimited. A limit that
/// cannot be met, or that is not a number, fails the pass with an error
/// that says so and gives the smallest limit that can be met.
std::unique_ptr<mlir::Pass> create_remat_pass(std::string limit_text);

} // namespace mstep::xla
