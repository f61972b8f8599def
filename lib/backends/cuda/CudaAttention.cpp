// The cuDNN attention runners: see CudaAttention.h.
#include "lib/backends/cuda/CudaAttention.h"

#include "absl/strings/str_cat.h"
#include "lib/backends/cuda/CudaBackend.h"
#include "mstep/core/Error.h"

#if MSTEP_HAS_CUDNN
#include "lib/backends/cuda/CudnnApi.h"
#include "lib/backends/cuda/CudnnSdpa.h"
#endif

namespace mstep::cuda {

#if MSTEP_HAS_CUDNN

namespace {

/// A CudnnSdpa on the executable's handle (shared by its steps).
class CudnnAttentionRunner final : public CudaAttentionRunner {
public:
  CudnnAttentionRunner(std::shared_ptr<const CudnnHandle> handle, std::unique_ptr<CudnnSdpa> sdpa)
      : handle_(std::move(handle)), sdpa_(std::move(sdpa)) {}
  size_t workspace_size() const override { return sdpa_->workspace_size(); }
  absl::Status forward(const CudnnSdpaForwardArgs& args, CUdeviceptr workspace) override {
    return sdpa_->forward(*handle_, args, workspace);
  }
  absl::Status backward(const CudnnSdpaBackwardArgs& args, CUdeviceptr workspace) override {
    return sdpa_->backward(*handle_, args, workspace);
  }

private:
  std::shared_ptr<const CudnnHandle> handle_;
  std::unique_ptr<CudnnSdpa> sdpa_;
};

} // namespace

absl::StatusOr<CudaAttentionFactory> cudnn_attention_factory(CudaBackend& backend) {
  MSTEP_ASSIGN_OR_RETURN(std::shared_ptr<const CudnnApi> api, load_cudnn());
  MSTEP_RETURN_IF_ERROR(backend.context().make_current());
  MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CudnnHandle> created,
                         CudnnHandle::create(std::move(api), backend.context().stream()));
  std::shared_ptr<const CudnnHandle> handle = std::move(created);
  return CudaAttentionFactory([handle](const CudaAttentionInfo& info)
                                  -> absl::StatusOr<std::unique_ptr<CudaAttentionRunner>> {
    MSTEP_ASSIGN_OR_RETURN(std::unique_ptr<CudnnSdpa> sdpa,
                           CudnnSdpa::create(*handle, info.config,
                                             info.backward ? CudnnSdpa::Direction::backward
                                                           : CudnnSdpa::Direction::forward));
    return std::unique_ptr<CudaAttentionRunner>(new CudnnAttentionRunner(handle, std::move(sdpa)));
  });
}

#else

absl::StatusOr<CudaAttentionFactory> cudnn_attention_factory(CudaBackend& backend) {
  (void)backend;
  return absl::UnimplementedError(
      "cuda: attention steps run through cuDNN, and this build found no cudnn_graph.h "
      "(install cuDNN 9's headers and reconfigure)");
}

#endif

} // namespace mstep::cuda
