#include "lib/backends/cpu/KernelSelection.h"

#include "absl/strings/str_split.h"

#include "lib/backends/cpu/CustomOpKernel.h"
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

}  // namespace

/// RuntimeOptions::cpu_disable turns kernel families off, so their ops run
/// the ref kernel: for bisecting a wrong result to a family.
bool kernel_family_disabled(absl::string_view disabled, absl::string_view family) {
  if (disabled.empty()) return false;
  for (absl::string_view f : absl::StrSplit(disabled, ','))
    if (f == family || f == "all") return true;
  return false;
}

absl::StatusOr<SelectedKernel> select_kernel(const KernelRequest& request, const FusionJit* jit,
                                             int fusion_index, absl::string_view disabled,
                                             bool skip_onednn) {
  const GraphNode& node = request.node();
  if (node.op == OpKind::custom) return select_custom_kernel(request);
  if (node.op == OpKind::fusion && jit && !kernel_family_disabled(disabled, "jit")) {
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuKernel> kernel, jit->kernel(fusion_index, request));
    if (kernel) return SelectedKernel{std::move(kernel), false, "jit"};
  }
  for (const Family& family : kFamilies) {
    if (kernel_family_disabled(disabled, family.name) || (skip_onednn && family.name == "onednn"))
      continue;
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuKernel> kernel, family.factory(request));
    if (kernel) return SelectedKernel{std::move(kernel), false, family.name};
  }
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CpuKernel> kernel, make_host_fallback_kernel(request));
  return SelectedKernel{std::move(kernel), !is_host_data_op(node.op), "ref"};
}

}  // namespace mstep::cpu
