// The cost model's parameters: the issue's public NeuronCore-v2 figures,
// and the two fitted to its calibration points (bench/neuron_calibration
// prints the fit and the error on each point).
#pragma once

namespace mstep::neuron {

struct CostParams {
  // Engine clocks (GHz).
  double tensor_ghz = 2.8;
  double vector_ghz = 1.12;
  double scalar_ghz = 1.4;
  double gpsimd_ghz = 1.4;
  double sync_ghz = 1.4;
  /// Fixed cycles of a Vector/Scalar/GpSimd instruction: cost max(fixed, N).
  double fixed_cycles = 64;
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
  /// Fitted: cycles an nc_matmul costs on top of max(min(64, M), N) (x4
  /// fp32), to the 4096x8192x8192 bf16 matmul in 6.97 ms.
  double matmul_overhead_cycles = 61;
  /// Cycles of the Sync engine to trigger one DMA.
  double dma_issue_cycles = 64;
  /// From the semaphore (the trigger) to the start of the transfer.
  double dma_fixed_ns = 1300;
  /// Fitted: one DMA engine's bandwidth, to 32 KiB in 1416 ns.
  double dma_engine_bytes_per_ns = 282.5;
  /// HBM bandwidth of one core: 820 GB/s per chip shared by 2 cores.
  double hbm_bytes_per_ns = 410;
  /// Multiplier on the per-element cost when an operand's most-minor
  /// stride exceeds 16 bytes (half bandwidth).
  double strided_penalty = 2;
  /// Peak bf16 FLOP/s of the Tensor engine (utilization's denominator).
  double tensor_peak_flops = 2.0 * 128 * 128 * 2.8e9;
};

} // namespace mstep::neuron
