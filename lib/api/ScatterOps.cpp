// Scatter ops, the inverses of the indexing and slicing ops: scatter_add
// (of gather), index_add (of index_select) and slice_scatter (of slice).
// Autograd needs them for those ops' gradients; they are public ops with
// their own gradients too. Shapes and dtypes are checked here; index
// values are only known when the step runs, so the ref kernels check
// their range.
#include <algorithm>

#include "lib/api/OpBuilder.h"
#include "mstep/api/ShapeOps.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {

void require_defined(absl::string_view op, const Tensor& t, absl::string_view role) {
  if (!t.defined()) throw_op_error(op, absl::StrCat("the ", role, " is undefined"), "", "");
}

/// Index tensors hold i64 or i32 (PyTorch's Long and Int).
void require_integer_index(absl::string_view op, const Tensor& index, absl::string_view got) {
  if (!is_integral(index.dtype()))
    throw_op_error(
        op, absl::StrCat("the index must be an integer tensor, got ", dtype_name(index.dtype())),
        got, "Convert it with .to(mstep::DType::i64).");
}

/// The added values must already have the input's dtype: PyTorch does not
/// promote here either, and a silent cast would hide a precision loss.
void require_same_dtype(absl::string_view op, const Tensor& x, const Tensor& src,
                        absl::string_view role, absl::string_view got) {
  if (src.dtype() != x.dtype())
    throw_op_error(op,
                   absl::StrCat("the ", role, " has dtype ", dtype_name(src.dtype()),
                                " but the input has ", dtype_name(x.dtype())),
                   got, absl::StrCat("Convert the ", role, " with .to() to the input's dtype."));
}

/// The checks scatter_add and index_add share: the input, the index and
/// the added values (`role`: "src" or "source") are defined and the index
/// is an integer tensor. Returns what their errors print as "got".
auto check_add_operands(absl::string_view op, const Tensor& x, const Tensor& index,
                        const Tensor& src, absl::string_view role) {
  require_defined(op, x, "input");
  require_defined(op, index, "index");
  require_defined(op, src, role);
  auto got = [&x, &index, &src, role] {
    return absl::StrCat(describe(x), ", index ", describe(index), " and ", role, " ",
                        describe(src));
  };
  require_integer_index(op, index, got());
  return got;
}

}  // namespace

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  auto got = check_add_operands("scatter_add", x, index, src, "src");
  if (index.dim() != x.dim() || src.dim() != x.dim())
    throw_op_error("scatter_add",
                   absl::StrCat("the input, index and src must have the same number of dims; "
                                "they have ",
                                x.dim(), ", ", index.dim(), " and ", src.dim()),
                   got(), "Unsqueeze or reshape them to one rank.");
  const int64_t d = detail::normalize_dim("scatter_add", dim, x.dim(), x);
  require_same_dtype("scatter_add", x, src, "src", got());
  // As PyTorch, an empty index skips the size checks.
  if (index.numel() > 0)
    for (int64_t k = 0; k < x.dim(); ++k) {
      if (index.shape()[k] > src.shape()[k])
        throw_op_error("scatter_add",
                       absl::StrCat("index size ", index.shape()[k], " exceeds the src size ",
                                    src.shape()[k], " in dim ", k),
                       got(), "The index must be no larger than src in every dim.");
      if (k != d && index.shape()[k] > x.shape()[k])
        throw_op_error("scatter_add",
                       absl::StrCat("index size ", index.shape()[k], " exceeds the input size ",
                                    x.shape()[k], " in dim ", k, " (only dim ", d, " may differ)"),
                       got(), "Outside the scattered dim, index sizes must be <= the input's.");
    }
  if (x.dim() == 0)  // a 0-d input acts as a [1] tensor, as in gather
    return reshape(scatter_add(reshape(x, {1}), 0, reshape(index, {1}), reshape(src, {1})), {});
  return detail::record("scatter_add", OpKind::scatter_add, {x, index, src}, {{AttrName::dim, d}},
                        x.type());
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source) {
  auto got = check_add_operands("index_add", x, index, source, "source");
  if (index.dim() > 1)
    throw_op_error("index_add",
                   absl::StrCat("the index must be 1-d (or 0-d), it has ", index.dim(), " dims"),
                   got(), "Flatten it with reshape({-1}).");
  require_same_dtype("index_add", x, source, "source", got());
  if (x.dim() == 0) {
    // A 0-d input acts as a [1] tensor whose only index is 0.
    detail::normalize_dim("index_add", dim, 0, x);  // only 0 or -1
    if (index.numel() != 1 || source.numel() != 1 || source.dim() > 1)
      throw_op_error("index_add", "a 0-d input takes exactly one index and a one-element source",
                     got(), "Pass a one-element index and a 0-d source.");
    return reshape(index_add(reshape(x, {1}), 0, reshape(index, {1}), reshape(source, {1})), {});
  }
  const int64_t d = detail::normalize_dim("index_add", dim, x.dim(), x);
  if (source.dim() != x.dim())
    throw_op_error(
        "index_add",
        absl::StrCat("the source has ", source.dim(), " dims but the input has ", x.dim()), got(),
        "The source needs the input's rank; unsqueeze it to match.");
  for (int64_t k = 0; k < x.dim(); ++k) {
    const int64_t want = k == d ? index.numel() : x.shape()[k];
    if (source.shape()[k] == want) continue;
    if (k == d)
      throw_op_error("index_add",
                     absl::StrCat("the source has size ", source.shape()[k], " in dim ", d,
                                  " but the index has ", index.numel(), " entries"),
                     got(), "The source needs one slice along dim per index entry.");
    throw_op_error("index_add",
                   absl::StrCat("the source has size ", source.shape()[k], " in dim ", k,
                                " but the input has ", x.shape()[k], " (only dim ", d,
                                " may differ)"),
                   got(), "Outside the indexed dim, the source must match the input.");
  }
  Tensor idx = index.dim() == 0 ? reshape(index, {1}) : index;
  return detail::record("index_add", OpKind::index_add, {x, idx, source}, {{AttrName::dim, d}},
                        x.type());
}

