// HostBuffer allocation and the shared broadcast-stride helper.
#include "lib/backends/ref/HostBuffer.h"

#include <cstring>
#include <new>

#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

HostBuffer::HostBuffer(TensorType type, Device device)
    : Buffer(std::move(type), device) {
  // aligned_alloc needs a size that is a multiple of the alignment; a
  // zero-element tensor still gets a valid pointer.
  size_t bytes = (this->type().bytes() + 63) / 64 * 64;
  if (bytes == 0) bytes = 64;
  data_.reset(static_cast<std::byte*>(std::aligned_alloc(64, bytes)));
  if (!data_) throw std::bad_alloc();
}

Shape::Dims broadcast_strides(const Shape& in, const Shape& out) {
  Shape::Dims strides(out.rank(), 0);
  Shape::Dims in_strides = in.strides();
  const int64_t lead = out.rank() - in.rank();
  for (int64_t d = 0; d < in.rank(); ++d)
    strides[lead + d] = in[d] == 1 ? 0 : in_strides[d];
  return strides;
}

}  // namespace mstep::ref
