// Indexing ops: gather, index_select and embedding (a composite of
// index_select). Shapes and dtypes are checked here; the index values are
// only known when the step runs, so the ref kernels check their range.
#include "absl/strings/str_join.h"
#include "lib/api/OpBuilder.h"
#include "mstep/api/ShapeOps.h"

namespace mstep {

using detail::describe;
using detail::throw_op_error;

namespace {

/// Index tensors hold i64 or i32 (PyTorch's Long and Int).
void require_integer_index(absl::string_view op, const Tensor& x,
                           const Tensor& index, absl::string_view role) {
  if (!index.defined())
    throw_op_error(op, absl::StrCat("the ", role, " is undefined"), "", "");
  if (!is_integral(index.dtype()))
    throw_op_error(
        op,
        absl::StrCat("the ", role, " must be an integer tensor, got ",
                     dtype_name(index.dtype())),
        absl::StrCat(describe(x), " and ", role, " ", describe(index)),
        "Convert it with .to(mstep::DType::i64).");
}

}  // namespace

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  if (!x.defined()) throw_op_error("gather", "the input is undefined", "", "");
  require_integer_index("gather", x, index, "index");
  auto got = [&] {
    return absl::StrCat(describe(x), " and index ", describe(index));
  };
  if (index.dim() != x.dim())
    throw_op_error("gather",
                   absl::StrCat("the index has ", index.dim(),
                                " dims but the input has ", x.dim()),
                   got(),
                   "The index needs the input's rank; unsqueeze it to match.");
  const int64_t d = detail::normalize_dim("gather", dim, x.dim(), x);
  // As PyTorch, an empty index skips the size check.
  if (index.numel() > 0)
    for (int64_t k = 0; k < x.dim(); ++k)
      if (k != d && index.shape()[k] > x.shape()[k])
        throw_op_error("gather",
                       absl::StrCat("index size ", index.shape()[k],
                                    " exceeds the input size ", x.shape()[k],
                                    " in dim ", k, " (only dim ", d,
                                    " may differ)"),
                       got(),
                       "Outside the gathered dim, index sizes must be <= the "
                       "input's.");
  return detail::record("gather", OpKind::gather, {x, index},
                        {{AttrName::dim, d}}, {index.shape(), x.dtype()});
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  if (!x.defined())
    throw_op_error("index_select", "the input is undefined", "", "");
  require_integer_index("index_select", x, index, "index");
  auto got = [&] {
    return absl::StrCat(describe(x), " and index ", describe(index));
  };
  if (index.dim() > 1)
    throw_op_error("index_select",
                   absl::StrCat("the index must be 1-d (or 0-d), it has ",
                                index.dim(), " dims"),
                   got(), "Flatten it with reshape({-1}).");
  if (x.dim() == 0) {
    // A 0-d input acts as a [1] tensor whose only index is 0.
    detail::normalize_dim("index_select", dim, 0, x);  // only 0 or -1
    if (index.numel() != 1)
      throw_op_error("index_select", "a 0-d input takes exactly one index",
                     got(), "Pass a one-element index.");
    return reshape(index_select(reshape(x, {1}), 0, reshape(index, {1})), {});
  }
  const int64_t d = detail::normalize_dim("index_select", dim, x.dim(), x);
  Tensor idx = index.dim() == 0 ? reshape(index, {1}) : index;
  Shape out = x.shape();
  out[d] = idx.numel();
  return detail::record("index_select", OpKind::index_select, {x, idx},
                        {{AttrName::dim, d}}, {std::move(out), x.dtype()});
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  if (!weight.defined())
    throw_op_error("embedding", "the weight is undefined", "", "");
  require_integer_index("embedding", weight, indices, "indices");
  if (weight.dim() != 2)
    throw_op_error("embedding",
                   absl::StrCat("the weight must be 2-d [num_embeddings, "
                                "embedding_dim], it has ",
                                weight.dim(), " dims"),
                   absl::StrCat("weight ", describe(weight), " and indices ",
                                describe(indices)),
                   "Reshape the table to 2-d.");
  // Pick rows from the flattened indices, then restore their shape with
  // the embedding dim appended.
  Tensor rows = index_select(weight, 0, reshape(indices, {-1}));
  std::vector<int64_t> shape(indices.shape().begin(), indices.shape().end());
  shape.push_back(weight.shape()[1]);
  return reshape(rows, shape);
}

}  // namespace mstep
