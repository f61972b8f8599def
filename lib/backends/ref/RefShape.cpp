// Ref kernels for the data-movement ops: slice, cat, gather, index_select,
// pad, triu and tril. They only move elements, so they copy raw bytes and
// work for every dtype without a dtype dispatch. Index values are checked
// before any element is read: a bad index is an error, never an
// out-of-bounds read.
#include <algorithm>
#include <cstring>

#include "lib/backends/ref/RefKernels.h"
#include "mstep/core/Error.h"

namespace mstep::ref {

namespace {

size_t element_bytes(const HostBuffer& b) {
  return element_size(b.type().dtype);
}

/// Ends gather's and index_select's index errors: embedding records
/// index_select, so its users see them too.
constexpr absl::string_view kEmbeddingNote =
    " (embedding reports bad token ids through index_select.)";

absl::Status slice(const KernelArgs& a) {
  const int64_t dim = attr_int(a.node.attrs, AttrName::dim);
  const int64_t start = attr_int(a.node.attrs, AttrName::start);
  const int64_t step = attr_int(a.node.attrs, AttrName::step);
  const HostBuffer& in = a.in(0);
  HostBuffer& out = a.out();
  const size_t es = element_bytes(out);
  // Output element k along `dim` is input element start + k * step.
  Shape::Dims strides = in.type().shape.strides();
  const int64_t base = start * strides[dim];
  strides[dim] *= step;
  std::array<Shape::Dims, 1> s = {strides};
  for_each_strided(
      out.type().shape, s, [&](int64_t i, const std::array<int64_t, 1>& o) {
        std::memcpy(out.bytes() + i * es, in.bytes() + (base + o[0]) * es, es);
      });
  return absl::OkStatus();
}

absl::Status cat(const KernelArgs& a) {
  // Row-major: each input contributes one contiguous block of
  // size(dim) * inner elements per index of the outer dims.
  const int64_t dim = attr_int(a.node.attrs, AttrName::dim);
  HostBuffer& out = a.out();
  const Shape& out_shape = out.type().shape;
  const int64_t outer = span_numel(out_shape, 0, dim);
  const size_t inner =
      span_numel(out_shape, dim + 1, out_shape.rank()) * element_bytes(out);
  const size_t out_row = out_shape[dim] * inner;
  size_t offset = 0;
  for (const HostBuffer* in : a.inputs) {
    const size_t row = in->type().shape[dim] * inner;
    if (row == 0) continue;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(out.bytes() + o * out_row + offset, in->bytes() + o * row,
                  row);
    offset += row;
  }
  return absl::OkStatus();
}

absl::Status gather(const KernelArgs& a) {
  const int64_t dim = attr_int(a.node.attrs, AttrName::dim);
  const HostBuffer& in = a.in(0);
  const HostBuffer& index = a.in(1);
  HostBuffer& out = a.out();
  const Shape& in_shape = in.type().shape;
  // A 0-d input acts as a [1] tensor.
  const int64_t rank = in_shape.rank();
  const int64_t size = rank == 0 ? 1 : in_shape[dim];
  MSTEP_RETURN_IF_ERROR(check_indices("gather", index, in, dim, size, kEmbeddingNote));
  // out[i...] = in[i... with i_dim replaced by index[i...]]: walk the
  // index's positions with the input's strides, minus the gathered dim.
  Shape::Dims strides = in_shape.strides();
  const int64_t dim_stride = rank == 0 ? 0 : strides[dim];
  if (rank > 0) strides[dim] = 0;
  const size_t es = element_bytes(out);
  std::array<Shape::Dims, 1> s = {strides};
  for_each_strided(
      index.type().shape, s, [&](int64_t i, const std::array<int64_t, 1>& o) {
        const int64_t src = o[0] + load_index(index, i) * dim_stride;
        std::memcpy(out.bytes() + i * es, in.bytes() + src * es, es);
      });
  return absl::OkStatus();
}

absl::Status index_select(const KernelArgs& a) {
  const int64_t dim = attr_int(a.node.attrs, AttrName::dim);
  const HostBuffer& in = a.in(0);
  const HostBuffer& index = a.in(1);
  HostBuffer& out = a.out();
  const Shape& in_shape = in.type().shape;
  const int64_t size = in_shape[dim];
  MSTEP_RETURN_IF_ERROR(check_indices("index_select", index, in, dim, size, kEmbeddingNote));
  // Blocks of `inner` contiguous elements, one per (outer, index) pair.
  const int64_t outer = span_numel(in_shape, 0, dim);
  const size_t inner =
      span_numel(in_shape, dim + 1, in_shape.rank()) * element_bytes(in);
  const int64_t n = index.numel();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < n; ++j)
      std::memcpy(out.bytes() + (o * n + j) * inner,
                  in.bytes() + (o * size + load_index(index, j)) * inner,
                  inner);
  return absl::OkStatus();
}

absl::Status pad(const KernelArgs& a) {
  const IntList& pads = attr_ints(a.node.attrs, AttrName::pads);
  const HostBuffer& in = a.in(0);
  HostBuffer& out = a.out();
  const Shape& in_shape = in.type().shape;
  const Shape& out_shape = out.type().shape;
  const int64_t rank = in_shape.rank();
  const size_t es = element_bytes(out);
  // 1. Fill the whole output with the value (operand 1, a 0-d buffer).
  for (int64_t i = 0; i < out.numel(); ++i)
    std::memcpy(out.bytes() + i * es, a.in(1).bytes(), es);
  // 2. Copy the part of the input that survives. Along dim d it is input
  //    [lo, hi) landing at output lo + before: a negative `before` crops
  //    the start, a negative `after` the end.
  Shape region;
  int64_t in_base = 0, out_base = 0;
  const Shape::Dims in_strides = in_shape.strides();
  const Shape::Dims out_strides = out_shape.strides();
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t k = rank - 1 - d;  // pads[2k], pads[2k + 1] are dim d's
    const int64_t before =
        2 * k < static_cast<int64_t>(pads.size()) ? pads[2 * k] : 0;
    const int64_t lo = std::max<int64_t>(0, -before);
    const int64_t hi = std::min(in_shape[d], out_shape[d] - before);
    region.push_back(std::max<int64_t>(0, hi - lo));
    in_base += lo * in_strides[d];
    out_base += (lo + before) * out_strides[d];
  }
  std::array<Shape::Dims, 2> s = {in_strides, out_strides};
  for_each_strided(region, s, [&](int64_t, const std::array<int64_t, 2>& o) {
    std::memcpy(out.bytes() + (out_base + o[1]) * es,
                in.bytes() + (in_base + o[0]) * es, es);
  });
  return absl::OkStatus();
}

