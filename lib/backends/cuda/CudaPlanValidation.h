// The checks a CudaPlan passes before it runs: every launch, argument and
// output names a value and kernel the plan has, aliases fit their roots,
// and the arena's live values never overlap. A plan read from disk is
// untrusted until these pass. Library-internal; runtime half (no MLIR).
#pragma once

#include "absl/status/status.h"
#include "lib/backends/cuda/CudaPlan.h"

namespace mstep::cuda {

/// Checks that `plan`'s launches, arguments and outputs name values and
/// kernels it has, validate_cuda_aliases, validate_cuda_definitions and
/// validate_cuda_arena (a plan read from disk is checked before it runs).
absl::Status validate_cuda_plan(const CudaPlan& plan);

/// Checks the plan's aliases: each names a computed value (aliased once,
/// never an output) and a root that is no alias, fits in its root's bytes,
/// has no arena offset of its own, and is not written when its root is a
/// step input.
absl::Status validate_cuda_aliases(const CudaPlan& plan);

/// Checks that every value a step reads holds bytes by then: a step input,
/// the error word (reset before each run), or bytes an earlier step wrote.
/// A value's bytes are its root's range (an alias's offset and size), and
/// writes to aliases of one root add up. A read of bytes nothing wrote
/// would be a read of uninitialized device memory (compute-sanitizer's
/// initcheck). A matmul's epilogue fallback runs after its call.
absl::Status validate_cuda_definitions(const CudaPlan& plan);

/// Checks the memory plan alone, independently of how it was built: one
/// offset per value; inputs and outputs outside the arena; every arena
/// value aligned to kCudaArenaAlignment and inside the arena; and no two
/// arena values that are live at one launch (from the first launch that
/// uses one, or an alias of it, to the last) overlap.
absl::Status validate_cuda_arena(const CudaPlan& plan);

}  // namespace mstep::cuda
