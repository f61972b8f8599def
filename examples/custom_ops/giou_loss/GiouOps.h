// The GIoU loss's custom ops, registered with the runtime alone (no
// tracer or compiler), so that both the example program and a plugin
// (giou_plugin.cpp, for mstep-run --plugin) can register them:
//   "giou_loss"          (pred, target [N, 4], f32|f64) {reduction} -> loss
//   "giou_loss_backward" (pred, target, grad of the loss) {reduction}
//                        -> (grad pred, grad target)
// both version 1, with ref and cpu kernels, CUDA C++ kernels for cuda and
// NeuronCore tile kernels for neuron. See GiouLoss.h for the loss.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep::examples {

/// The epsilon of the loss's divisions (torchvision's).
inline constexpr double kEps = 1e-7;

/// The `reduction` attribute of a call (numbered as the CUDA kernels take it).
enum class GiouReduction { none = 0, mean = 1, sum = 2 };
/// InvalidArgument naming the accepted values for another string.
absl::StatusOr<GiouReduction> giou_reduction(const CustomAttrView& attrs);

/// The ops' "cuda" kernels: giou_kernels.cu compiled by NVRTC (GiouCuda.cpp).
std::shared_ptr<const CustomKernel> giou_forward_cuda_kernel();
std::shared_ptr<const CustomKernel> giou_backward_cuda_kernel();
/// The ops' "neuron" kernels: NeuronCore tile programs (GiouNeuron.cpp).
std::shared_ptr<const CustomKernel> giou_forward_neuron_kernel();
std::shared_ptr<const CustomKernel> giou_backward_neuron_kernel();

/// Registers both ops in the global registry; again is a no-op.
absl::Status register_giou_ops();

} // namespace mstep::examples
