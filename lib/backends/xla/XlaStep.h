// The xla backend's step function and what both of its halves agree on:
// its calling convention (XlaRuntimeCalls, XlaStepFunction) and where each
// value of the step lives (XlaLayout: a graph input, an output buffer or
// bytes of the one temp arena). The compile half (XlaStepEmitter.h) emits
// the function from the layout; the runtime half (XlaExecutable.h) fills in
// the pointers from it. Plain data; no MLIR or LLVM headers.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "lib/backends/cpu/ArenaPlan.h"
#include "lib/backends/cpu/FusionJitFormat.h"
#include "mstep/ir/TraceGraph.h"

namespace mstep::xla {

/// What the step function calls back into the runtime for. The generated
/// code loads these fields by position, so their order is the ABI.
struct XlaRuntimeCalls {
  /// c[i] = a[i] x b[i] for i < batch: f32, row-major, dense; a is [m, k]
  /// (stored as its transpose [k, m] when trans_a is nonzero), b [k, n]
  /// (stored [n, k] when trans_b), c [m, n]; a_stride and b_stride are the
  /// elements between consecutive a[i] (b[i]), 0 for an operand broadcast
  /// over the batch. oneDNN's sgemm (the convolutions' im2col gemms; a
  /// matmul node calls matmul_f32).
  void (*gemm_f32)(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a, const float* a,
                   int64_t a_stride, int64_t trans_b, const float* b, int64_t b_stride, float* c);
  /// Runs a fusion loop nest over [0, outer) of its outer dimension, split
  /// over the OpenMP threads in chunks that are multiples of `grain`.
  void (*parallel_nest)(cpu::FusionEntry nest, const void* const* operands, void* const* results,
                        int64_t outer, int64_t grain);
  /// Runs callout `k`: the runtime's kernel for an op the function does not
  /// compute itself. Nonzero when the kernel failed on its data.
  int32_t (*callout)(void* context, int64_t k, const void* const* operands, void* const* results);
  /// The callouts' first argument.
  void* context;
  /// gemm_f32's contract over bf16 a, b and c (uint16_t bits), plus the
  /// cpu backend's matmul epilogue: a bias (or null), an activation
  /// (MstepGemmActivation) and a residual (or null). The products
  /// accumulate in f32, the epilogue applies to that sum and each c element
  /// is rounded once to bf16, as the cpu backend's oneDNN bf16 matmul
  /// computes them: mstep_xla_gemm_bf16 (XlaGemm.h) in the runtime and
  /// in an mstep-aot object alike.
  void (*gemm_bf16)(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a,
                    const uint16_t* a, int64_t a_stride, int64_t trans_b, const uint16_t* b,
                    int64_t b_stride, uint16_t* c, const uint16_t* bias, int64_t activation,
                    const uint16_t* residual);
  /// gemm_bf16's contract over f32 memory, for the step's f32 matmul nodes
  /// (gemm_f32 stays the convolutions' sgemm): the cpu backend's f32
  /// oneDNN matmul with its epilogue folded in, one pass, one rounding;
  /// mstep_xla_gemm_f32 (XlaGemm.h) in the runtime and in an mstep-aot
  /// object alike.
  void (*matmul_f32)(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a,
                     const float* a, int64_t a_stride, int64_t trans_b, const float* b,
                     int64_t b_stride, float* c, const float* bias, int64_t activation,
                     const float* residual);
  /// gemm_f32's contract over bf16 a and b (uint16_t bits) and an f32 c:
  /// the bf16 convolutions' im2col gemms (exact products, f32 sums, the
  /// result left in f32 for col2im and the sum over samples).
  /// mstep_xla_gemm_bf16_f32 (XlaGemm.h) in the runtime and in an
  /// mstep-aot object alike.
  void (*gemm_bf16_f32)(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t trans_a,
                        const uint16_t* a, int64_t a_stride, int64_t trans_b, const uint16_t* b,
                        int64_t b_stride, float* c);
};

/// The step: `inputs[i]` is graph input i, `outputs[j]` the buffer of the
/// j-th value of XlaLayout::output_values, `temp` the arena
/// (XlaLayout::arena_bytes, aligned to 64). Returns 0, or 1 + the number of
/// the callout that failed, or -(1 + node) when the node's own loop found
/// invalid data (XlaStepFailure.h); the step stopped there.
using XlaStepFunction = int32_t (*)(void* const* inputs, void* const* outputs, void* temp,
                                    const XlaRuntimeCalls* calls);

/// The step function's symbol in the shared object.
inline constexpr char kXlaStepSymbol[] = "mstep_xla_step";
/// The step's gemm table in the shared object: i64 n, then n calls of
/// MSTEP_GEMM_CALL_LENGTH values (XlaGemm.h), one per distinct
/// matmul_f32 / gemm_bf16 call, whose primitives the runtime makes when it
/// loads the step (an object without it prepares nothing).
inline constexpr char kXlaGemmCallsSymbol[] = "mstep_xla_gemm_calls";

/// Where one value (a result of a node) lives during a run.
struct ValueLocation {
  enum class Kind : uint8_t { input, output, arena };
  Kind kind = Kind::arena;
  /// input: the graph input; output: the index into output_values;
  /// arena: the byte offset.
  int64_t at = 0;
};

struct XlaLayout {
  /// Per node: the index in `values` of its result 0.
  std::vector<uint32_t> value_base;
  std::vector<ValueLocation> values;
  /// The distinct values the step writes into output buffers, in the order
  /// of the step function's `outputs`.
  std::vector<uint32_t> output_values;
  /// Per graph output: a graph input passed through (`input` >= 0), or the
  /// entry of output_values that holds it (`output`), which the plan may
  /// write into the donated input `donated_arg`.
  struct Output {
    int32_t input = -1;
    int32_t output = -1;
    int32_t donated_arg = -1;
  };
  std::vector<Output> outputs;
  /// The temp arena: the plan's values, then (at scratch_offset, 64-byte
  /// aligned) the scratch the conv nodes' im2col + gemm path shares
  /// (conv_scratch_bytes, XlaConvShape.h; 0 without one).
  int64_t arena_bytes = 0;
  int64_t scratch_offset = 0;

