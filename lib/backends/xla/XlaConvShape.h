// The f32 and bf16 conv2d nodes of an xla step (conv2d, conv2d_input_grad,
// conv2d_weight_grad) read as one geometry, and the plan of the step
// function's im2col + gemm path for one (XlaConvGemm.cpp): how many
// samples one parallel call covers and the scratch it needs. Both halves
// agree on the scratch, which lay_out_step puts after the planned arena
// (one region shared by every conv node: they run one after another).
// Plain data; no LLVM or MLIR headers.
#pragma once

#include <cstdint>
#include <optional>

#include "mstep/ir/TraceGraph.h"

namespace mstep::xla {

struct ConvShape {
  DType dtype; // of every operand and the result: f32 or bf16
  int64_t batch, channels, height, width;       // the input
  int64_t out_channels, group_channels, kh, kw; // the weight
  int64_t out_h, out_w, groups;
  IntList stride, pad, dilation;

  int64_t outs_per_group() const { return out_channels / groups; }
  /// Rows of one group's im2col matrix: the forward gemm's K.
  int64_t group_taps() const { return group_channels * kh * kw; }
  int64_t out_plane() const { return out_h * out_w; }
  int64_t in_plane() const { return height * width; }
};

/// The geometry of an f32 or bf16 conv node (its operands and result all
/// of that dtype, rank 4, none empty, the attributes consistent), or
/// nullopt.
std::optional<ConvShape> conv_shape(const TraceGraph& graph, const GraphNode& node);

/// How the im2col + gemm path runs a conv node: chunks of `chunk` samples,
/// each sample one row of a row function with its own `sample_floats` of
/// scratch (its im2col matrix [channels * kh * kw, out_h * out_w], and for
/// the weight gradient its partial [out_channels, group_taps] after it).
/// A bf16 conv multiplies bf16 operands into f32 results (gemm_bf16_f32:
/// exact products, f32 sums, as oneDNN's bf16 convolution) and rounds once
/// per result element: the forward's and the weight gradient's im2col
/// matrix holds bf16 (half the bytes; the input gradient's col is its
/// gemm's f32 result), the weight gradient's scratch starts with
/// `shared_floats` (its f32 sum over the samples), and each sample adds
/// f32 staging after its partial: the forward's [out_channels, out_plane]
/// gemm result, or the input gradient's [channels, in_plane] col2im sum.
struct ConvGemmPlan {
  ConvShape conv;
  int64_t chunk = 1;
  int64_t col_floats = 0;     // the im2col matrix (4-byte units), rounded up to 64 bytes
  int64_t partial_floats = 0; // the weight gradient's partial (rounded), or 0
  int64_t out_stage_floats = 0, in_stage_floats = 0; // bf16's staging, or 0
  int64_t sample_floats = 0;  // the sum of the four
  int64_t shared_floats = 0;  // bf16: the weight gradient's f32 sum, or 0
  int64_t scratch_bytes() const { return (shared_floats + chunk * sample_floats) * 4; }
};

/// The plan of `node` when the step function runs it as im2col + gemm,
/// nullopt when it does not: not an f32 or bf16 conv, or one sample's
/// scratch above kMaxSampleScratch (an f32 conv then keeps the direct
/// loops, XlaConvLoops.cpp; a bf16 one is a callout).
std::optional<ConvGemmPlan> conv_gemm_plan(const TraceGraph& graph, const GraphNode& node);

/// The scratch the step's conv nodes need: the largest plan's.
int64_t conv_scratch_bytes(const TraceGraph& graph);

/// The temp arena of a step whose plan takes `planned` bytes: the scratch
/// after it, 64-byte aligned (XlaLayout::scratch_offset).
inline int64_t conv_scratch_offset(int64_t planned) { return (planned + 63) / 64 * 64; }
inline int64_t arena_with_conv_scratch(int64_t planned, int64_t scratch) {
  return scratch > 0 ? conv_scratch_offset(planned) + scratch : planned;
}

} // namespace mstep::xla
