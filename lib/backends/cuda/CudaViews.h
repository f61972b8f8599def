// Which values of a step need no launch of their own on cuda (issue 21:
// fewer launches): the plan's aliases (CudaPlan::aliases) and the
// transposes folded into cuBLASLt steps, decided once over the step before
// it is lowered, and given to the memory planner (MemoryPlanOptions::views)
// so that a root's bytes outlive every view of them.
//   - a reshape, or a permute that moves only size-1 dims: its operand's
//     bytes as they are;
//   - a slice whose elements are one contiguous run of its operand
//     starting at a multiple of kCudaArenaAlignment bytes (cuBLASLt and
//     cuDNN assume aligned operands);
//   - a permute that swaps the last two dims and that only matmuls read,
//     each of which can take it as its transpose flag (a 2-D lhs or a
//     batched one, any rhs): its operand's bytes, read transposed;
//   - a matmul whose product only feeds such a permute (and is not one
//     that folds lhs's batch dims into its rows): it writes the permute's
//     result, as (A·B)^T = B^T·A^T, and the permute launches nothing;
//   - an intermediate that a reshape (or size-1 permute) returns as a step
//     output: its op writes straight into the output's buffer;
//   - a matmul whose product only a bias add reads (x·w + b, b of the
//     product's dtype and last dim, alone or in a fusion that is just that),
//     then maybe a ReLU or a tanh-form GELU that only the add reads: one
//     cuBLASLt call with the BIAS / RELU_BIAS / GELU_BIAS epilogue writes
//     the last op's result, and those ops launch nothing;
//   - a sum of a value over every dim but the last whose bytes are a
//     matmul's rhs [k, n] (or the [k, m] operand of an lhs it reads
//     transposed), the same bytes through reshapes: a linear layer's bias
//     gradient beside its weight gradient. The matmul's cuBLASLt call (a
//     2-D one) writes the sum too (the BGRADA / BGRADB epilogues), and the
//     sum launches nothing. A sum before the matmul qualifies only when
//     nothing that launches reads it before the matmul;
//   - an operand of a cuDNN SDPA step (q, k, v, grad_out) that permutes,
//     reshapes and unit-step slices made of another value's bytes, each
//     between read by the next alone (the heads' [B, S, H, D] -> [B, H, S,
//     D] permute of a slice of a packed qkv projection): those ops launch
//     nothing, and cuDNN reads the bytes at strides (attention_strides);
//     a result of one (out, grad_q, ...) that only a permute reads: cuDNN
//     writes it at strides into the permute's result, and the permute
//     launches nothing. Strides a multiple of 16 bytes, the last 1, the
//     offset a multiple of 16 bytes (cuDNN's vector loads);
//   - per operand of a cat (DDP's bucket of flattened gradients, each at a
//     multiple of 256 bytes with zeros in the gaps): an operand that is
//     the whole of a value with bytes of its own, at an offset that is a
//     multiple of kCudaArenaAlignment, is written there by its op (an
//     alias into the cat's result); an operand that is a mstep.full of a
//     constant is written by the cat itself (one launch for all such
//     operands), and that full launches nothing when only cats read it;
//     any other operand is copied by a kernel of its own (CudaCatLoops.h).
//     A cat whose operands are all written in place launches nothing.
// A returned value is never a view (each run hands outputs buffers of
// their own). Library-internal; MLIR.
#pragma once

#include <functional>
#include <optional>

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "lib/backends/cuda/CublasLt.h"
#include "lib/backends/cuda/CudaCatLoops.h"
#include "lib/backends/cuda/CudnnSdpaConfig.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mstep/ir/dialect/MstepOps.h"
#include "mstep/passes/MemoryPlan.h"

namespace mstep::cuda {

/// A bias (and activation) a matmul's cuBLASLt call applies.
struct CudaMatmulEpilogue {
  mlir::Value bias;                ///< [n], the product's dtype
  MatmulEpilogue activation = MatmulEpilogue::none;
  mlir::Value result;              ///< what the call writes (the last op's result)
  /// The ops the call absorbs, in order (a fusion; or the add, then the
  /// activation): the kernels of its fallback (CudaMatmulInfo::fallback).
  llvm::SmallVector<mlir::Operation*, 2> ops;
};

/// A bias gradient a matmul's cuBLASLt call writes beside its product: the
/// result of `sum`, the sum over k of operand `operand` (0 lhs, 1 rhs) of
/// the matmul as written (before a transposed result swaps them).
struct CudaMatmulBiasGrad {
  mlir::Operation* sum = nullptr;
  unsigned operand = 1;
  /// The [k, cols] matrix summed: the operand, or the operand of the
  /// permute it reads transposed (the sum's input has its bytes).
  mlir::Value matrix;
};

/// The activation `op` is as a cuBLASLt epilogue (ReLU, or GELU's tanh
/// form: cuBLASLt has no erf form), or nullopt.
std::optional<MatmulEpilogue> cublaslt_activation_of(mlir::Operation* op);

/// `value` through the reshapes that made it: the value whose row-major
/// bytes it is.
mlir::Value reshape_root(mlir::Value value);
/// Whether `sum` adds up its input over every dim but the last.
bool sums_all_but_last(dialect::SumOp sum);

/// Whether cuDNN runs attention op `op` (CudaAttentionLowering::runs_on_cudnn):
/// only its operands and results may be strided views.
using CudaRunsOnCudnn = std::function<bool(mlir::Operation*)>;

class CudaViews {
 public:
  /// Decides for every op of `step` (its single block, after the cuda
  /// pipeline); without `on_cudnn`, no attention operand or result is a
  /// strided view.
  explicit CudaViews(mlir::func::FuncOp step, const CudaRunsOnCudnn& on_cudnn = {});

