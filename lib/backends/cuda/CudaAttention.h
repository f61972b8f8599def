// The cuda executable's attention steps (CudaAttentionInfo in CudaPlan.h)
// at load time and at run time: a runner per step, made when the
// executable is created. The default runners are cuDNN's SDPA
// (CudnnSdpa.h: the graph built and finalized for the device, one cuDNN
// handle on the backend's stream); tests give their own factory, which is
// the seam a fake cuDNN would otherwise need. Library-internal; runtime
// half (no MLIR).
#pragma once

#include <cuda.h>

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "lib/backends/cuda/CudnnSdpaConfig.h"

namespace mstep::cuda {

class CudaBackend;

/// One attention step ready to run on the backend's device.
class CudaAttentionRunner {
public:
  virtual ~CudaAttentionRunner() = default;
  /// The device workspace one execution needs, in bytes.
  virtual size_t workspace_size() const = 0;
  /// Queue one execution on the backend's stream (the caller has made
  /// the context current: CudaBackend::enqueue).
  virtual absl::Status forward(const CudnnSdpaForwardArgs& args, CUdeviceptr workspace) = 0;
  virtual absl::Status backward(const CudnnSdpaBackwardArgs& args, CUdeviceptr workspace) = 0;
};

/// Makes the runner of one attention step.
using CudaAttentionFactory =
    std::function<absl::StatusOr<std::unique_ptr<CudaAttentionRunner>>(const CudaAttentionInfo&)>;

/// The default factory: loads cuDNN (load_cudnn(), its "cudnn:
/// unavailable: ..." error otherwise), creates one handle on `backend`'s
/// stream, and makes a CudnnSdpa per step (the graph finalized, the
/// engine chosen for the device). A build without cuDNN's headers:
/// Unimplemented.
absl::StatusOr<CudaAttentionFactory> cudnn_attention_factory(CudaBackend& backend);

} // namespace mstep::cuda
