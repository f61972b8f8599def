// Queues the test kernel saxpy (test/cuda/kernels/test_kernels.cu) on a
// CudaBackend's stream the way the backend's executables will queue their
// launches: y = a * x + y, reading x and y, writing y. Shared by the
// fake-driver and the GPU tests of the backend.
#pragma once

#include "absl/status/status.h"
#include "lib/backends/cuda/CudaBackend.h"
#include "lib/backends/cuda/CudaLaunch.h"
#include "lib/backends/cuda/CudaModule.h"

namespace mstep::cuda::testing {

inline absl::Status enqueue_saxpy(CudaBackend& backend, const CudaKernel& kernel, float a,
                                  const BufferPtr& x, const BufferPtr& y) {
  const int n = static_cast<int>(x->type().shape.numel());
  CudaKernelArgs args;
  args.add(n).add(a).add(CudaBackend::device_pointer(*x)).add(CudaBackend::device_pointer(*y));
  const unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  const Buffer* reads[] = {x.get(), y.get()};
  const Buffer* writes[] = {y.get()};
  return backend.enqueue(
      "kernel saxpy",
      [&] {
        return launch_kernel(backend.context(), kernel,
                             {.grid = {blocks, 1, 1}, .block = {256, 1, 1}}, args);
      },
      reads, writes);
}

} // namespace mstep::cuda::testing
