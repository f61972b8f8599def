// make_onednn_kernel: routes a node to its oneDNN op family.
#include "lib/backends/cpu/OneDnnKernels.h"

#include "lib/backends/cpu/OneDnnPrimitiveKernel.h"

namespace mstep::cpu {

absl::StatusOr<std::unique_ptr<CpuKernel>> make_onednn_kernel(const KernelRequest& request) {
  switch (request.node().op) {
    case OpKind::matmul: return onednn::make_matmul_kernel(request);
    case OpKind::conv2d:
    case OpKind::conv2d_input_grad:
    case OpKind::conv2d_weight_grad: return onednn::make_conv_kernel(request);
    case OpKind::max_pool2d:
    case OpKind::max_pool2d_grad:
    case OpKind::avg_pool2d:
    case OpKind::avg_pool2d_grad: return onednn::make_pool_kernel(request);
    case OpKind::layer_norm: return onednn::make_normalization_kernel(request);
    default: return nullptr;
  }
}

}  // namespace mstep::cpu
