// The cpu kernel of a `custom` node (a user-registered op): the host
// kernel registered for backend "cpu"; else, when the op has a "ref" host
// kernel, that one as a counted host fallback (the cpu backend's memory is
// host memory, so the ref kernel runs on it unchanged, as for built-in ops
// the cpu kernels do not cover); else a compile error naming the op.
#pragma once

#include "lib/backends/cpu/KernelSelection.h"

namespace mstep::cpu {

absl::StatusOr<SelectedKernel> select_custom_kernel(const KernelRequest& request);

} // namespace mstep::cpu
