#include "lib/backends/cpu/KernelSelection.h"

#include <cstdlib>

#include "absl/strings/str_split.h"

#include "lib/backends/cpu/FlashAttention.h"
#include "lib/backends/cpu/FusionJit.h"
#include "lib/backends/cpu/HostFallbackKernel.h"
#include "lib/backends/cpu/HostKernels.h"
#include "lib/backends/cpu/OneDnnKernels.h"
#include "mstep/core/Error.h"

namespace mstep::cpu {

namespace {

struct Family {
  absl::string_view name;
  KernelFactory factory;
};

/// The kernel families, most specific first ("jit" is the fusion JIT).
constexpr Family kFamilies[] = {
    {"onednn", make_onednn_kernel},
    {"flash", make_flash_attention_kernel},
    {"host", make_host_kernel},
};

/// MSTEP_CPU_DISABLE=family,... (or "all") turns kernel families off, so
/// their ops run the ref kernel: for bisecting a wrong result to a family.
bool disabled(absl::string_view family) {
  const char* env = std::getenv("MSTEP_CPU_DISABLE");
  if (!env) return false;
  for (absl::string_view f : absl::StrSplit(env, ','))
    if (f == family || f == "all") return true;
  return false;
}

}  // namespace

bool kernel_family_disabled(absl::string_view family) { return disabled(family); }

absl::StatusOr<SelectedKernel> select_kernel(const KernelRequest& request, const FusionJit* jit,
                                             int fusion_index, bool skip_onednn) {
  const GraphNode& node = request.node();
  if (node.op == OpKind::fusion && jit && !disabled("jit")) {
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuKernel> kernel, jit->kernel(fusion_index, request));
    if (kernel) return SelectedKernel{std::move(kernel), false, "jit"};
  }
  for (const Family& family : kFamilies) {
    if (disabled(family.name) || (skip_onednn && family.name == "onednn")) continue;
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuKernel> kernel, family.factory(request));
    if (kernel) return SelectedKernel{std::move(kernel), false, family.name};
  }
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuKernel> kernel, make_host_fallback_kernel(request));
  return SelectedKernel{std::move(kernel), !is_host_data_op(node.op), "ref"};
}

}  // namespace mstep::cpu
