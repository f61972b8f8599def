// NN ops. STUB: not implemented yet.
#include "lib/api/OpBuilder.h"
#include "mstep/api/NN.h"

namespace mstep {

Tensor softmax(const Tensor& x, int64_t dim) {
  detail::throw_op_error("softmax", "is not implemented yet", "", "");
}

Tensor log_softmax(const Tensor& x, int64_t dim) {
  detail::throw_op_error("log_softmax", "is not implemented yet", "", "");
}

Tensor layer_norm(const Tensor& x, absl::Span<const int64_t> normalized_shape,
                  const Tensor& weight, const Tensor& bias,
                  double eps) {
  detail::throw_op_error("layer_norm", "is not implemented yet", "", "");
}

Tensor rms_norm(const Tensor& x, absl::Span<const int64_t> normalized_shape,
                const Tensor& weight,
                std::optional<double> eps) {
  detail::throw_op_error("rms_norm", "is not implemented yet", "", "");
}

Tensor dropout(const Tensor& x, double p, bool train) {
  detail::throw_op_error("dropout", "is not implemented yet", "", "");
}


}  // namespace mstep
