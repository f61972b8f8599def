// The cuda compile half's lowering of mstep.sdpa / mstep.sdpa_backward to
// cuDNN SDPA steps of the launch plan (CudaAttentionInfo in CudaPlan.h):
// the node's shapes and options become a CudnnSdpaConfig (mstep's leading
// dims flattened to B = dim 0, H = the rest; i64 lengths converted to
// the i32 cuDNN takes by a kernel of their own), checked by
// cudnn_sdpa_expressible; an option cuDNN cannot express, or a form it
// does not take, goes to the composed attention (CudaComposedAttention.h:
// cuBLASLt matmuls and kernels of our own), and what neither takes is an
// Unimplemented "cuda: op '<op>' (<origin>, <types>) is not yet lowered
// for cuda: <why cuDNN refuses>; nor does the composed attention ...
// take <what>". Library-internal; compile half (MLIR).
#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "lib/backends/cuda/CudaComposedAttention.h"
#include "lib/backends/cuda/CudaPlan.h"
#include "lib/backends/cuda/CudaViews.h"
#include "mlir/IR/Operation.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"

namespace mstep::cuda {

/// Lowers the step's attention ops, in order, into one plan.
///
/// cuDNN's backward needs the forward's out and its softmax statistics
/// (log-sum-exp) where mstep.sdpa_backward recomputes them from q, k and
/// v: each forward writes a stats value the compiler adds to the plan
/// (f32 [B, H, L, 1]); a backward whose forward is in the step (the same
/// q, k, v, mask, valid_seq_len and options) reads that forward's out and
/// stats; one without gets a forward step of its own before it (writing an
/// out and stats the step graph does not have).
class CudaAttentionLowering {
public:
  /// `codegen` and `sink` build and add the composed attention's kernels.
  CudaAttentionLowering(CudaCodegenOptions codegen, CudaKernelSink sink)
      : codegen_(codegen), sink_(sink), composed_(std::move(codegen), std::move(sink)) {}

  static bool is_attention(mlir::Operation* op);
  /// Whether `op` (an attention op) is a cuDNN SDPA step, not the composed
  /// attention: what lower() decides (CudaViews' attention views).
  static bool runs_on_cudnn(mlir::Operation* op);

  /// Appends `op`'s steps (and the values they add) to `plan`; `ids` maps
  /// the step's MLIR values to plan values and gets `op`'s results (a
  /// result already there, a strided view the caller added, keeps its id);
  /// `name` ("op3") prefixes the composed attention's kernels. A cuDNN
  /// step's config has `views`' attention strides.
  absl::Status lower(mlir::Operation* op, const std::string& origin, const std::string& name,
                     const CudaViews& views, llvm::DenseMap<mlir::Value, int>& ids,
                     CudaPlan& plan);

  /// After the arena is planned (from the MLIR ops' lifetimes): the
  /// values the plan added, and the forward outs a later backward reads
  /// (whose lifetimes the MLIR planner did not see), get slots of their
  /// own at the arena's end, and then the composed attention's scratch
  /// (the caller validates the arena after).
  absl::Status place_in_arena(CudaPlan& plan) const;

private:
  void place_own_slots(CudaPlan& plan) const;
  /// A cuDNN step's [mask] [, valid_seq_len] plan values: i64 lengths as
  /// i32, converted by a kernel of their own the first time a step reads
  /// them (build_lengths_as_i32).
  absl::StatusOr<std::vector<int>> cudnn_option_ids(mlir::Operation* op, const AttentionOperands& a,
                                                    const std::string& name,
                                                    const std::string& origin,
                                                    const llvm::DenseMap<mlir::Value, int>& ids,
                                                    CudaPlan& plan);

  struct Forward {
    std::vector<mlir::Value> key; ///< q, k, v, mask, valid_seq_len
    CudnnSdpaConfig config;
    int out = -1, stats = -1;
  };
  std::vector<Forward> forwards_;
  /// Values the arena must hold apart (added, or lifetimes extended).
  std::vector<int> own_slots_;
  /// i64 lengths -> their i32 copy's plan value.
  llvm::DenseMap<mlir::Value, int> lengths_i32_;
  CudaCodegenOptions codegen_;
  CudaKernelSink sink_;
  CudaComposedAttention composed_;
};

} // namespace mstep::cuda
