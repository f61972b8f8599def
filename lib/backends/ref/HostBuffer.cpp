// HostBuffer allocation and the shared broadcast-stride helper.
#include "lib/backends/ref/HostBuffer.h"

#include <cstring>
#include <new>

#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

HostBuffer::HostBuffer(TensorType type, Device device)
    : Buffer(std::move(type), device) {
  const size_t bytes = this->type().bytes();  // a zero-element tensor still gets a block
  data_ = std::unique_ptr<std::byte[], Free>(host_allocate(bytes), Free{bytes});
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
