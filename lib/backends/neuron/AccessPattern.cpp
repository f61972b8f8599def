// AccessPattern's element counts, bounds and text form.
#include "lib/backends/neuron/AccessPattern.h"

#include "absl/strings/str_cat.h"

namespace mstep::neuron {

int64_t AccessPattern::free_elements() const {
  int64_t n = 1;
  for (const FreeDim& d : dims) n *= d.size;
  return n;
}

int64_t AccessPattern::min_offset() const {
  int64_t lo = offset;
  for (const FreeDim& d : dims)
    if (d.stride < 0) lo += (d.size - 1) * d.stride;
  return lo;
}

int64_t AccessPattern::max_offset() const {
  int64_t hi = offset;
  for (const FreeDim& d : dims)
    if (d.stride > 0) hi += (d.size - 1) * d.stride;
  return hi;
}

std::string AccessPattern::to_string() const {
  std::string s =
      absl::StrCat(buffer_kind_name(kind), "#", buffer, "[p", start_partition, "+", partitions);
  if (kind == BufferKind::hbm) absl::StrAppend(&s, " stride ", partition_stride);
  absl::StrAppend(&s, ", off ", offset);
  for (const FreeDim& d : dims) absl::StrAppend(&s, ", (", d.size, ",", d.stride, ")");
  absl::StrAppend(&s, "] ", dtype_name(dtype));
  return s;
}

AccessPattern tile_pattern(BufferKind kind, int32_t buffer, DType dtype, int32_t start_partition,
                           int32_t partitions, int64_t offset,
                           std::initializer_list<FreeDim> dims) {
  AccessPattern ap;
  ap.kind = kind;
  ap.buffer = buffer;
  ap.dtype = dtype;
  ap.start_partition = start_partition;
  ap.partitions = partitions;
  ap.offset = offset;
  ap.dims.assign(dims.begin(), dims.end()); // more than kMaxFreeDims: the validator names it
  return ap;
}

AccessPattern hbm_rows(int32_t tensor, DType dtype, int64_t row_length, int64_t row0,
                       int32_t partitions, int64_t col0, int64_t cols) {
  AccessPattern ap = tile_pattern(BufferKind::hbm, tensor, dtype, 0, partitions,
                                  row0 * row_length + col0, {{cols, 1}});
  ap.partition_stride = row_length;
  return ap;
}

} // namespace mstep::neuron
