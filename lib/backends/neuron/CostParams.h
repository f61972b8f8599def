// The cost model's parameters: the issue's public NeuronCore-v2 figures,
// one stated assumption (dma_descriptor_bytes) and the two fitted to its
// calibration points (bench/neuron_calibration prints the fit and the error
// on each point).
#pragma once

namespace mstep::neuron {

struct CostParams {
  // Engine clocks (GHz).
  double tensor_ghz = 2.8;
  double vector_ghz = 1.12;
  double scalar_ghz = 1.4;
  double gpsimd_ghz = 1.4;
  double sync_ghz = 1.4;
  /// The issue's "fixed overhead about 64" of its cycle table: a compute
  /// instruction costs at least this (max(64, N) for small N), the
  /// minimum initiation interval of back-to-back instructions.
  double fixed_cycles = 64;
  /// The issue's "about 60 cycles of fixed cost per access" (access rules).
  /// How it composes with the table (InstructionCost.h): an instruction
  /// costs max(table formula, access_fixed_cycles + streamed cycles). The
  /// engine walks an instruction's access patterns (its inputs and its
  /// output) concurrently, so their fixed costs overlap and one instruction
  /// pays it once, not once per operand; and a tiny instruction still costs
  /// max(64, 60 + 1) = 64, which the issue's dependent-chain figure needs
  /// (a tiny dependent Vector instruction every ~100 cycles: a serial
  /// 60 x accesses + max(64, N) would be >= 184). Applies to the Tensor,
  /// Vector, Scalar and GpSimd engines, not to the Sync engine's DMA
  /// trigger (a DMA's fixed cost is dma_fixed_ns).
  double access_fixed_cycles = 60;
  /// GpSimd iota and affine_select cost this + N cycles.
  double affine_fixed_cycles = 150;
  /// GpSimd philox_uniform costs affine_fixed_cycles + this x N cycles. An
  /// estimate, not a public figure: one Philox4x32-10 block per element
  /// (dropout's counters are per element), 10 rounds of two 32x32->64-bit
  /// products (4 multiplies), 4 xors and 2 key adds on each core's 16
  /// 32-bit lanes, one lane per partition.
  double philox_cycles_per_element = 100;
  /// An instruction that reads what the one before it on the same engine
  /// wrote starts this many cycles after that one started, at the earliest:
  /// "about 100 cycles per tiny dependent Vector instruction, 264 between
  /// dependent 1-element Scalar instructions".
  double vector_dependent_cycles = 100;
  double scalar_dependent_cycles = 264;
  /// Fitted: cycles an nc_matmul costs on top of max(min(64, M), 60 + N)
  /// (x4 fp32), to the 4096x8192x8192 bf16 matmul in 6.97 ms. Was 61 before
  /// the access cost: the public ~60 cycles explain what was fitted.
  double matmul_overhead_cycles = 0.6;
  /// Cycles of the Sync engine to trigger one DMA.
  double dma_issue_cycles = 64;
  /// From the semaphore (the trigger) to the start of the transfer.
  double dma_fixed_ns = 1300;
  /// Fitted: one DMA engine's bandwidth, to 32 KiB in 1416 ns.
  double dma_engine_bytes_per_ns = 282.5;
  /// HBM bandwidth of one core: 820 GB/s per chip shared by 2 cores.
  double hbm_bytes_per_ns = 410;
  /// Multiplier on the per-element cost when an operand's most-minor
  /// stride exceeds 16 bytes (half bandwidth) on a compute engine.
  double strided_penalty = 2;
  /// A DMA moves its bytes as descriptors, one per contiguous run (both
  /// sides contiguous); each descriptor takes the DMA engine and HBM at
  /// least as long as this many bytes. An assumption, not a public figure:
  /// one 64-byte memory burst per descriptor. Runs of >= 64 B (every
  /// row-wise load) are unaffected; an element-wise DMA (a transposing
  /// one: one descriptor per element) moves 2-byte elements at 1/32 of
  /// the bandwidth. The issue's public figures point the same way (">= 2
  /// KiB per partition recommended, 4 KiB saturate"), without a number
  /// for element-wise transfers. 0: off (every DMA at full bandwidth).
  double dma_descriptor_bytes = 64;
  /// Peak bf16 FLOP/s of the Tensor engine (utilization's denominator).
  double tensor_peak_flops = 2.0 * 128 * 128 * 2.8e9;
};

} // namespace mstep::neuron
