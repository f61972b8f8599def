// Reading an access pattern into fp32 and writing fp32 back in the
// pattern's dtype (bf16/fp16 round to nearest even, int32 truncates). The
// dtype is dispatched once per partition row, never per element.
#pragma once

#include <cstddef>

#include "lib/backends/neuron/AccessPattern.h"

namespace mstep::neuron {

/// Element 0 of partition row `p` of `ap` (0 <= p < ap.partitions), given
/// the byte address of the pattern's partition 0, offset 0 and the byte
/// distance between partitions.
struct PatternBase {
  std::byte* origin = nullptr;
  int64_t partition_bytes = 0; ///< byte step from one partition row to the next

  std::byte* row(int64_t p) const { return origin + p * partition_bytes; }
};

/// out[p * free + j] = element j of partition row p, as fp32.
void gather(const AccessPattern& ap, const PatternBase& base, float* out);
/// Stores in[p * free + j] into the pattern, converting to its dtype.
void scatter(const AccessPattern& ap, const PatternBase& base, const float* in);
/// Byte copy of same-dtype patterns (DMA: no conversion).
void copy_pattern(const AccessPattern& dst, const PatternBase& dst_base, const AccessPattern& src,
                  const PatternBase& src_base);

} // namespace mstep::neuron