  /// Whose bytes `value` is (an operand of its op, or the later output its
  /// op writes into), at which byte offset; nullopt for a value with
  /// bytes of its own. MemoryPlanOptions::views' form.
  std::optional<passes::ViewOf> view_of(mlir::Value value) const;
  /// Whether matmul operand `value` is a folded transpose: the bytes of the
  /// permute's operand, which the cuBLASLt step reads transposed.
  bool read_transposed(mlir::Value value) const { return transposed_reads_.contains(value); }
  /// The permute whose result matmul `op` writes (transposed), or null.
  mlir::Operation* transposed_result(mlir::Operation* matmul) const {
    return transposed_results_.lookup(matmul);
  }
  /// The epilogue matmul `op`'s call applies, or null.
  const CudaMatmulEpilogue* epilogue(mlir::Operation* matmul) const {
    auto it = epilogues_.find(matmul);
    return it == epilogues_.end() ? nullptr : &it->second;
  }
  /// The bias gradient matmul `op`'s call writes too, or null.
  const CudaMatmulBiasGrad* bias_grad(mlir::Operation* matmul) const {
    auto it = bias_grads_.find(matmul);
    return it == bias_grads_.end() ? nullptr : &it->second;
  }
  /// Whether `op` launches nothing: every result a view of an operand, or
  /// a value a matmul writes.
  bool launches_nothing(mlir::Operation* op) const { return silent_.contains(op); }

  /// How cat `op`'s kernels treat each operand, for a cat that launches
  /// kernels; null for any other op.
  const llvm::SmallVector<CatOperandWay>* cat_ways(mlir::Operation* cat) const {
    auto it = cat_ways_.find(cat);
    return it == cat_ways_.end() ? nullptr : &it->second;
  }

  size_t num_views() const { return views_.size(); }
  /// The strides (cuDNN's [B, H, rows, cols]) at which a cuDNN SDPA step
  /// reads or writes attention operand or result `value` in its root's
  /// bytes (view_of), or nullopt: its own packed bytes.
  std::optional<SdpaStrides> attention_strides(mlir::Value value) const;

 private:
  /// Step 5 of the constructor for one cat: each operand's way into the
  /// result; `placed` gets the root and byte offset of each operand written
  /// in place.
  llvm::SmallVector<CatOperandWay> cat_operand_ways(
      dialect::CatOp cat, const llvm::DenseSet<mlir::Value>& returned,
      const llvm::DenseSet<mlir::Value>& written_into_output,
      llvm::SmallVectorImpl<std::pair<mlir::Value, int64_t>>& placed) const;

  llvm::DenseMap<mlir::Operation*, llvm::SmallVector<CatOperandWay>> cat_ways_;

  llvm::DenseMap<mlir::Value, passes::ViewOf> views_;
  llvm::DenseSet<mlir::Value> transposed_reads_;
  llvm::DenseMap<mlir::Operation*, mlir::Operation*> transposed_results_;
  llvm::DenseSet<mlir::Operation*> silent_;
  llvm::DenseMap<mlir::Operation*, CudaMatmulEpilogue> epilogues_;
  llvm::DenseMap<mlir::Operation*, CudaMatmulBiasGrad> bias_grads_;

  llvm::DenseMap<mlir::Value, SdpaStrides> attention_strides_;

  /// Step 3b of the constructor (CudaAttentionViews.cpp): attention
  /// operands read, and results written, at strides.
  void find_attention_views(mlir::Block& body, const llvm::DenseSet<mlir::Value>& returned,
                            const CudaRunsOnCudnn& on_cudnn);
  void read_through_strides(mlir::Value value, const llvm::DenseSet<mlir::Value>& returned);
  void write_through_strides(mlir::Value value, const llvm::DenseSet<mlir::Value>& returned);
  /// Step 4 of the constructor: the bias gradients.
  void find_bias_grads(mlir::Block& body);
  /// Whether every op that reads `value` before `op` launches nothing
  /// (reading only views of it, by the same rule).
  bool read_only_after(mlir::Value value, mlir::Operation* op) const;
};

}  // namespace mstep::cuda
