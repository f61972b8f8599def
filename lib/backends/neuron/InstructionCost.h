// The cost of one instruction on its engine, from the table
// (N = elements per partition):
//   nc_matmul      max(min(64, M), N), x4 for fp32, + matmul_overhead_cycles
//   activation, tensor_scalar, tensor_copy, bn_stats, bn_aggr   max(fixed, N)
//   tensor_tensor  max(fixed, N) with no input in PSUM (the fast case), else max(fixed, 2N)
//   tensor_reduce  N, N/2 for bf16 add and max (at least 1)
//   iota, affine_select (GpSimd)                     affine_fixed_cycles (150) + N
//   philox_uniform (GpSimd)   affine_fixed_cycles + philox_cycles_per_element x N
//   dma_copy, dma_indirect   dma_issue_cycles on Sync; the transfer on its DMA engine
//                  (an accumulating dma_indirect reads and writes HBM: twice the bytes)
// N doubles (strided_penalty) when an operand's most-minor stride is over 16 B;
// so does a DMA's transfer time (dma_stride_factor: its bandwidth halves).
#pragma once

#include "lib/backends/neuron/CostParams.h"
#include "lib/backends/neuron/TileInstruction.h"

namespace mstep::neuron {

/// Cycles of the instruction's engine (for dma_copy: the Sync trigger).
double instruction_cycles(const Instruction& inst, const CostParams& params);
/// The engine's clock in GHz (cycles per ns).
double engine_ghz(Engine engine, const CostParams& params);
/// Bytes a dma_copy or dma_indirect moves (an accumulating one reads
/// and writes its HBM rows: twice its size).
double dma_bytes(const Instruction& inst);
/// strided_penalty when a side of a DMA walks its most-minor dimension (the
/// innermost one longer than 1) with a stride over 16 B (a descriptor per
/// element, e.g. a transposing copy), else 1: its transfer and HBM time scale by it.
double dma_stride_factor(const Instruction& inst, const CostParams& params);

} // namespace mstep::neuron