Tensor slice_scatter(const Tensor& x, const Tensor& src, int64_t dim, int64_t start, int64_t end,
                     int64_t step) {
  require_defined("slice_scatter", x, "input");
  require_defined("slice_scatter", src, "src");
  auto got = [&] { return absl::StrCat(describe(x), " and src ", describe(src)); };
  if (x.dim() == 0)
    throw_op_error("slice_scatter", "cannot slice a 0-d tensor", got(), "Reshape it to [1] first.");
  const int64_t d = detail::normalize_dim("slice_scatter", dim, x.dim(), x);
  if (step <= 0)
    throw_op_error("slice_scatter", absl::StrCat("step must be positive, got ", step), got(),
                   "Use step >= 1; negative steps are not supported, as in PyTorch.");
  // The same clamping as slice(), so slice_scatter(x, slice(x, ...), ...)
  // with the same arguments round-trips.
  const int64_t size = x.shape()[d];
  if (start < 0) start = std::max<int64_t>(start + size, 0);
  if (end < 0) end = std::max<int64_t>(end + size, 0);
  start = std::min(start, size);
  end = std::clamp(end, start, size);
  Shape slice_shape = x.shape();
  slice_shape[d] = end == start ? 0 : (end - start - 1) / step + 1;
  if (src.shape() != slice_shape)
    throw_op_error("slice_scatter",
                   absl::StrCat("src has shape ", src.shape().to_string(), " but the slice [",
                                start, ":", end, ":", step, "] of dim ", d, " has shape ",
                                slice_shape.to_string()),
                   got(), "Pass a src of the slice's shape (what slice() would return).");
  // torch.slice_scatter copies src into the slice, converting its dtype.
  return detail::record(
      "slice_scatter", OpKind::slice_scatter, {x, detail::cast_to(src, x.dtype())},
      {{AttrName::dim, d}, {AttrName::start, start}, {AttrName::end, end}, {AttrName::step, step}},
      x.type());
}

}  // namespace mstep
