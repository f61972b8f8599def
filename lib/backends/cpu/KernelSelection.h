// Picks the kernel for each node of a cpu step: the first kernel family
// that handles it (oneDNN, flash attention, the JIT for fusions, the
// hand-written host kernels), else the ref host kernel (a counted fallback
// for compute ops; the cpu backend's own kernel for data movement).
// RuntimeOptions::cpu_disable (MSTEP_CPU_DISABLE=onednn,flash,jit,host or
// all) turns families off.
#pragma once

#include <memory>

#include "lib/backends/cpu/CpuKernel.h"

namespace mstep::cpu {

class FusionJit;

struct SelectedKernel {
  std::unique_ptr<CpuKernel> kernel;
  /// The op runs the ref kernel because no cpu kernel covers it.
  bool fallback = false;
  /// The family that built it ("onednn", "flash", "jit", "host", "ref").
  absl::string_view family;
};

/// Whether `disabled` (RuntimeOptions::cpu_disable: "family,..." or "all")
/// turns `family` off.
bool kernel_family_disabled(absl::string_view disabled, absl::string_view family);

/// `fusion_index` is the node's position among the step's fusions (the
/// JIT's numbering); `jit` may be null. `disabled` lists the families
/// turned off (see kernel_family_disabled). `skip_onednn` keeps oneDNN out
/// (see CpuExecutable: a matmul that may not read a transposed parameter
/// directly).
absl::StatusOr<SelectedKernel> select_kernel(const KernelRequest& request, const FusionJit* jit,
                                             int fusion_index, absl::string_view disabled,
                                             bool skip_onednn = false);

}  // namespace mstep::cpu
