// nonzero and masked_select: data-dependent output shapes, computed eagerly
// on the host from the materialized inputs (see DynamicOps.h).
#include "mstep/api/DynamicOps.h"
#include "mstep/runtime/Graph.h"

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/api/Creation.h"
#include "mstep/core/ElementConvert.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/TensorImpl.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {

void require_defined(absl::string_view op, const Tensor& t, absl::string_view arg) {
  if (!t.defined())
    throw_op_error(op, absl::StrCat("`", arg, "` is undefined"), "an undefined tensor",
                   "Pass the result of an op or a creation function.");
}

/// Data-dependent shapes cannot be part of a captured graph.
void refuse_in_capture(absl::string_view op, const Tensor& x) {
  if (is_capturing())
    throw_op_error(op, "has a data-dependent output shape and cannot run inside a graph capture",
                   describe(x),
                   "End the capture before it and capture the rest as a second graph: "
                   "graph | dynamic op | graph.");
}


/// Whether the element at `p` is nonzero. Integers are compared exactly
/// (no trip through double); for floats -0.0 is zero and NaN is nonzero.
bool is_nonzero(const std::byte* p, DType dtype) {
  switch (dtype) {
  case DType::i32: {
    int32_t v;
    std::memcpy(&v, p, 4);
    return v != 0;
  }
  case DType::i64: {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v != 0;
  }
  case DType::boolean:
    return static_cast<uint8_t>(*p) != 0;
  default:
    return load_element(p, dtype) != 0;
  }
}

/// Advances the row-major multi-index `idx` within `shape`.
void next_index(std::vector<int64_t>& idx, const Shape& shape) {
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    if (++idx[d] < shape[d]) return;
    idx[d] = 0;
  }
}

/// Element strides of `shape` read as broadcast to `out` (0 on broadcast dims).
std::vector<int64_t> broadcast_strides(const Shape& shape, const Shape& out) {
  std::vector<int64_t> strides(out.rank(), 0);
  const auto own = shape.strides();
  const int64_t lead = out.rank() - shape.rank();
  for (int64_t d = 0; d < shape.rank(); ++d) strides[lead + d] = shape[d] == 1 ? 0 : own[d];
  return strides;
}

} // namespace

Tensor nonzero(const Tensor& x) {
  require_defined("nonzero", x, "x");
  refuse_in_capture("nonzero", x);
  const std::vector<std::byte> data = detail::host_bytes(x);
  const Shape& shape = x.shape();
  const int64_t rank = shape.rank();
  const size_t esize = element_size(x.dtype());
  std::vector<int64_t> indices; // n rows of `rank` coordinates
  std::vector<int64_t> idx(rank, 0);
  int64_t n = 0;
  for (int64_t i = 0; i < x.numel(); ++i, next_index(idx, shape)) {
    if (!is_nonzero(data.data() + i * esize, x.dtype())) continue;
    indices.insert(indices.end(), idx.begin(), idx.end());
    ++n;
  }
  internal::record_fallback("nonzero", x.dtype());
  return from_buffer(indices.data(), TensorType{Shape{n, rank}, DType::i64}, x.device());
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  require_defined("masked_select", x, "x");
  require_defined("masked_select", mask, "mask");
  refuse_in_capture("masked_select", x);
  const std::string inputs = absl::StrCat("x ", describe(x), " and mask ", describe(mask));
  if (mask.dtype() != DType::boolean)
    throw_op_error("masked_select", "mask must be bool", inputs,
                   "Convert it with mask.to(DType::boolean) or build it from a comparison.");
  if (x.device() != mask.device())
    throw_op_error("masked_select", "x and mask live on different devices", inputs,
                   "Move them to one device first.");
  absl::StatusOr<Shape> out = detail::broadcast_shapes(x.shape(), mask.shape());
  if (!out.ok())
    throw_op_error("masked_select", out.status().message(), inputs,
                   "Trailing dims must be equal or 1; use unsqueeze() or reshape() to line "
                   "them up.");
  const std::vector<std::byte> xs = detail::host_bytes(x);
  const std::vector<std::byte> ms = detail::host_bytes(mask);
  const std::vector<int64_t> xstride = broadcast_strides(x.shape(), *out);
  const std::vector<int64_t> mstride = broadcast_strides(mask.shape(), *out);
  const size_t esize = element_size(x.dtype());

  std::vector<std::byte> selected;
  std::vector<int64_t> idx(out->rank(), 0);
  for (int64_t i = 0; i < out->numel(); ++i, next_index(idx, *out)) {
    int64_t xo = 0, mo = 0;
    for (int64_t d = 0; d < out->rank(); ++d) {
      xo += idx[d] * xstride[d];
      mo += idx[d] * mstride[d];
    }
    if (static_cast<uint8_t>(ms[mo]) == 0) continue;
    selected.insert(selected.end(), xs.begin() + xo * esize, xs.begin() + (xo + 1) * esize);
  }
  const auto n = static_cast<int64_t>(selected.size() / esize);
  internal::record_fallback("masked_select", x.dtype());
  return from_buffer(selected.data(), TensorType{Shape{n}, x.dtype()}, x.device());
}

} // namespace mstep
