// Slicing a collective into MPI calls: see CallSlices.h.
#include "lib/runtime/distributed/CallSlices.h"

#include <algorithm>
#include <climits>
#include <cstring>

namespace mstep::dist {

CallSlices CallSlices::of(int64_t total, int64_t element_bytes, int64_t max_call_bytes) {
  const int64_t limit = std::clamp<int64_t>(max_call_bytes, 1, INT32_MAX);
  CallSlices s;
  s.total = total;
  s.per_slice = std::max<int64_t>(1, limit / std::max<int64_t>(1, element_bytes));
  return s;
}

int64_t CallSlices::packed_index(int world, int w, int64_t j) const {
  const int64_t k = j / per_slice;
  return world * offset(k) + w * size(k) + (j - offset(k));
}

void CallSlices::pack(std::byte* packed, const std::byte* src, int64_t element_bytes, int world,
                      int w, int64_t j, int64_t n) const {
  while (n > 0) {  // one run per slice the range touches
    const int64_t k = j / per_slice;
    const int64_t run = std::min(n, offset(k) + size(k) - j);
    std::memcpy(packed + packed_index(world, w, j) * element_bytes, src, run * element_bytes);
    src += run * element_bytes;
    j += run;
    n -= run;
  }
}

}  // namespace mstep::dist
