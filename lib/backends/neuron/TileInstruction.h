// One instruction of a tile program: an opcode on an engine, its operands
// as access patterns, its immediates, and the semaphores it waits on and
// signals. Each engine runs its own instructions in program order; only
// semaphores order instructions of different engines.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/string_view.h"
#include "lib/backends/neuron/AccessPattern.h"
#include "lib/backends/neuron/Engine.h"

namespace mstep::neuron {

enum class Opcode : uint8_t {
  dma_copy,      ///< Sync: dst = src, HBM <-> SBUF, same dtype, on one of the DMA engines
  nc_matmul,     ///< Tensor: PSUM dst[M, N] (+)= stationary[K, M]^T . moving[K, N]
  tensor_tensor, ///< Vector/GpSimd: dst = a <alu> b
  tensor_scalar, ///< Vector/GpSimd: dst = (src <alu> scalar) [<alu2> scalar2]
  activation,    ///< Scalar: dst = f(src * scale + bias), optional add-reduce into accum
  tensor_copy,   ///< Vector/Scalar/GpSimd: dst = src, converting the dtype
  tensor_reduce, ///< Vector/GpSimd: dst = <alu>-reduction of src over its innermost free dim
  iota,          ///< GpSimd: dst = the affine expression (AffineExpr) at each element
  affine_select, ///< GpSimd: dst = cmp(affine expression, 0) ? src : scalar (the fill value)
  bn_stats,      ///< Vector: fp32 dst [P, 3] = (count, mean, M2) of each partition's src
                 ///< (<= kBnStatsMaxFree elements; M2 the sum of squared deviations)
  bn_aggr,       ///< Vector: fp32 dst [P, 2] = (mean, biased variance) of the bn_stats
                 ///< records [P, k * 3] in src (combined as Chan et al.)
  /// Sync: a DMA whose HBM side picks one row per partition: partition p
  /// moves HBM row index[p] (srcs {data, index}; index an SBUF int32 [P, 1];
  /// the HBM pattern's partition_stride is the row length). HBM -> SBUF
  /// gathers; SBUF -> HBM scatters, with `accumulate` adding into HBM
  /// (read-modify-write, fp32, rows in partition order, so repeated indices
  /// add up in that order).
  dma_indirect,
  /// GpSimd: fp32 dst = Philox4x32-10 uniform in [0, 1) (mstep's
  /// Philox::uniform) of key seed and counter offset + the affine
  /// expression, the (seed, offset) pair read from src, an SBUF int32
  /// [P, 4] (seed lo, hi; offset lo, hi: an int64 [2] RNG state).
  philox_uniform,
  /// Vector: dst = pred != 0 ? on_true : on_false (srcs {pred, on_true,
  /// on_false}, one shape; NKI nl.where); `where` with NaN/inf kept out of
  /// the unselected side, which a multiply by a 0/1 mask would not.
  select,
};

enum class AluOp : uint8_t {
  add,
  subtract,
  multiply,
  max,
  min,
  divide,
  is_ge, ///< 1.0 where a >= b, else 0.0 (NKI nl.greater_equal)
  is_equal,  ///< 1.0 where a == b, else 0.0 (NKI nl.equal)
  not_equal, ///< 1.0 where a != b (NaN too), else 0.0 (NKI nl.not_equal)
};

/// iota / affine_select: predicate cmp(value, 0) of the affine expression.
enum class CmpOp : uint8_t { greater_equal, equal };

/// The affine expression of iota and affine_select, per element of dst:
/// offset + partition * channel_multiplier + sum over dst's free dims of
/// index_d * steps[d] (partition counted from dst's start partition, as
/// NKI's channel_id; steps one per free dim of dst, innermost last).
struct AffineExpr {
  int64_t offset = 0;
  int64_t channel_multiplier = 0;
  absl::InlinedVector<int64_t, kMaxFreeDims> steps;
};

enum class ActivationFunction : uint8_t {
  identity,
  exp,
  tanh,
  relu,
  sigmoid,
  square,
  rsqrt,
  log,  ///< natural log (log_softmax)
  sqrt, ///< the optimizers' sqrt (Adam's denominator, a gradient norm)
  /// The Scalar engine's table functions (NKI nl.erf, nl.gelu,
  /// nl.gelu_apprx_tanh), modelled as the formulas ref evaluates, in fp32
  /// with libm's erff/tanhf (glibc: at most 1-2 ulp); the hardware's
  /// interpolation-table error is not public and not modelled.
  erf,
  gelu,      ///< 0.5 x (1 + erf(x / sqrt 2))
  gelu_tanh, ///< 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
  cos,       ///< NKI nl.cos (randn's Box-Muller), libm's cosf
};

absl::string_view opcode_name(Opcode op);
absl::string_view alu_op_name(AluOp op);
absl::string_view activation_name(ActivationFunction f);

/// Wait until semaphore `semaphore` has been signalled at least `value` times.
struct SemaphoreWait {
  int32_t semaphore = 0;
  int32_t value = 0;
};

struct Instruction {
  Engine engine = Engine::vector;
  Opcode opcode = Opcode::tensor_copy;
  AccessPattern dst;
  /// nc_matmul: {stationary, moving}; tensor_tensor: {a, b}; others: {src}.
  absl::InlinedVector<AccessPattern, 2> srcs;

