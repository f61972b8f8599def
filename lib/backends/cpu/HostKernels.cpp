// make_host_kernel: routes a node to the host-kernel family of its op.
#include "lib/backends/cpu/HostKernels.h"

namespace mstep::cpu {

bool host_kernels_available() {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
  return true;
#else
  return false;
#endif
}

absl::StatusOr<std::unique_ptr<CpuKernel>> make_host_kernel(const KernelRequest& request) {
#if defined(__AVX512F__) && defined(__AVX512DQ__)
  switch (request.node().op) {
  case OpKind::multi_tensor_update:
    return make_optimizer_kernel(request);
  case OpKind::sum:
  case OpKind::mean:
  case OpKind::max:
  case OpKind::min:
  case OpKind::argmax:
  case OpKind::logsumexp:
  case OpKind::var:
    return make_reduction_kernel(request);
  case OpKind::nll_loss:
    return make_loss_kernel(request);
  case OpKind::softmax:
  case OpKind::log_softmax:
    return make_softmax_kernel(request);
  case OpKind::rms_norm:
    return make_rms_norm_kernel(request);
  case OpKind::dropout:
    return make_dropout_kernel(request);
  case OpKind::permute: {
    auto transpose = make_transpose_kernel(request);
    if (!transpose.ok() || *transpose) return transpose;
    return make_strided_copy_kernel(request);
  }
  case OpKind::reshape:
  case OpKind::expand:
  case OpKind::slice:
  case OpKind::slice_scatter:
    return make_strided_copy_kernel(request);
  case OpKind::gather:
  case OpKind::index_select:
  case OpKind::index_add:
  case OpKind::scatter_add:
    return make_index_kernel(request);
  default:
    break;
  }
#endif
  // Without AVX-512 (the kernels are written for it) every node keeps its
  // ref kernel.
  return nullptr;
}

} // namespace mstep::cpu
