// Reduction ops: dim normalization, result types and the empty-reduction
// checks PyTorch makes, then one node per call. Every node carries the
// normalized dim list (sorted, non-negative; all dims spelled out when the
// caller gave none) and keepdim, so backends never see negative dims.
#include "lib/api/OpBuilder.h"
#include "mstep/api/Reduction.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {

void require_defined(absl::string_view op, const Tensor& x) {
  if (!x.defined()) throw_op_error(op, "the input is undefined", "", "");
}

/// The input shape without `dims`, or with them set to 1 under keepdim.
Shape reduced_shape(const Shape& in, const IntList& dims, bool keepdim) {
  Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < in.rank(); ++d) {
    if (next < dims.size() && dims[next] == d) {
      ++next;
      if (keepdim) out.push_back(1);
    } else {
      out.push_back(in[d]);
    }
  }
  return out;
}

/// max/min/argmax have no identity element: reducing over nothing is an
/// error (as PyTorch), caught here since every size is known now.
void require_nonempty(absl::string_view op, const Tensor& x,
                      const IntList& dims, bool all_dims) {
  if (all_dims && x.numel() == 0)
    throw_op_error(op, "cannot reduce a tensor with no elements over all dims",
                   describe(x),
                   "There is no identity for this reduction; give the dims to "
                   "reduce, none of them of size 0.");
  for (int64_t d : dims)
    if (x.shape()[d] == 0)
      throw_op_error(op,
                     absl::StrCat("reduction dim ", d, " has size 0 and ", op,
                                  " has no identity"),
                     describe(x),
                     "Reduce only over dims of non-zero size, or check the "
                     "shape for an empty batch first.");
}

void require_floating_reduction(absl::string_view op, const Tensor& x) {
  if (!is_floating(x.dtype()))
    throw_op_error(op, "expects a floating-point input", describe(x),
                   "Convert it first, e.g. mstep::to(x, mstep::DType::f32).");
}

Tensor record_reduction(absl::string_view op, OpKind kind, const Tensor& x,
                        const IntList& dims, bool keepdim, DType out,
                        AttrList extra = {}) {
  AttrList attrs;
  attrs.push_back({AttrName::dims, dims});
  attrs.push_back({AttrName::keepdim, int64_t{keepdim}});
  for (Attr& a : extra) attrs.push_back(std::move(a));
  return detail::record(op, kind, {x}, std::move(attrs),
                        {reduced_shape(x.shape(), dims, keepdim), out});
}

}  // namespace

Tensor sum(const Tensor& x, absl::Span<const int64_t> dims, bool keepdim) {
  require_defined("sum", x);
  IntList d = detail::normalize_dims("sum", dims, x);
  // Bool and integer sums accumulate (and overflow) in i64, as PyTorch.
  Tensor in = is_floating(x.dtype()) ? x : detail::cast_to(x, DType::i64);
  return record_reduction("sum", OpKind::sum, in, d, keepdim, in.dtype());
}

Tensor mean(const Tensor& x, absl::Span<const int64_t> dims, bool keepdim) {
  require_defined("mean", x);
  require_floating_reduction("mean", x);
  IntList d = detail::normalize_dims("mean", dims, x);
  return record_reduction("mean", OpKind::mean, x, d, keepdim, x.dtype());
}

Tensor max(const Tensor& x, absl::Span<const int64_t> dims, bool keepdim) {
  require_defined("max", x);
  IntList d = detail::normalize_dims("max", dims, x);
  require_nonempty("max", x, d, dims.empty());
  return record_reduction("max", OpKind::max, x, d, keepdim, x.dtype());
}

Tensor min(const Tensor& x, absl::Span<const int64_t> dims, bool keepdim) {
  require_defined("min", x);
  IntList d = detail::normalize_dims("min", dims, x);
  require_nonempty("min", x, d, dims.empty());
  return record_reduction("min", OpKind::min, x, d, keepdim, x.dtype());
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  require_defined("argmax", x);
  // Without a dim the node reduces over every dim; the kernel's index is
  // row-major over the reduced dims, which is the flattened index.
  IntList d = dim ? detail::normalize_dims("argmax", {*dim}, x)
                  : detail::normalize_dims("argmax", {}, x);
  require_nonempty("argmax", x, d, !dim.has_value());
  return record_reduction("argmax", OpKind::argmax, x, d, keepdim, DType::i64);
}

Tensor logsumexp(const Tensor& x, absl::Span<const int64_t> dims,
                 bool keepdim) {
  require_defined("logsumexp", x);
  require_floating_reduction("logsumexp", x);
  IntList d = detail::normalize_dims("logsumexp", dims, x);
  return record_reduction("logsumexp", OpKind::logsumexp, x, d, keepdim,
                          x.dtype());
}

Tensor var(const Tensor& x, absl::Span<const int64_t> dims, int64_t correction,
           bool keepdim) {
  require_defined("var", x);
  require_floating_reduction("var", x);
  if (correction < 0)
    throw_op_error("var", absl::StrCat("correction must be >= 0, got ", correction),
                   describe(x),
                   "Use 1 for the unbiased estimate (the default) or 0 for the "
                   "population variance.");
  IntList d = detail::normalize_dims("var", dims, x);
  return record_reduction("var", OpKind::var, x, d, keepdim, x.dtype(),
                          {{AttrName::correction, correction}});
}

}  // namespace mstep
