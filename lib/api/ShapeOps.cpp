// ShapeOps ops. STUB: not implemented yet.
#include "lib/api/OpBuilder.h"
#include "mstep/api/ShapeOps.h"

namespace mstep {

Tensor reshape(const Tensor& x, absl::Span<const int64_t> shape) {
  detail::throw_op_error("reshape", "is not implemented yet", "", "");
}

Tensor view(const Tensor& x, absl::Span<const int64_t> shape) {
  detail::throw_op_error("view", "is not implemented yet", "", "");
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  detail::throw_op_error("flatten", "is not implemented yet", "", "");
}

Tensor permute(const Tensor& x, absl::Span<const int64_t> perm) {
  detail::throw_op_error("permute", "is not implemented yet", "", "");
}

Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1) {
  detail::throw_op_error("transpose", "is not implemented yet", "", "");
}

Tensor expand(const Tensor& x, absl::Span<const int64_t> shape) {
  detail::throw_op_error("expand", "is not implemented yet", "", "");
}

Tensor squeeze(const Tensor& x) {
  detail::throw_op_error("squeeze", "is not implemented yet", "", "");
}

Tensor squeeze(const Tensor& x, int64_t dim) {
  detail::throw_op_error("squeeze", "is not implemented yet", "", "");
}

Tensor unsqueeze(const Tensor& x, int64_t dim) {
  detail::throw_op_error("unsqueeze", "is not implemented yet", "", "");
}

Tensor slice(const Tensor& x, int64_t dim, int64_t start,
             int64_t end, int64_t step) {
  detail::throw_op_error("slice", "is not implemented yet", "", "");
}

Tensor cat(absl::Span<const Tensor> tensors, int64_t dim) {
  detail::throw_op_error("cat", "is not implemented yet", "", "");
}

Tensor stack(absl::Span<const Tensor> tensors, int64_t dim) {
  detail::throw_op_error("stack", "is not implemented yet", "", "");
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  detail::throw_op_error("chunk", "is not implemented yet", "", "");
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::throw_op_error("gather", "is not implemented yet", "", "");
}

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  detail::throw_op_error("index_select", "is not implemented yet", "", "");
}

Tensor embedding(const Tensor& indices, const Tensor& weight) {
  detail::throw_op_error("embedding", "is not implemented yet", "", "");
}

Tensor pad(const Tensor& x, absl::Span<const int64_t> pads, double value) {
  detail::throw_op_error("pad", "is not implemented yet", "", "");
}

Tensor triu(const Tensor& x, int64_t diagonal) {
  detail::throw_op_error("triu", "is not implemented yet", "", "");
}

Tensor tril(const Tensor& x, int64_t diagonal) {
  detail::throw_op_error("tril", "is not implemented yet", "", "");
}


}  // namespace mstep
