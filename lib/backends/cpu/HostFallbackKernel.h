// Kernels that run the ref backend's host implementation of an op on the
// cpu backend's memory. Two uses:
//  - data movement (reshape, permute, slice, cat, gather, ...) and
//    creation ops: a host copy loop is all they are, on any host backend,
//    so they are the cpu backend's own kernels and are not counted;
//  - a compute op or fusion the cpu kernels do not cover: a fallback,
//    counted by the runtime (Executable::host_fallbacks) and logged with
//    MSTEP_LOG_FALLBACK=1.
#pragma once

#include "lib/backends/cpu/CpuKernel.h"

namespace mstep::cpu {

/// True for the ops whose ref kernel is only data movement or creation.
bool is_host_data_op(OpKind op);

/// The ref kernel of the node (a fusion runs its body through the ref
/// interpreter). An error if ref has no kernel either.
absl::StatusOr<std::unique_ptr<CpuKernel>> make_host_fallback_kernel(const KernelRequest& request);

}  // namespace mstep::cpu
