// Linalg ops. STUB: not implemented yet.
#include "lib/api/OpBuilder.h"
#include "mstep/api/Linalg.h"

namespace mstep {

Tensor matmul(const Tensor& a, const Tensor& b) {
  detail::throw_op_error("matmul", "is not implemented yet", "", "");
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  detail::throw_op_error("bmm", "is not implemented yet", "", "");
}

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  detail::throw_op_error("linear", "is not implemented yet", "", "");
}

Tensor conv2d(const Tensor& input, const Tensor& weight,
              const Tensor& bias, absl::Span<const int64_t> stride,
              absl::Span<const int64_t> padding,
              absl::Span<const int64_t> dilation, int64_t groups) {
  detail::throw_op_error("conv2d", "is not implemented yet", "", "");
}

Tensor max_pool2d(const Tensor& input, absl::Span<const int64_t> kernel,
                  absl::Span<const int64_t> stride,
                  absl::Span<const int64_t> padding,
                  absl::Span<const int64_t> dilation,
                  bool ceil_mode) {
  detail::throw_op_error("max_pool2d", "is not implemented yet", "", "");
}

Tensor avg_pool2d(const Tensor& input, absl::Span<const int64_t> kernel,
                  absl::Span<const int64_t> stride,
                  absl::Span<const int64_t> padding,
                  bool ceil_mode, bool count_include_pad) {
  detail::throw_op_error("avg_pool2d", "is not implemented yet", "", "");
}


}  // namespace mstep
