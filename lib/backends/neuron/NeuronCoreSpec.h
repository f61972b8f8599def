// The NeuronCore-v2 (Trn1/Inf2) numbers the validator, the simulator and the
// cost model share, from the public AWS Neuron documentation (issue 19).
#pragma once

#include <cstdint>

namespace mstep::neuron {

/// SBUF and PSUM are 128 partitions; dimension 0 of every on-chip tile is
/// the partition dimension.
inline constexpr int kPartitions = 128;
/// SBUF: 24 MiB = 128 partitions x 192 KiB.
inline constexpr int64_t kSbufBytesPerPartition = 192 * 1024;
/// PSUM: 2 MiB = 128 partitions x 16 KiB, as 8 banks of 2 KiB (512 fp32).
inline constexpr int64_t kPsumBytesPerPartition = 16 * 1024;
inline constexpr int64_t kPsumBankBytes = 2 * 1024;
/// At most 4 free dimensions per access pattern.
inline constexpr int kMaxFreeDims = 4;
/// Free elements one instruction may address in one access pattern.
inline constexpr int64_t kMaxSbufFreeElements = 64 * 1024;
inline constexpr int64_t kMaxPsumFreeElements = 4 * 1024;
/// nc_matmul(stationary[K, M], moving[K, N]): K <= 128, M <= 128, N <= 512.
inline constexpr int kMatmulMaxK = 128;
inline constexpr int kMatmulMaxM = 128;
inline constexpr int kMatmulMaxN = 512;
/// DMA engines per core.
inline constexpr int kDmaEngines = 16;
/// bn_stats: at most this many free elements per partition; each record
/// (count, mean, M2) is kBnStatsRecord fp32 values.
inline constexpr int64_t kBnStatsMaxFree = 512;
inline constexpr int64_t kBnStatsRecord = 3;

} // namespace mstep::neuron
