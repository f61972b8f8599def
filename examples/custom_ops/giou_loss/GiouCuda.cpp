// The GIoU ops' cuda kernels: giou_kernels.cu (embedded by the build as
// kGiouCudaSource), one template instance per dtype, with the launch
// shapes and parameter order its header comment gives. mstep compiles
// them with NVRTC when a step calling the ops compiles for cuda
// (mstep/runtime/CudaCustomKernel.h); registering them needs no toolkit.
#include <algorithm>

#include "examples/custom_ops/giou_loss/GiouCudaSource.h"
#include "examples/custom_ops/giou_loss/GiouOps.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/CudaCustomKernel.h"

namespace mstep::examples {

namespace {

constexpr unsigned kThreads = 256; // GIOU_THREADS in giou_kernels.cu

/// "giou_forward<float>" / "<double>" for the call's boxes.
std::function<absl::StatusOr<std::string>(const CudaKernelCall&)> entry(std::string name) {
  return [name](const CudaKernelCall& call) -> absl::StatusOr<std::string> {
    return name + (call.input_types[0].dtype == DType::f64 ? "<double>" : "<float>");
  };
}

int64_t boxes(const CudaKernelCall& call) { return call.input_types[0].shape[0]; }

/// One thread per box (at least one block).
CudaLaunchShape per_box(const CudaKernelCall& call) {
  const int64_t blocks = std::max<int64_t>(1, (boxes(call) + kThreads - 1) / kThreads);
  return {.grid = {static_cast<unsigned>(blocks), 1, 1}, .block = {kThreads, 1, 1}};
}

/// The trailing (n, mode) parameters of both kernels.
std::vector<CudaKernelArg> with_n_and_mode(std::vector<CudaKernelArg> args) {
  args.push_back(CudaKernelArg::scalar(
      "n", CudaScalarType::i64,
      [](const CudaKernelCall& call) -> absl::StatusOr<CudaScalarValue> { return boxes(call); }));
  args.push_back(
      CudaKernelArg::scalar("mode", CudaScalarType::i32,
                            [](const CudaKernelCall& call) -> absl::StatusOr<CudaScalarValue> {
                              MSTEP_ASSIGN_OR_RETURN(GiouReduction r, giou_reduction(call.attrs));
                              return static_cast<int64_t>(r);
                            }));
  return args;
}

} // namespace

std::shared_ptr<const CustomKernel> giou_forward_cuda_kernel() {
  return cuda_source_kernel(
      {.source = kGiouCudaSource,
       .entry_for = entry("giou_forward"),
       .launch = [](const CudaKernelCall& call) -> absl::StatusOr<CudaLaunchShape> {
         MSTEP_ASSIGN_OR_RETURN(GiouReduction r, giou_reduction(call.attrs));
         // A reduction is one block (giou_kernels.cu).
         if (r != GiouReduction::none)
           return CudaLaunchShape{.grid = {1, 1, 1}, .block = {kThreads, 1, 1}};
         return per_box(call);
       },
       .args = with_n_and_mode(
           {CudaKernelArg::input(0), CudaKernelArg::input(1), CudaKernelArg::output(0)})});
}

std::shared_ptr<const CustomKernel> giou_backward_cuda_kernel() {
  return cuda_source_kernel(
      {.source = kGiouCudaSource,
       .entry_for = entry("giou_backward"),
       .launch = [](const CudaKernelCall& call) -> absl::StatusOr<CudaLaunchShape> {
         return per_box(call);
       },
       .args = with_n_and_mode({CudaKernelArg::input(0), CudaKernelArg::input(1),
                                CudaKernelArg::input(2), CudaKernelArg::output(0),
                                CudaKernelArg::output(1)})});
}

} // namespace mstep::examples
