// The cuda compile half's attention of its own, for what cuDNN's SDPA
// cannot express (f32, dropout with mstep's Philox numbers, boolean
// masks, left padding, masks broadcast over rows or keys,
// head dims cuDNN refuses): mstep.sdpa and mstep.sdpa_backward composed
// of cuBLASLt batched matmuls (CudaPlan.h) and the loop-nest kernels of
// CudaAttentionLoops.h, following ref's math (RefAttention.cpp,
// RefAttentionGrad.cpp):
//
//   forward:  S = q·kᵀ; P' = probs(S) (in place); out = P'·v
//   backward: P = probs(q·kᵀ) without dropout; dP' = g·vᵀ;
//             (P', scale·dS) = probs_grad(P, dP') (in place);
//             dv = P'ᵀ·g; dq = (scale·dS)·k; dk = (scale·dS)ᵀ·q
//
// The [..., L, S] matrices are scratch values of the plan, live only
// within their op's steps: one region at the arena's end holds every
// op's scratch in turn. The matmuls are in the input's dtype (f32, or
// bf16 or f16 accumulated in f32), so S and dP' are rounded to it before the
// f64 row arithmetic (ref keeps the dot products in f64). One difference
// from ref: ref skips excluded and dropped keys, so a NaN or inf in a
// padded position of v (or of q, k, g in the backward) cannot reach a
// result; here the matmuls multiply it by 0. Library-internal; MLIR.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/backends/cuda/CudaKernelGen.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

namespace mstep::cuda {

/// What both attention ops (mstep.sdpa, mstep.sdpa_backward) share: the
/// inputs (null when absent) and options.
struct AttentionOperands {
  mlir::Value q, k, v, mask, valid_seq_len, rng;
  double scale = 1, dropout_p = 0;
  int64_t rng_offset = 0;
  bool causal = false, softmax_mode_none = true, recompute = true, left_padding = false;
};

/// The operands of `op`, an mstep.sdpa or mstep.sdpa_backward.
AttentionOperands attention_operands(mlir::Operation* op);

/// Adds generated kernels to the plan (CudaCompiler.cpp): `params` has a
/// plan value per parameter of their func @<name> (the kernels'
/// temporaries are appended by the sink); those from `first_written` on
/// are written. `origin` names the op in errors and dumps.
using CudaKernelSink = std::function<absl::Status(GeneratedKernels kernels, const std::string& name,
                                                  std::vector<int> params, size_t first_written,
                                                  const std::string& origin)>;

class CudaComposedAttention {
public:
  CudaComposedAttention(CudaCodegenOptions codegen, CudaKernelSink sink)
      : codegen_(std::move(codegen)), sink_(std::move(sink)) {}

  /// Appends the steps of `op` (mstep.sdpa or mstep.sdpa_backward) to
  /// `plan`; `ids` maps the step's MLIR values to plan values and gets the
  /// op's results; `name` ("op3") prefixes its kernels. Unimplemented
  /// "<what>" (no prefix: the caller names the op) for a form not
  /// composed: a dtype other than f32, bf16 and f16, lengths other than i32
  /// and i64, returned probabilities or dropout mask, probabilities saved
  /// for the backward, the mask's gradient.
  absl::Status lower(mlir::Operation* op, const std::string& origin, const std::string& name,
                     llvm::DenseMap<mlir::Value, int>& ids, CudaPlan& plan);

  /// After the arena is planned: the scratch values at its end, every op's
  /// from the same offset (their steps never overlap).
  void place_in_arena(CudaPlan& plan) const;

private:
  CudaCodegenOptions codegen_;
  CudaKernelSink sink_;
  /// Each op's scratch values.
  std::vector<std::vector<int>> scratch_;
};

/// Appends a value of `type` to `plan`; its id. (The attention lowerings
/// add their steps' values, scratch included, this way.)
int add_plan_value(CudaPlan& plan, TensorType type);
/// Appends `value`'s type to `plan` and records its id in `ids`.
absl::StatusOr<int> add_plan_result(CudaPlan& plan, llvm::DenseMap<mlir::Value, int>& ids,
                                    mlir::Value value);

} // namespace mstep::cuda
