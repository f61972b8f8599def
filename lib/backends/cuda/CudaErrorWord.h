// The device-side error word of a cuda executable (issue 22 §4, the
// replay-after-failure case): eight i64 words in device memory, one per
// executable (CudaPlan::error_word), reset to zero at the start of each
// run (inside a captured CUDA graph too). A kernel that finds bad data
// (nll_loss: a target neither ignore_index nor in [0, C); index_select,
// embedding's, index_add, gather and scatter_add: an index out of
// [0, size)) ors its code into
// word kCodes and, if it is the first to claim word kClaim, writes the
// offending value, its position, the bound, the extra (ignore_index) and
// the op's number (its "mstep.X #N"). The optimizer update reads kCodes and,
// when it is set, writes every parameter and state back unchanged, so a
// failed step leaves them bitwise as they were. At the end of the run the
// word is copied to pinned host memory, and the sync point that waits for
// the step's outputs reads it there (CudaBackend::enqueue's check) and
// returns the error in the cpu backend's words. Runtime half (no MLIR);
// the layout is shared with the loop nests (CudaLoopNest.h).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "lib/backends/cuda/CudaPlan.h"

namespace mstep::cuda::error_word {

/// The word's i64 elements.
inline constexpr int64_t kWords = 8;
/// Its type in the plan.
inline TensorType type() { return TensorType{Shape({kWords}), DType::i64}; }

/// Element indices.
enum Slot : int64_t {
  kCodes = 0,     ///< or of every code found (0: no error)
  kClaim = 1,     ///< set by the first kernel lane to report
  kValue = 2,     ///< the offending value (a target, an index)
  kPosition = 3,  ///< its position (the row, the element of the index)
  kBound = 4,     ///< the bound it broke (the class count C, the dim's size)
  kExtra = 5,     ///< ignore_index; the dim indexed
  kOp = 6,        ///< the op's number N in the origin "mstep.X #N"
};

/// Codes (bits of kCodes).
enum Code : int64_t {
  kNllTarget = 1,  ///< nll_loss / cross_entropy: a target out of range
  kIndex = 2,      ///< index_select (embedding), index_add, gather, scatter_add: an index out of range
};

/// The error a set word stands for, in the cpu backend's words (an
/// nll_loss target: "mstep::nll_loss: target 12 at position 3 is out of
/// range for C = 10 classes ..."), naming the kernel of `plan` that found
/// it and saying that the step's update was skipped. OK for a clear word.
absl::Status decode(const CudaPlan& plan, const int64_t (&word)[kWords]);

}  // namespace mstep::cuda::error_word
