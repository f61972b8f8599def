// The error of a step that one of the step function's own loops stopped
// (XlaOpLoops.h: a loop that found invalid data, such as an nll_loss
// target out of range, returns before writing anything and the step
// function returns -(1 + node)). Runtime half: no MLIR or LLVM.
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "lib/backends/xla/XlaStep.h"

namespace mstep::xla {

/// The step function's status for a failed loop at `node`, and back.
inline int32_t loop_failure_status(uint32_t node) { return -1 - static_cast<int32_t>(node); }
inline uint32_t node_of_loop_failure(int32_t status) { return static_cast<uint32_t>(-1 - status); }

/// The error naming what is wrong with the data of `node`, whose loop
/// stopped the run: the cpu backend's kernel for the node runs once on the
/// node's operands (still as they were: nothing after the node ran) and
/// its error is returned. `inputs`, `outputs` and `arena` are the run's.
absl::Status loop_failure(const XlaProgram& program, uint32_t node, void* const* inputs,
                          void* const* outputs, std::byte* arena);

} // namespace mstep::xla
