// The cost of one instruction on its engine, from the table
// (N = elements per partition), each formula f with the issue's ~60-cycle
// fixed access cost composed as max(f, access_fixed_cycles + streamed
// cycles) (CostParams::access_fixed_cycles says why):
//   nc_matmul      max(min(64, M), N, 60 + N), x4 for fp32 (the streamed
//                  N included), + matmul_overhead_cycles (fitted)
//   activation, tensor_scalar, tensor_copy, bn_stats   max(64, 60 + N)
//   bn_aggr        max(64, 60 + 13N/3)
//   tensor_tensor  max(64, 60 + N) with no input in PSUM (the fast case), else max(64, 60 + 2N)
//   tensor_reduce  60 + N, 60 + N/2 for bf16 add and max
//   iota, affine_select (GpSimd)                     affine_fixed_cycles (150) + N
//   philox_uniform (GpSimd)   affine_fixed_cycles + philox_cycles_per_element x N
//   dma_copy, dma_indirect   dma_issue_cycles on Sync; the transfer on its DMA engine
//                  (an accumulating dma_indirect reads and writes HBM: twice the bytes)
// N doubles (strided_penalty) when an operand's most-minor stride is over 16 B.
// A DMA's transfer and HBM time count its bytes as descriptors, one per
// contiguous run, each at least dma_descriptor_bytes (dma_transfer_bytes).
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
/// Elements of one contiguous run of `ap` within a partition: the innermost
/// free dims longer than 1 while each continues the one inside it (1 when
/// the innermost one has a stride other than 1, e.g. a transposing walk).
int64_t contiguous_run(const AccessPattern& ap);
/// The bytes a DMA's transfer and HBM time are charged for: one descriptor
/// per contiguous run (the shorter of its two sides' runs), each at least
/// dma_descriptor_bytes. dma_bytes(inst) when every run is that long.
double dma_transfer_bytes(const Instruction& inst, const CostParams& params);

} // namespace mstep::neuron