  uint32_t value_of(ValueRef v) const { return value_base[v.node] + v.index; }
};

/// The layout of `graph` (exported from the step function `plan` was read
/// from): its inputs first, as the exporter puts them. An internal error
/// when the two do not fit each other.
absl::StatusOr<XlaLayout> lay_out_step(const TraceGraph& graph, const cpu::ArenaPlan& plan);

/// The arguments of XlaRuntimeCalls::gemm_f32 (or gemm_bf16, by `dtype`)
/// for one matmul node.
struct GemmShape {
  int64_t batch = 1, m = 0, n = 0, k = 0, a_stride = 0, b_stride = 0;
  DType dtype = DType::f32;
};

/// The gemm a matmul node is, when the step function multiplies it itself:
/// f32 or bf16 (operands and result of one dtype), and the operands' batch
/// dims equal or one operand a matrix (a matrix rhs folds the lhs batch
/// into m). nullopt otherwise.
std::optional<GemmShape> native_gemm_shape(const TraceGraph& graph, const GraphNode& node);

/// What the compile half hands the runtime half.
struct XlaProgram {
  TraceGraph graph;
  /// The arena plan the layout was made from (what the stored form keeps).
  cpu::ArenaPlan plan;
  XlaLayout layout;
  /// The host CPU the code was generated for.
  cpu::FusionTarget target;
  /// An ELF shared object exporting kXlaStepSymbol.
  std::string shared_object;
  /// The node of each callout, in callout number order.
  std::vector<uint32_t> callouts;
};

} // namespace mstep::xla
