// Scaled dot-product attention, forward and backward, with cuDNN 9's
// backend API (issue 21 §1, attention): the operation graphs cuDNN's
// fused flash-attention engines recognise, built from matmul, pointwise
// and reduction nodes as cudnn-frontend's composite SDPA node builds them
// (cuDNN 9.19's fused SDPA_FWD/BWD operation descriptors have no causal,
// mask or dropout attributes, so they are not used):
//
//   forward:  S = Q K^T * scale [+ mask] [padding: -inf past valid_seq_len]
//             [causal: -inf where key > row]; stats = max + log(sum(exp))
//             (log-sum-exp, fp32); P = softmax(S) (bf16/f16); O = P V
//   backward: D = rowsum(dO * O); P = exp(S - stats); dV = P^T dO;
//             dS = P * (dO V^T - D) * scale; dK = dS^T Q; dQ = dS K
//
// Layout: Q [B, H, Sq, D], K [B, H, Skv, D], V [B, H, Skv, Dv], O and dO
// [B, H, Sq, Dv], all packed row-major (mstep's [..., L, E] with the
// leading dims flattened to B, H); stats [B, H, Sq, 1] fp32; an additive
// mask [B or 1, H or 1, Sq, Skv] of Q's type; valid_seq_len int32 [B].
//
// What cuDNN cannot express is refused by cudnn_sdpa_expressible() with
// "not expressible in cuDNN: <option>" (UnimplementedError): the caller
// then runs its own attention kernel, never the host.
//
// No GPU is needed to build and finalize the graphs
// (build_sdpa_forward_graph / build_sdpa_backward_graph); CudnnSdpa (the
// engine, the plan, execution) needs a handle, hence a GPU.
// Library-internal; the compile half's launch plan holds a CudnnSdpa per
// attention node and calls forward()/backward() with arena pointers.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>
#include <string>

#include "absl/status/statusor.h"
#include "lib/backends/cuda/CudnnGraph.h"
#include "lib/backends/cuda/CudnnSdpaConfig.h"
#include "mstep/core/DType.h"

namespace mstep::cuda {

/// The tensors' unique ids in the graphs (the variant pack's keys).
namespace sdpa_uid {
inline constexpr int64_t q = 1, k = 2, v = 3, o = 4, stats = 5, mask = 6, seq_q = 7, seq_kv = 8,
                         grad_o = 9, grad_q = 10, grad_k = 11, grad_v = 12, softmax_sum = 13,
                         grad_q_accum = 14, scale = 20, negative_inf = 21, one = 22;
}

/// The finalized forward / backward operation graph for `config` (after
/// cudnn_sdpa_expressible). Needs the library, no GPU.
absl::StatusOr<CudnnOperationGraph> build_sdpa_forward_graph(std::shared_ptr<const CudnnApi> api,
                                                             const CudnnSdpaConfig& config);
absl::StatusOr<CudnnOperationGraph> build_sdpa_backward_graph(std::shared_ptr<const CudnnApi> api,
                                                              const CudnnSdpaConfig& config);

/// A forward or backward SDPA ready to run on a handle's device: the
/// graph, the engine the heuristics chose and its plan. Needs a GPU.
class CudnnSdpa {
public:
  enum class Direction : uint8_t { forward, backward };
  /// Errors: cudnn_sdpa_expressible's, the graph's, and Unimplemented "no
  /// engine on this device runs the graph" (the caller falls back to its
  /// own kernel then, too).
  static absl::StatusOr<std::unique_ptr<CudnnSdpa>>
  create(const CudnnHandle& handle, const CudnnSdpaConfig& config, Direction direction);

  /// The device workspace execution needs, in bytes: cuDNN's, then (the
  /// backward) the fp32 row sums D and the fp32 dQ accumulator.
  size_t workspace_size() const { return workspace_size_; }
  const CudnnSdpaConfig& config() const { return config_; }
  const CudnnExecutionPlan& plan() const { return *plan_; }

  /// Queue on the handle's stream. Errors: a missing pointer (named), a
  /// direction mismatch, cudnnBackendExecute's error.
  absl::Status forward(const CudnnHandle& handle, const CudnnSdpaForwardArgs& args,
                       CUdeviceptr workspace) const;
  absl::Status backward(const CudnnHandle& handle, const CudnnSdpaBackwardArgs& args,
                        CUdeviceptr workspace) const;

private:
  CudnnSdpa() = default;
  void bind_options(CUdeviceptr mask, CUdeviceptr valid_seq_len,
                    std::vector<std::pair<int64_t, void*>>& bindings) const;
  CudnnSdpaConfig config_;
  Direction direction_ = Direction::forward;
  CudnnOperationGraph graph_;
  std::unique_ptr<CudnnExecutionPlan> plan_;
  size_t workspace_size_ = 0;
  size_t softmax_sum_offset_ = 0, grad_q_accum_offset_ = 0;
  // The by-value scalars' host storage (bound by address at execution).
  float scale_ = 1.0f, negative_inf_ = 0.0f, one_ = 1.0f;
};

} // namespace mstep::cuda
