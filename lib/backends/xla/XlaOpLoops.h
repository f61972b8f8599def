// The ops the xla step function computes with loops of its own instead of
// calling out to a cpu-backend kernel: each supported node becomes one
// internal LLVM function `i32 (ptr operands, ptr results)` (XlaLoopBuilder.h)
// that the step function calls with the node's pointers. The loops compute
// what the ref backend's kernels compute, in the same precision and
// order where the cpu backend matches ref bit for bit (reductions and
// softmax accumulate in f64, the optimizer rounds each f32 operation as
// the ref kernel does). Library-internal (the compile half).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/container/flat_hash_map.h"

#include "mstep/ir/TraceGraph.h"

namespace llvm {
class Function;
class Module;
class Value;
} // namespace llvm

namespace mstep::xla {

class LoopBuilder;
struct ConvShape;

struct OpLoop {
  llvm::Function* function = nullptr;
  /// The function returns nonzero when the node's data is invalid (an
  /// nll_loss target or an index out of range); it then wrote none of its results,
  /// and the step stops there.
  bool can_fail = false;
  /// When `function` is a row function (LoopBuilder::Rows; its type says
  /// so): its rows [0, rows) (none for an empty op), which the step
  /// function splits over the OpenMP threads in
  /// multiples of `grain` rows when the op touches `work` elements or more
  /// (cpu::FusionJit::kParallelElements, as a fusion nest). Each row is
  /// computed as in one call, so the split changes no result.
  int64_t rows = 0;
  int64_t grain = 1;
  int64_t work = 0;
  /// With a row function that needs its data checked first (an index
  /// out of range): `i32 (ptr operands, ptr results)`, run before the
  /// rows; nonzero stops the step there, before anything is written.
  llvm::Function* check = nullptr;
  /// With a row function: a plain function (cannot fail) the step calls
  /// once after all rows, or null.
  llvm::Function* after_rows = nullptr;
  /// A plain function (cannot fail) whose operand array has, after the
  /// node's operands: the arena's loop scratch (XlaLayout::scratch_offset,
  /// XlaLoopScratch.h) and the runtime's gemm_f32 and parallel_nest
  /// (XlaRuntimeCalls), which it calls itself (the im2col + gemm convs,
  /// XlaConvGemm.cpp). A row function may have it too (a bf16 attention
  /// mask gradient summing in the scratch); so may its check and after_rows.
  bool calls_runtime = false;
  /// With calls_runtime: the gemm pointer after the scratch is
  /// XlaRuntimeCalls::gemm_bf16_f32 (the bf16 convolutions'), not gemm_f32.
  bool gemm_bf16_f32 = false;
};

/// The pointers a calls_runtime function reads after the node's operands.
inline constexpr size_t kRuntimeOperands = 3;

/// Emits the functions of one step. Nodes that compute the same thing (the
/// same op, attributes and operand and result types: a layer repeated)
/// share one function, which keeps the code and its compile time small.
class OpLoops {
public:
  /// The node's function in `module`, or nullopt when the node is not one
  /// the step function computes (it is then a callout).
  std::optional<OpLoop> emit(llvm::Module& module, const TraceGraph& graph, uint32_t node);

private:
  absl::flat_hash_map<std::string, std::optional<OpLoop>> by_signature_;
};

// The families (one file each); each returns nullopt before emitting
// anything when it does not take the node.
std::optional<OpLoop> emit_reduction_loop(llvm::Module& module, const TraceGraph& graph,
                                          uint32_t node);
std::optional<OpLoop> emit_softmax_loop(llvm::Module& module, const TraceGraph& graph,
                                        uint32_t node);
std::optional<OpLoop> emit_loss_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node);
std::optional<OpLoop> emit_random_loop(llvm::Module& module, const TraceGraph& graph,
                                       uint32_t node);
std::optional<OpLoop> emit_copy_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node);
std::optional<OpLoop> emit_optimizer_loop(llvm::Module& module, const TraceGraph& graph,
                                          uint32_t node);
std::optional<OpLoop> emit_index_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node);
std::optional<OpLoop> emit_norm_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node);
std::optional<OpLoop> emit_attention_loop(llvm::Module& module, const TraceGraph& graph,
                                          uint32_t node);
std::optional<OpLoop> emit_gather_loop(llvm::Module& module, const TraceGraph& graph,
                                       uint32_t node);
std::optional<OpLoop> emit_fill_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node);
std::optional<OpLoop> emit_pool_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node);
std::optional<OpLoop> emit_conv_gemm(llvm::Module& module, const TraceGraph& graph, uint32_t node);
std::optional<OpLoop> emit_conv_loop(llvm::Module& module, const TraceGraph& graph, uint32_t node);
std::optional<OpLoop> emit_matmul_loop(llvm::Module& module, const TraceGraph& graph,
                                       uint32_t node);

/// The check (OpLoop::check) of an op whose operand 1 holds `count`
/// i64 or i32 indices into a dim of `size`: returns 1 when one is outside
/// [0, size); otherwise copies `copy_bytes` (0: nothing) of operand 0 into
/// result 0 (scatter_add and index_add start from their input), returns
/// 0 (XlaGatherLoops.cpp).
llvm::Function* emit_index_check(llvm::Module& module, const std::string& name,
                                 size_t operands, DType index_dtype, int64_t count, int64_t size,
                                 int64_t copy_bytes);

/// Words 0 and 1 of Philox::block(seed, counter) (mstep/core/Philox.h) in
/// integer IR, 10 rounds (XlaRandomLoops.cpp; the attention loops' dropout
/// draws too).
std::pair<llvm::Value*, llvm::Value*> philox(LoopBuilder& lb, llvm::Value* seed,
                                             llvm::Value* counter);

/// The window positions [lo, hi) whose tap k lands inside the input along
/// dim `d` of a conv (o * stride - pad + k * dilation in [0, size)); hi <=
/// lo when none does; lo may exceed the windows (XlaConvLoops.cpp; the
/// im2col loops too).
std::pair<llvm::Value*, llvm::Value*> conv_tap_range(LoopBuilder& lb, const ConvShape& c, int d,
                                                     llvm::Value* k);

} // namespace mstep::xla