/// triu keeps elements with col - row >= diagonal, tril those with
/// col - row <= diagonal; the rest become zero (all-zero bytes in every
/// dtype).
template <bool kUpper> absl::Status triangle(const KernelArgs& a) {
  const int64_t diagonal = attr_int(a.node.attrs, AttrName::diagonal);
  const HostBuffer& in = a.in(0);
  HostBuffer& out = a.out();
  std::memcpy(out.bytes(), in.bytes(), out.type().bytes());
  const Shape& shape = out.type().shape;
  const int64_t rows = shape[shape.rank() - 2];
  const int64_t cols = shape[shape.rank() - 1];
  if (rows == 0 || cols == 0) return absl::OkStatus();
  const int64_t batches = out.numel() / (rows * cols);
  const size_t es = element_bytes(out);
  for (int64_t b = 0; b < batches; ++b)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = kUpper ? j - i >= diagonal : j - i <= diagonal;
        if (!keep)
          std::memset(out.bytes() + ((b * rows + i) * cols + j) * es, 0, es);
      }
  return absl::OkStatus();
}

}  // namespace

void register_shape_kernels(KernelTable& t) {
  t[static_cast<int>(OpKind::slice)] = slice;
  t[static_cast<int>(OpKind::cat)] = cat;
  t[static_cast<int>(OpKind::gather)] = gather;
  t[static_cast<int>(OpKind::index_select)] = index_select;
  t[static_cast<int>(OpKind::pad)] = pad;
  t[static_cast<int>(OpKind::triu)] = triangle<true>;
  t[static_cast<int>(OpKind::tril)] = triangle<false>;
}

}  // namespace mstep::ref
