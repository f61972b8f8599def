// Reduction ops. STUB: not implemented yet.
#include "lib/api/OpBuilder.h"
#include "mstep/api/Reduction.h"

namespace mstep {

Tensor sum(const Tensor& x, absl::Span<const int64_t> dims,
           bool keepdim) {
  detail::throw_op_error("sum", "is not implemented yet", "", "");
}

Tensor mean(const Tensor& x, absl::Span<const int64_t> dims,
            bool keepdim) {
  detail::throw_op_error("mean", "is not implemented yet", "", "");
}

Tensor max(const Tensor& x, absl::Span<const int64_t> dims,
           bool keepdim) {
  detail::throw_op_error("max", "is not implemented yet", "", "");
}

Tensor min(const Tensor& x, absl::Span<const int64_t> dims,
           bool keepdim) {
  detail::throw_op_error("min", "is not implemented yet", "", "");
}

Tensor argmax(const Tensor& x, std::optional<int64_t> dim,
              bool keepdim) {
  detail::throw_op_error("argmax", "is not implemented yet", "", "");
}

Tensor logsumexp(const Tensor& x, absl::Span<const int64_t> dims,
                 bool keepdim) {
  detail::throw_op_error("logsumexp", "is not implemented yet", "", "");
}

Tensor var(const Tensor& x, absl::Span<const int64_t> dims,
           int64_t correction, bool keepdim) {
  detail::throw_op_error("var", "is not implemented yet", "", "");
}


}  // namespace mstep
