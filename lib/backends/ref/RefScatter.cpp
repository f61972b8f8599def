// Ref kernels for the scatter ops: scatter_add, index_add and
// slice_scatter. Each starts from a copy of the input. The adding kernels
// dispatch over dtypes (16-bit floats add in float, bool adds as "or", as
// PyTorch) and add duplicates in index order; slice_scatter only moves
// bytes. Index values are checked before anything is written: a bad index
// is an error, never an out-of-bounds write.
#include <cstring>

#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::ref {

namespace {

/// dst[i] += src[j] in storage type T.
template <typename T> void add_into(std::byte* dst, const std::byte* src) {
  T& d = *reinterpret_cast<T*>(dst);
  const T s = *reinterpret_cast<const T*>(src);
  if constexpr (std::is_same_v<T, bool>) {
    d = d || s;
  } else {
    d = static_cast<T>(static_cast<Compute<T>>(d) + static_cast<Compute<T>>(s));
  }
}

using AddFn = void (*)(std::byte*, const std::byte*);

AddFn adder(DType dtype) {
  return dispatch(dtype, []<typename T>() -> AddFn { return add_into<T>; });
}

void copy_input(const KernelArgs& a) {
  std::memcpy(a.out().bytes(), a.in(0).bytes(), a.out().type().bytes());
}

absl::Status scatter_add(const KernelArgs& a) {
  const int64_t dim = attr_int(a.node.attrs, AttrName::dim);
  const HostBuffer& in = a.in(0);
  const HostBuffer& index = a.in(1);
  const HostBuffer& src = a.in(2);
  HostBuffer& out = a.out();
  const Shape& shape = out.type().shape;
  MSTEP_RETURN_IF_ERROR(check_indices("scatter_add", index, in, dim, shape[dim]));
  copy_input(a);
  // Walk the index's positions: src is read at the same position (its own
  // strides, as the index may be smaller), the output at that position
  // with dim `dim` replaced by the index value.
  Shape::Dims out_strides = shape.strides();
  const int64_t dim_stride = out_strides[dim];
  out_strides[dim] = 0;
  const size_t es = element_size(out.type().dtype);
  const AddFn add = adder(out.type().dtype);
  std::array<Shape::Dims, 2> s = {src.type().shape.strides(), out_strides};
  for_each_strided(index.type().shape, s, [&](int64_t i, const std::array<int64_t, 2>& o) {
    const int64_t dst = o[1] + load_index(index, i) * dim_stride;
    add(out.bytes() + dst * es, src.bytes() + o[0] * es);
  });
  return absl::OkStatus();
}

absl::Status index_add(const KernelArgs& a) {
  const int64_t dim = attr_int(a.node.attrs, AttrName::dim);
  const HostBuffer& in = a.in(0);
  const HostBuffer& index = a.in(1);
  const HostBuffer& source = a.in(2);
  HostBuffer& out = a.out();
  const Shape& shape = out.type().shape;
  const int64_t size = shape[dim];
  MSTEP_RETURN_IF_ERROR(check_indices("index_add", index, in, dim, size));
  copy_input(a);
  // Blocks of `inner` contiguous elements: source block (o, j) adds into
  // output block (o, index[j]).
  const int64_t outer = span_numel(shape, 0, dim);
  const int64_t inner = span_numel(shape, dim + 1, shape.rank());
  const int64_t n = index.numel();
  const size_t es = element_size(out.type().dtype);
  const AddFn add = adder(out.type().dtype);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j) {
      std::byte* dst = out.bytes() + (o * size + load_index(index, j)) * inner * es;
      const std::byte* from = source.bytes() + (o * n + j) * inner * es;
      for (int64_t k = 0; k < inner; ++k) add(dst + k * es, from + k * es);
    }
  return absl::OkStatus();
}

absl::Status slice_scatter(const KernelArgs& a) {
  const int64_t dim = attr_int(a.node.attrs, AttrName::dim);
  const int64_t start = attr_int(a.node.attrs, AttrName::start);
  const int64_t step = attr_int(a.node.attrs, AttrName::step);
  const HostBuffer& src = a.in(1);
  HostBuffer& out = a.out();
  copy_input(a);
  // src element k along `dim` lands on output element start + k * step
  // (the slice kernel's walk, with source and destination swapped).
  Shape::Dims strides = out.type().shape.strides();
  const int64_t base = start * strides[dim];
  strides[dim] *= step;
  const size_t es = element_size(out.type().dtype);
  std::array<Shape::Dims, 1> s = {strides};
  for_each_strided(src.type().shape, s, [&](int64_t i, const std::array<int64_t, 1>& o) {
    std::memcpy(out.bytes() + (base + o[0]) * es, src.bytes() + i * es, es);
  });
  return absl::OkStatus();
}

}  // namespace

void register_scatter_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::scatter_add)] = scatter_add;
  t[static_cast<int>(OpKind::index_add)] = index_add;
  t[static_cast<int>(OpKind::slice_scatter)] = slice_scatter;
}

}  // namespace mstep::ref