  AluOp alu = AluOp::add;
  /// tensor_scalar: the scalar is op0's left operand (NKI reverse0): s - x, s / x.
  bool reverse = false;
  /// tensor_scalar's optional second op.
  std::optional<AluOp> alu2;
  float scalar = 0.0f;
  float scalar2 = 0.0f;

  /// activation: f(src * scale + bias), bias a [P, 1] pattern or `bias_value`,
  /// scale `scale` or the [P, 1] pattern `scale_column`.
  ActivationFunction function = ActivationFunction::identity;
  float scale = 1.0f;
  float bias_value = 0.0f;
  std::optional<AccessPattern> bias;
  /// activation: when set, a [P, 1] pattern that replaces `scale` (one
  /// multiplier per partition, e.g. a norm's 1/std).
  std::optional<AccessPattern> scale_column;
  /// activation: when set, the sum along the free axis of the result, [P, 1].
  std::optional<AccessPattern> accum;

  /// iota, affine_select, philox_uniform: the expression; affine_select's
  /// fill is `scalar`.
  AffineExpr affine;
  CmpOp cmp = CmpOp::greater_equal;

  /// nc_matmul: add into PSUM (true) or overwrite it (false, the first K
  /// tile); dma_indirect into HBM: add into HBM (read-modify-write).
  bool accumulate = false;
  /// philox_uniform: which word of the Philox block becomes the uniform
  /// (word >> 8) * 2^-24: 0 as Philox::uniform, 1 Philox::normal's second.
  int32_t philox_word = 0;
  /// dma_copy, dma_indirect: which of the DMA engines moves the data.
  int32_t dma_engine = 0;

  absl::InlinedVector<SemaphoreWait, 2> waits;
  absl::InlinedVector<int32_t, 1> signals; ///< each +1 when the instruction completes
};

/// "#12 Vector tensor_tensor", how errors name an instruction.
std::string describe_instruction(int64_t index, const Instruction& inst);

/// The queues that complete instructions in order: the four compute
/// engines, then the DMA engines (Sync issues DMAs in program order, but
/// each DMA engine moves its own one after another, so transfers on two
/// DMA engines may complete in either order).
inline constexpr int kCompletionQueues = 4 + kDmaEngines;

/// 0 Tensor, 1 Vector, 2 Scalar, 3 GpSimd, 4 + d DMA engine d.
int completion_queue(const Instruction& inst);

} // namespace mstep::neuron
