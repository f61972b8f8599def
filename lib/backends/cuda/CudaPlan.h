// The cuda executable's plan: a linear list of steps over the step's
// values, each a kernel launch (with the kernel's PTX and cubins) or a
// cuBLASLt matmul (mstep.matmul: shape, transposes, dtype, epilogue) or a
// cuDNN SDPA execution (mstep.sdpa / sdpa_backward: shapes, options), and
// the memory plan: every intermediate value at an offset of one device
// arena. The compile half (CudaCompiler.cpp) builds it from MLIR;
// CudaExecutable (runtime half, no MLIR) runs it, and CudaPlanFormat.h
// serializes it. Library-internal.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lib/backends/cuda/CublasLt.h"
#include "lib/backends/cuda/CudaCollectiveInfo.h"
#include "lib/backends/cuda/CudnnSdpaConfig.h"
#include "lib/backends/cuda/PtxasReport.h"
#include "absl/status/status.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/OpKind.h"

namespace mstep::cuda {

/// A cubin for one architecture.
struct CudaCubin {
  std::string arch;   ///< "sm_90"
  std::string image;  ///< the ELF
  friend bool operator==(const CudaCubin&, const CudaCubin&) = default;
};

/// One parameter of a kernel whose parameters are not all device pointers
/// (a custom op's CUDA kernel, CudaCustomLowering.h): the device address of
/// its launch's args[arg], or (arg < 0) a scalar of `bytes` bytes (4 or 8)
/// whose little-endian bits are `bits` (`floating`: a float or double).
struct CudaKernelSlot {
  int arg = -1;
  uint8_t bytes = 8;
  bool floating = false;
  uint64_t bits = 0;
  friend bool operator==(const CudaKernelSlot&, const CudaKernelSlot&) = default;
};

/// One kernel: its PTX (kept for the JIT on newer GPUs), a cubin per
/// architecture it was assembled for, and ptxas's report for each.
struct CudaKernelInfo {
  std::string name;    ///< the entry function
  std::string origin;  ///< the op it computes, for errors and dumps ("mstep.fusion #2")
  std::array<unsigned, 3> grid = {1, 1, 1};
  std::array<unsigned, 3> block = {1, 1, 1};
  std::string ptx;
  std::vector<CudaCubin> cubins;
  std::vector<PtxasKernelReport> reports;
  /// Empty: one device pointer per launch argument, in order (mstep's own
  /// kernels). Otherwise the kernel's parameters one by one.
  std::vector<CudaKernelSlot> slots;
  /// Dynamic shared memory per block.
  unsigned shared_bytes = 0;
  friend bool operator==(const CudaKernelInfo&, const CudaKernelInfo&) = default;
};

/// One step of the plan. A kernel launch (matmul < 0, attention < 0,
/// collective < 0):
/// kernel `kernel` with one device pointer per argument, the buffers of
/// values `args` in parameter order. A cuBLASLt call (matmul >= 0):
/// plan.matmuls[matmul] with its values (CudaMatmulInfo). A cuDNN SDPA
/// execution (attention >= 0): plan.attentions[attention] with its values
/// by role (CudaAttentionInfo). A collective (collective >= 0):
/// plan.collectives[collective]. Each writes values `writes`.
struct CudaLaunchStep {
  int kernel = 0;
  int matmul = -1;
  int attention = -1;
  int collective = -1;
  std::vector<int> args;
  std::vector<int> writes;
  friend bool operator==(const CudaLaunchStep&, const CudaLaunchStep&) = default;
};

/// One cuBLASLt matmul step: `batch` matmuls of `shape` in one strided
/// batched call; matmul i reads A at its value's buffer + i * a_stride
/// elements (B, C likewise; a stride of 0 shares the operand across the
/// batch, as a broadcast batch dim does). Its values: args A, B [, bias];
/// writes C [, the bias gradient] (shape.bias_grad: a sum over k that the
/// call writes too, a linear layer's bias gradient).
struct CudaMatmulInfo {
  std::string origin;  ///< the op it computes ("mstep.matmul #3")
  MatmulShape shape;
  int64_t batch = 1;
  int64_t a_stride = 0, b_stride = 0, c_stride = 0;
  /// What runs where the device's cuBLASLt has no algorithm for the
  /// call's epilogue (CudaExecutable asks when it loads the plan): the call
  /// without it (without_epilogue(): reading A and B, writing C), then
  /// these kernel launches, which do the epilogue's work: the bias add and
  /// activation over C in place (the absorbed ops' kernels), or the bias
  /// gradient (the column sum's kernels over the summed operand). Their
  /// kernels carry PTX only (no cubins: the driver JITs them where a device
  /// takes the fallback). Empty for a call without an epilogue, and in
  /// plans of format 7 and older.
  std::vector<CudaLaunchStep> fallback;
  MatmulBatch batch_info() const { return {batch, a_stride, b_stride, c_stride}; }
  size_t num_args() const { return shape.bias ? 3 : 2; }
  size_t num_writes() const { return shape.bias_grad != MatmulBiasGrad::none ? 2 : 1; }
  /// A bias, an activation or a bias gradient.
  bool has_epilogue() const {
    return shape.bias || shape.epilogue != MatmulEpilogue::none ||
           shape.bias_grad != MatmulBiasGrad::none;
  }
  /// The shape without bias, activation and bias gradient.
  MatmulShape without_epilogue() const {
    MatmulShape plain = shape;
    plain.bias = false;
    plain.epilogue = MatmulEpilogue::none;
    plain.bias_grad = MatmulBiasGrad::none;
    return plain;
  }
  friend bool operator==(const CudaMatmulInfo&, const CudaMatmulInfo&) = default;
};

/// One cuDNN SDPA step (CudnnSdpa.h): the attention node's shapes and
/// options, forward or backward. The step's values by role, in order:
///   forward:  args  q, k, v [, mask] [, valid_seq_len]; writes out, stats
///   backward: args  q, k, v, out, stats, grad_out [, mask] [, valid_seq_len];
///             writes grad_q, grad_k, grad_v
/// (mask when config.mask is additive, valid_seq_len when config.padding
/// is right). stats (f32 [B, H, L, 1], the forward's log-sum-exp) is a
/// value the compiler adds: cuDNN's backward needs the forward's out and
/// stats where mstep.sdpa_backward recomputes them. The cuDNN graph is
/// built and finalized at load time, on the device.
struct CudaAttentionInfo {
  std::string origin;  ///< the op it computes ("mstep.sdpa #2")
  bool backward = false;
  CudnnSdpaConfig config;
  /// How many values the step reads and writes.
  size_t num_args() const {
    return (backward ? 6 : 3) + (config.mask != SdpaMaskKind::none) +
           (config.padding != SdpaPadding::none);
  }
  size_t num_writes() const { return backward ? 3 : 2; }
  friend bool operator==(const CudaAttentionInfo&, const CudaAttentionInfo&) = default;
};

/// The roles of an attention step's args and writes, in order ("q", "k",
/// ..., "mask", "valid_seq_len"; "out", "stats" / "grad_q", ...).
std::vector<std::string> attention_arg_roles(const CudaAttentionInfo& info);
std::vector<std::string> attention_write_roles(const CudaAttentionInfo& info);


/// A value that is another value's bytes, so no launch copies it: a
/// reshape, a permute that moves only size-1 dims, a contiguous slice (at
/// a byte offset), a transpose a cuBLASLt step reads through its transpose
/// flag, or an intermediate written straight into the step output that
/// reshapes it. Its address is `root`'s + `byte_offset`; `root` is no
/// alias, and holds the bytes for as long as any alias of it is used
/// (the memory plan widens its lifetime).
struct CudaAlias {
  int value = -1;
  int root = -1;
  int64_t byte_offset = 0;
  friend bool operator==(const CudaAlias&, const CudaAlias&) = default;
};

/// Arena offsets are multiples of this (cuMemAlloc's alignment, enough for
/// every vector load and cuBLASLt's operands).
inline constexpr int64_t kCudaArenaAlignment = 256;

struct CudaPlan {
  /// Every value: the step's inputs first (0 .. num_inputs-1), then the
  /// values the launches compute.
  std::vector<TensorType> values;
  size_t num_inputs = 0;
  /// The value of each step output.
  std::vector<int> outputs;
  std::vector<CudaKernelInfo> kernels;
  std::vector<CudaMatmulInfo> matmuls;
  std::vector<CudaAttentionInfo> attentions;
  std::vector<CudaCollectiveInfo> collectives;
  std::vector<CudaLaunchStep> launches;
  /// The memory plan: empty (every computed value gets a buffer of its
  /// own each run), or one entry per value: the offset of an intermediate
  /// value in the arena, or -1 for a value with its own buffer (the step's
  /// inputs, and its outputs, which each run returns in fresh buffers).
  /// Values whose launches can be live together never overlap
  /// (validate_cuda_plan checks it).
  std::vector<int64_t> arena_offsets;
  /// The arena's size: the executable allocates it once.
  int64_t arena_bytes = 0;
  /// The device-side error word (CudaErrorWord.h): the value (i64[8],
  /// outside the arena) that the kernels able to detect bad data (nll_loss
  /// with a target out of range) set, and that the optimizer update reads
  /// to leave parameters and state as they were; -1: no kernel checks.
  int error_word = -1;
  /// The values that are views of others (their arena offset is -1: they
  /// take no bytes of their own).
  std::vector<CudaAlias> aliases;
  /// Each value's alias, or null.
  const CudaAlias* alias_of(int value) const {
    for (const CudaAlias& alias : aliases)
      if (alias.value == value) return &alias;
    return nullptr;
  }
  friend bool operator==(const CudaPlan&, const CudaPlan&) = default;
};

/// Gives each of `values` that is in the arena's plan (not an output, not
/// an alias) bytes at the arena's end, which no other value shares: a value
/// the memory planner's program order cannot place (an attention step's
/// stats, a bias gradient a matmul writes). A plan without an arena
/// (arena_offsets empty) is left as it is.
void place_in_own_arena_slots(CudaPlan& plan, std::vector<int> values);

/// Places each op's scratch values (`scratch`: a list per op) in one
/// region at the arena's end, every op's list from the region's start:
/// values an op uses only within its own steps, which never overlap
/// another op's. A plan without scratch is left as it is.
void place_scratch_at_arena_end(CudaPlan& plan, const std::vector<std::vector<int>>& scratch);

/// `plan` as it runs where cuBLASLt has no algorithm for the epilogues of
/// `matmuls` (indices into plan.matmuls, each with a fallback): each of
/// those calls without its epilogue (its bias operand and bias-gradient
/// write dropped), followed by its fallback launches.
void apply_epilogue_fallbacks(CudaPlan& plan, const std::vector<int>& matmuls);

/// The plan as text: the arena and each value's offset in it, each launch
/// with its grid, block, arguments and ptxas's registers, shared memory and
/// spills per architecture (the IR dump's "cuda plan" stage).
std::string describe_cuda_plan(const CudaPlan& plan);
/// One step of `plan` on one line: the kernel (its op, grid and block), or
/// the cuBLASLt, cuDNN or NCCL call (its op and shape).
std::string describe_cuda_step(const CudaPlan& plan, const CudaLaunchStep& step);

}  // namespace mstep::cuda
