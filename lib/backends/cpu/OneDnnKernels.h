// oneDNN kernels for the cpu backend: matmul (f32/bf16, batched, with
// broadcast batch dims), conv2d and its two gradients, max/avg pooling and
// their gradients, and layer_norm (softmax is a host kernel: oneDNN's is
// less accurate than the PyTorch oracle allows). Each kernel builds
// its primitives once, at construction, and allocates its scratchpad and
// workspaces then too; run() only points the memories at the given
// buffers and executes. Cases whose semantics oneDNN cannot match exactly
// (other dtypes, empty tensors, ceil-mode windows with a different divisor)
// are declined with nullptr, and the backend runs the ref kernel instead.
// conv and max pooling kernels also check their inputs at run
// time: on NaN or inf, which oneDNN propagates differently, that call runs
// the ref kernel (OneDnnSpecialValueGuard.h).
#pragma once

#include <memory>
#include <optional>

#include "absl/status/statusor.h"
#include "lib/backends/cpu/CpuKernel.h"

namespace mstep::cpu {

/// A KernelFactory: a oneDNN kernel for `request.node()`, nullptr when
/// this family does not handle the node (op, dtype, shapes or attributes,
/// or no oneDNN implementation on this CPU), or an error when oneDNN
/// failed unexpectedly.
///
/// Operand look-through (matmul only): a kernel built here for an
/// `OpKind::matmul` node reads its operand i from
///   `transposed_source(graph, node.operands[i]).value_or(node.operands[i])`,
/// so the executor must pass that value's pointer as `operands[i]`.
absl::StatusOr<std::unique_ptr<CpuKernel>> make_onednn_kernel(const KernelRequest& request);

/// When `operand` is the result of a `permute` that swaps the last two
/// dims of a graph input (a `parameter` node), returns that parameter's
/// value: a matmul kernel reads it directly through a transposed (strided)
/// memory desc, and the permuted copy is not needed by that kernel.
/// Returns nullopt otherwise, in particular for a permute of an
/// intermediate value, whose memory may be reused after its last use.
///
/// The executor's liveness must count the matmul as a reader of the
/// parameter: an input donated to an output (TraceGraph::donated_to) must
/// not be overwritten before that matmul has run.
/// With `see_through` (KernelRequest::see_through_permutes), a permute of
/// an intermediate value that the executor cleared is looked through too.
std::optional<ValueRef> transposed_source(const TraceGraph& graph, ValueRef operand,
                                          const std::vector<bool>* see_through = nullptr);

/// A kernel for matmul node `request` that computes its result transposed
/// (last two dims swapped; rhs^T @ lhs^T), i.e. the value of a permute
/// that swaps them: the executor points its result at the permute's result
/// and drops the permute. Operands are (lhs, rhs) as for
/// make_onednn_kernel. nullptr when oneDNN declines (dtype, shapes).
absl::StatusOr<std::unique_ptr<CpuKernel>> make_onednn_transposed_matmul_kernel(
    const KernelRequest& request);

/// A matmul whose only use is an `mstep.fusion` node computing
///   act(matmul [+ bias]) [+ residual], act in {none, relu, gelu (erf or tanh)},
/// with a bias that broadcasts along the last dim only ([p], [1, p], ...)
/// and a residual of the product's own type (a transformer's `x + proj(h)`),
/// and at least one of the two. One oneDNN matmul computes it: the bias
/// add, gelu and the residual add run as its epilogue on the f32
/// accumulator. relu runs as an in-place pass right after, since oneDNN's
/// relu maps NaN to 0, so relu is not combined with a residual.
struct MatmulEpilogue {
  uint32_t matmul;                   // node index of the matmul
  uint32_t fusion;                   // node index of the fusion
  std::optional<ValueRef> bias;      // fusion operands
  std::optional<ValueRef> residual;
  int32_t activation = -1;           // the relu/gelu node of the body, or -1
};

/// The epilogue pattern rooted at fusion node `fusion_index`, or nullopt.
/// It checks that the matmul's result has no use besides the fusion (no
/// other node, no graph output), so the executor can skip the matmul node.
std::optional<MatmulEpilogue> find_matmul_epilogue(const TraceGraph& graph,
                                                   uint32_t fusion_index);

/// The kernel for a found epilogue, replacing both nodes. Its operands are
/// (lhs, rhs[, bias][, residual]) — lhs and rhs the matmul's operands after
/// transposed_source() look-through, as for make_onednn_kernel — and its
/// result is the fusion's result. nullptr when oneDNN declines (dtype).
absl::StatusOr<std::unique_ptr<CpuKernel>> make_onednn_matmul_epilogue_kernel(
    const TraceGraph& graph, const MatmulEpilogue& epilogue,
    const std::vector<bool>* see_through = nullptr);

}  // namespace mstep::cpu
