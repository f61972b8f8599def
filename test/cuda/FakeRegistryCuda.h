// The process's registry "cuda" backend built over the fakes, so that
// whole training steps run through the user's API (traced, compiled by the
// cuda compile half, run lazily or captured) without a GPU: the fake
// driver (learning each kernel's parameters from its PTX, on a device with
// no cubin in the plans), the fake cuBLASLt, and attention steps that the
// fake records as "sdpa forward" / "sdpa backward" calls on the backend's
// stream (a graph's nodes when captured). The fake runs no kernel.
// For tests and benches; one per process, set up before the registry
// first creates the cuda backend (CudaBackend::use_for_testing).
#pragma once

#include <memory>

#include "lib/backends/cuda/CudaAttention.h"
#include "lib/backends/cuda/CudaBackend.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Backend.h"
#include "test/cuda/FakeCublasLt.h"
#include "test/cuda/FakeCudaDriver.h"

namespace mstep::cuda::testing {

/// An attention step as one recorded call on the registry backend's stream.
class FakeAttentionRunner final : public CudaAttentionRunner {
public:
  FakeAttentionRunner(FakeCudaDriver& fake, bool backward) : fake_(fake), backward_(backward) {}
  size_t workspace_size() const override { return 1 << 20; }
  absl::Status forward(const CudnnSdpaForwardArgs&, CUdeviceptr) override { return record(); }
  absl::Status backward(const CudnnSdpaBackwardArgs&, CUdeviceptr) override { return record(); }

private:
  absl::Status record() {
    MSTEP_ASSIGN_OR_RETURN(Backend * backend, BackendRegistry::get("cuda"));
    fake_.record_stream_call(backward_ ? "sdpa backward" : "sdpa forward",
                             static_cast<CudaBackend*>(backend)->context().stream(), "");
    return absl::OkStatus();
  }
  FakeCudaDriver& fake_;
  bool backward_;
};

/// The fake driver the registry's cuda backend now uses. It stays alive
/// at exit: that backend, destroyed after main, still calls into it.
inline FakeCudaDriver& use_fakes_for_registry_cuda() {
  static FakeCudaDriver* fake = [] {
    auto* f = new FakeCudaDriver();
    f->compute_major = 10;  // no cubin in the plans: every kernel loads its PTX
    f->kernels_from_ptx = true;
    fake_cublaslt_state() = {};
    fake_cublaslt_state().recorder = f;
    CudaBackend::use_for_testing(
        f->driver(), fake_cublaslt(),
        [f](const CudaAttentionInfo& info) -> absl::StatusOr<std::unique_ptr<CudaAttentionRunner>> {
          return std::make_unique<FakeAttentionRunner>(*f, info.backward);
        });
    return f;
  }();
  return *fake;
}

} // namespace mstep::cuda::testing
