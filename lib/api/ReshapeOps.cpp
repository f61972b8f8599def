// Reshaping ops: reshape/view/flatten, permute/transpose, expand,
// squeeze/unsqueeze. reshape-like ops that keep the shape record nothing.
#include "absl/strings/str_join.h"
#include "lib/api/OpBuilder.h"
#include "mstep/api/ShapeOps.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {
IntList to_list(const Shape& s) { return IntList(s.begin(), s.end()); }

Tensor record_reshape(absl::string_view op, const Tensor& x, Shape shape) {
  if (shape == x.shape()) return x;
  IntList attr = to_list(shape);
  return detail::record(op, OpKind::reshape, {x}, {{AttrName::shape, std::move(attr)}},
                        {std::move(shape), x.dtype()});
}
}  // namespace

Tensor reshape(const Tensor& x, absl::Span<const int64_t> shape) {
  if (!x.defined()) throw_op_error("reshape", "the input is undefined", "", "");
  Shape out(shape);
  int64_t infer = -1, known = 1;
  for (int64_t i = 0; i < out.rank(); ++i) {
    if (out[i] == -1) {
      if (infer >= 0)
        throw_op_error("reshape", "only one dim may be -1",
                       absl::StrCat(describe(x), " to [", absl::StrJoin(shape, ", "), "]"), "");
      infer = i;
    } else if (out[i] < 0) {
      throw_op_error("reshape", absl::StrCat("invalid size ", out[i], " in target shape"),
                     absl::StrCat(describe(x), " to [", absl::StrJoin(shape, ", "), "]"),
                     "Sizes must be >= 0, or -1 for one inferred dim.");
    } else {
      known *= out[i];
    }
  }
  if (infer >= 0) {
    if (known == 0 || x.numel() % known != 0)
      throw_op_error("reshape", "cannot infer the -1 dim",
                     absl::StrCat(describe(x), " (", x.numel(), " elements) to [",
                                  absl::StrJoin(shape, ", "), "]"),
                     "The other dims must divide the element count.");
    out[infer] = x.numel() / known;
  }
  if (out.numel() != x.numel())
    throw_op_error("reshape",
                   absl::StrCat("shape ", out.to_string(), " holds ", out.numel(),
                                " elements, the input has ", x.numel()),
                   describe(x), "The element count must stay the same.");
  return record_reshape("reshape", x, std::move(out));
}

Tensor view(const Tensor& x, absl::Span<const int64_t> shape) { return reshape(x, shape); }

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  if (!x.defined()) throw_op_error("flatten", "the input is undefined", "", "");
  if (x.dim() == 0) return reshape(x, {1});
  const int64_t s = detail::normalize_dim("flatten", start_dim, x.dim(), x);
  const int64_t e = detail::normalize_dim("flatten", end_dim, x.dim(), x);
  if (s > e)
    throw_op_error("flatten", absl::StrCat("start_dim ", start_dim, " comes after end_dim ", end_dim),
                   describe(x), "Pass start_dim <= end_dim.");
  Shape out;
  int64_t merged = 1;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < s || d > e) {
      out.push_back(x.shape()[d]);
    } else {
      merged *= x.shape()[d];
      if (d == e) out.push_back(merged);
    }
  }
  return record_reshape("flatten", x, std::move(out));
}

Tensor permute(const Tensor& x, absl::Span<const int64_t> perm) {
  if (!x.defined()) throw_op_error("permute", "the input is undefined", "", "");
  if (static_cast<int64_t>(perm.size()) != x.dim())
    throw_op_error("permute",
                   absl::StrCat("the permutation [", absl::StrJoin(perm, ", "), "] has ",
                                perm.size(), " dims, the input has ", x.dim()),
                   describe(x), "List every dim exactly once.");
  IntList p;
  std::vector<bool> seen(x.dim(), false);
  Shape out;
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    int64_t d = detail::normalize_dim("permute", perm[i], x.dim(), x);
    if (seen[d])
      throw_op_error("permute", absl::StrCat("dim ", perm[i], " appears twice in [",
                                             absl::StrJoin(perm, ", "), "]"),
                     describe(x), "List every dim exactly once.");
    seen[d] = true;
    identity &= d == static_cast<int64_t>(i);
    p.push_back(d);
    out.push_back(x.shape()[d]);
  }
  if (identity) return x;
  return detail::record("permute", OpKind::permute, {x}, {{AttrName::perm, std::move(p)}},
                        {std::move(out), x.dtype()});
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  if (!x.defined()) throw_op_error("transpose", "the input is undefined", "", "");
  const int64_t a = detail::normalize_dim("transpose", dim0, x.dim(), x);
  const int64_t b = detail::normalize_dim("transpose", dim1, x.dim(), x);
  if (x.dim() == 0) return x;
  IntList perm;
  for (int64_t d = 0; d < x.dim(); ++d) perm.push_back(d == a ? b : d == b ? a : d);
  return permute(x, perm);
}

Tensor expand(const Tensor& x, absl::Span<const int64_t> shape) {
  if (!x.defined()) throw_op_error("expand", "the input is undefined", "", "");
  auto fail = [&](absl::string_view why) {
    throw_op_error("expand", why,
                   absl::StrCat(describe(x), " to [", absl::StrJoin(shape, ", "), "]"),
                   "Only size-1 dims can grow; new dims go in front.");
  };
  const int64_t rank = static_cast<int64_t>(shape.size());
  if (rank < x.dim()) fail("the target has fewer dims than the input");
  Shape out;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t src = i - (rank - x.dim());
    int64_t want = shape[i];
    if (src < 0) {
      if (want < 0)
        fail(absl::StrCat("a new leading dim needs a size >= 0, got ", want, " (dim ", i, ")"));
    } else {
      const int64_t have = x.shape()[src];
      if (want == -1) want = have;
      if (want < 0) fail(absl::StrCat("invalid size ", want, " for dim ", i));
      if (want != have && have != 1)
        fail(absl::StrCat("dim ", i, " has size ", have, " and cannot become ", want));
    }
    out.push_back(want);
  }
  if (out == x.shape()) return x;
  IntList attr = to_list(out);
  return detail::record("expand", OpKind::expand, {x}, {{AttrName::shape, std::move(attr)}},
                        {std::move(out), x.dtype()});
}

Tensor squeeze(const Tensor& x) {
  if (!x.defined()) throw_op_error("squeeze", "the input is undefined", "", "");
  Shape out;
  for (int64_t d : x.shape())
    if (d != 1) out.push_back(d);
  return record_reshape("squeeze", x, std::move(out));
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  if (!x.defined()) throw_op_error("squeeze", "the input is undefined", "", "");
  const int64_t d = detail::normalize_dim("squeeze", dim, x.dim(), x);
  if (x.dim() == 0) return x;
  if (x.shape()[d] != 1) return x;  // PyTorch: squeezing a non-1 dim is a no-op
  Shape out;
  for (int64_t i = 0; i < x.dim(); ++i)
    if (i != d) out.push_back(x.shape()[i]);
  return record_reshape("squeeze", x, std::move(out));
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  if (!x.defined()) throw_op_error("unsqueeze", "the input is undefined", "", "");
  const int64_t d = detail::normalize_dim("unsqueeze", dim, x.dim() + 1, x);
  Shape out;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i == d) out.push_back(1);
    out.push_back(x.shape()[i]);
  }
  if (d == x.dim()) out.push_back(1);
  return record_reshape("unsqueeze", x, std::move(out));
}

}  // namespace mstep
