// The xla backend's step function in LLVM IR (XlaStep.h): the whole step,
// node by node in program order, as one function. Library-internal (the
// compile half); includes no MLIR headers.
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/xla/XlaStep.h"

namespace llvm {
class Module;
}

namespace mstep::xla {

/// Adds kXlaStepSymbol to `module`, which holds the entries of the step's
/// compiled fusion nests (FusionJitLowering.h; `fusions` is their index,
/// one per fusion node in program order). Per node:
/// 1. a compiled fusion calls its nests' entries (inlined by LLVM), on the
///    OpenMP threads through XlaRuntimeCalls::parallel_nest when large;
/// 2. a matmul of native_gemm_shape calls XlaRuntimeCalls::matmul_f32 (or
///    gemm_bf16); an
///    operand that is a transpose of the last two dims is read from the
///    transpose's source (trans_a, trans_b) when nothing overwrote the
///    source's bytes since, and a transpose no other node reads is dropped;
///    a gemm whose only reader is a transpose of it writes the transpose's
///    result (as b^T a^T) when that memory holds nothing it reads; a
///    gemm whose only reader is a fusion adding a bias (then gelu or relu)
///    or a residual computes that fusion as its epilogue, as the cpu
///    backend does (cpu::find_matmul_epilogue), and the fusion is dropped;
/// 3. a reshape copies its bytes;
/// 4. reductions, softmax, nll_loss, rng and creation ops, data movement,
///    convolutions (im2col + gemm_f32 over the layout's scratch) and the
///    optimizer update run as loops of the function's own (XlaOpLoops.h),
///    checked for failure where they can fail;
/// 5. every other node is a callout (XlaRuntimeCalls::callout), checked
///    for failure.
/// The nests' entries become internal: the function and its gemm table
/// (kXlaGemmCallsSymbol) are the object's exports. Returns the callouts' nodes, in callout number order.
absl::StatusOr<std::vector<uint32_t>>
emit_step_function(llvm::Module& module, const TraceGraph& graph, const XlaLayout& layout,
                   const std::vector<cpu::FusionInfo>& fusions);

} // namespace mstep::xla
