// Ref kernels for reshape, permute and expand.
#include <cstring>

#include "lib/backends/ref/RefKernels.h"

namespace mstep::ref {

namespace {

absl::Status reshape(const KernelArgs& a) {
  // Values are row-major and contiguous, so a reshape is a copy.
  std::memcpy(a.out().bytes(), a.in(0).bytes(), a.out().type().bytes());
  return absl::OkStatus();
}

/// Copies `in` into `out` reading with per-output-dim strides `strides`.
absl::Status strided_copy(const KernelArgs& a, const Shape::Dims& strides) {
  const HostBuffer& in = a.in(0);
  HostBuffer& out = a.out();
  const size_t esize = element_size(out.type().dtype);
  std::array<Shape::Dims, 1> s = {strides};
  for_each_strided(out.type().shape, s, [&](int64_t i, const std::array<int64_t, 1>& o) {
    std::memcpy(out.bytes() + i * esize, in.bytes() + o[0] * esize, esize);
  });
  return absl::OkStatus();
}

absl::Status permute(const KernelArgs& a) {
  const IntList& perm = attr_ints(a.node.attrs, AttrName::perm);
  Shape::Dims in_strides = a.in(0).type().shape.strides();
  Shape::Dims strides(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) strides[i] = in_strides[perm[i]];
  return strided_copy(a, strides);
}

absl::Status expand(const KernelArgs& a) {
  return strided_copy(a, broadcast_strides(a.in(0).type().shape, a.out().type().shape));
}

}  // namespace

void register_reshape_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::reshape)] = reshape;
  t[static_cast<int>(OpKind::permute)] = permute;
  t[static_cast<int>(OpKind::expand)] = expand;
}

}  // namespace mstep::ref
