// The cuda compile half's code generation: one op of the step (an
// mstep.fusion, a standalone elementwise op, a reduction) becomes GPU
// kernels through MLIR (softmax, norms, losses, dropout, reshapes and the
// optimizer update instead start from loops built on the buffers,
// CudaOpLoops.h, and join at the tiling):
//
//   a func on memrefs holding the op (inputs read through to_tensor, the
//   results materialized in the output memrefs)
//   -> mstep-lower-to-linalg -> empty-tensor elimination, one-shot
//   bufferization (linalg writes the outputs in place; a buffer left
//   between kernels becomes a temporary parameter of the func)
//   -> convert-linalg-to-parallel-loops
//   -> each scf.parallel collapsed to one dimension and tiled by the block
//      size (256 threads): the "tiled loop nest", kept as text (dumps, and
//      the host-numerics test lowers it for the CPU)
//   -> gpu-map-parallel-loops (tiles on block x, lanes on thread x)
//   -> convert-parallel-loops-to-gpu -> gpu-kernel-outlining
//   -> nvvm-attach-target -> convert-gpu-to-nvvm (bare pointers: a kernel
//      takes one pointer per buffer) -> gpu-module-to-binary (PTX, with
//      libdevice from the toolkit for exp, erf, ...)
//
// Each scf.parallel is one launch; its grid and block are constants
// (static shapes). An op the pipeline cannot lower is an error naming it
// and saying "not yet lowered for cuda". Library-internal; MLIR.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mlir/IR/TypeRange.h"
#include "mstep/core/TensorType.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir {
class DialectRegistry;
class Operation;
namespace func {
class FuncOp;
}
}  // namespace mlir

namespace mstep::cuda {

/// How the row-wise ops (softmax, log_softmax, layer_norm, rms_norm,
/// nll_loss's sum, sums and means over the last dims) reduce a row
/// (MSTEP_CUDA_ROW_REDUCTION): a block of threads per row, reducing
/// through shared memory (CudaBlockRows.h), with the ops over the same
/// rows in one kernel (fused: row groups, CudaRowGroups.h) or a kernel
/// per op (block); or one thread per row (the first form; kept to
/// compare the forms on a GPU).
enum class CudaRowReduction { fused, block, thread };

/// How a float sum or mean over leading dims (a column sum: bias and
/// layer_norm weight gradients) and clip_grad_norm_'s per-tensor norms are
/// reduced (MSTEP_CUDA_COLUMN_REDUCTION): the rows split into chunks, a
/// block per chunk and column tile, then a pass over the chunks' partials
/// (CudaColumnSums.h), or one thread per column (per gradient's norm), the
/// first form (kept to compare the two on a GPU).
enum class CudaColumnReduction { split, thread };

/// How mstep.conv2d and its two gradients are lowered (MSTEP_CUDA_CONV):
/// im2col (or col2im) kernels around cuBLASLt matmuls (CudaConvLowering.h),
/// or the direct loop nests (CudaConvLoops.h), ref's sums bit for bit but
/// one lane per element. im2col falls back to the direct loops for dtypes
/// cuBLASLt does not take and where its scratch would pass
/// conv_im2col_max_bytes.
enum class CudaConvForm { im2col, direct };

struct CudaCodegenOptions {
  /// The PTX's target: sm_80 PTX assembles for sm_80 and sm_90 and JITs on
  /// newer GPUs.
  std::string chip = "sm_80";
  std::string ptx_features = "+ptx80";
  /// The CUDA toolkit (libdevice).
  std::string toolkit;
  /// Threads per block.
  int threads = 256;
  CudaRowReduction row_reduction = CudaRowReduction::fused;
  /// With block reductions, rows shorter than this stay one thread per
  /// row (a block would leave most of its threads idle).
  int64_t block_row_min = 32;
  CudaColumnReduction column_reduction = CudaColumnReduction::split;
  /// Blocks a split reduction's first pass aims at: two per SM of a
  /// 132-SM H100 (fewer where the rows run out first).
  int64_t split_target_blocks = 264;
  /// The optimizer update of every parameter in one launch
  /// (MSTEP_CUDA_OPTIMIZER=multi), or a launch per parameter (per_tensor).
  bool multi_tensor_launch = true;
  /// Buffers (kernel parameters) one such launch takes at most: 4 KiB of
  /// parameters, the limit of PTX before ISA 8.1 (the rest of the
  /// parameters go to further launches).
  int64_t multi_tensor_max_buffers = 4096 / 8;
  /// index_add takes its owner form (a lane per output element) when that
  /// form's estimated cost is at most this times the sequential form's
  /// (CudaOpLoops.cpp: index_add_by_owner); 0 keeps the sequential form,
  /// infinity takes the owner form.
  double index_add_owner_max_ratio = 1.0;
  CudaConvForm conv = CudaConvForm::im2col;
  /// The most scratch bytes (columns, transposed gradients) one
  /// convolution's im2col form may take; a larger one keeps the direct
  /// loops.
  int64_t conv_im2col_max_bytes = int64_t{1} << 30;
};

/// One kernel launch of an op.
struct GeneratedLaunch {
  std::string kernel;  ///< the PTX entry function
  std::array<unsigned, 3> grid = {1, 1, 1};
  std::array<unsigned, 3> block = {1, 1, 1};
  /// Per kernel parameter: the op's operand i (i < num operands), its
  /// result i - num operands, or after the results its temporary
  /// i - num operands - num results (GeneratedKernels::temporaries).
  std::vector<unsigned> args;
  std::string ptx;
};

struct GeneratedKernels {
  std::vector<GeneratedLaunch> launches;
  /// Buffers the op's kernels pass between them (a fusion whose results
  /// differ in shape), which the plan allocates as values of their own.
  std::vector<TensorType> temporaries;
  /// Which of `temporaries` is the executable's error word (the loop
  /// nest's Nest::error_word(); the plan passes its one CudaPlan::error_word
  /// value for it), or -1.
  int error_word = -1;
  /// The module right after tiling, before the GPU mapping: a func on
  /// memrefs named like the op's kernels (operands, results, temporaries).
  std::string tiled_loops;
};

/// The dialects, interfaces and LLVM IR translations generate_op_kernels
/// needs (the cuda compiler's get_dependent_dialects).
void declare_cuda_codegen_dialects(mlir::DialectRegistry& registry);

/// The kernels of `op` (not modified), named from `name` ("op3"), in its
/// context. Errors name the op and say what is not yet lowered for cuda.
absl::StatusOr<GeneratedKernels> generate_op_kernels(mlir::Operation* op, absl::string_view name,
                                                     const CudaCodegenOptions& options);

/// Kernels from loops of the caller's own: `build` fills the empty entry
/// block of func @<name> on memrefs of the tensor types `params` (the
/// launches' args are parameter numbers), then the pipeline goes on from
/// the tiling as for generate_op_kernels. `op` is what errors name, and
/// its context is used. The composed attention's kernels
/// (CudaAttentionLoops.h) are built this way.
absl::StatusOr<GeneratedKernels>
generate_loop_kernels(mlir::Operation* op, absl::string_view name, mlir::TypeRange params,
                      llvm::function_ref<absl::Status(mlir::func::FuncOp)> build,
                      const CudaCodegenOptions& options);

}  // namespace mstep::cuda
