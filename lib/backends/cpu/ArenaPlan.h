// The arena plan of a step function as the cpu executable uses it: where
// each result of each top-level op lives, read from the attributes that
// mstep-plan-memory wrote (docs/backend-contract.md, rule C8), and its
// stored form. Plain data, so the executable itself needs no MLIR headers:
// read_arena_plan (ArenaPlan.cpp) is the compile path's, the stored form
// (ArenaPlanFormat.cpp) the loader's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/ir/TraceGraph.h"

namespace mlir::func {
class FuncOp;
}

namespace mstep::cpu {

struct ArenaPlan {
  int64_t arena_bytes = 0;
  int64_t alignment = 64;
  /// Per top-level op (program order, func.return excluded), per result:
  /// the arena offset, or -1 when the result is written into the donated
  /// argument `aliased_arg` names.
  struct OpPlacement {
    std::vector<int64_t> offsets;
    std::vector<int64_t> aliased_arg;
  };
  std::vector<OpPlacement> ops;
};

/// Reads the plan off `step`; an error if the function was not planned.
absl::StatusOr<ArenaPlan> read_arena_plan(mlir::func::FuncOp step);

/// The stored form of `plan` (a section of the cpu executable's native
/// form, NativeFormat.h).
std::string serialize_arena_plan(const ArenaPlan& plan);

/// Reads serialize_arena_plan()'s bytes, which are untrusted, and checks
/// them against `graph`, the step they were planned for: one placement per
/// result of each op, every arena range inside the arena and aligned, every
/// donated argument an input at least as large as the result written into
/// it. A DataLoss error names the first problem.
absl::StatusOr<ArenaPlan> deserialize_arena_plan(absl::string_view bytes, const TraceGraph& graph);

}  // namespace mstep::cpu
