// The arena plan of a step function as the cpu executable uses it: where
// each result of each top-level op lives, read from the attributes that
// mstep-plan-memory wrote (docs/backend-contract.md, rule C8). Plain data,
// so the executable itself needs no MLIR headers.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

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

}  // namespace mstep::cpu
