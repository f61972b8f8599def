// Losses ops. STUB: not implemented yet.
#include "lib/api/OpBuilder.h"
#include "mstep/api/Losses.h"

namespace mstep {

Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     Reduction reduction,
                     int64_t ignore_index,
                     double label_smoothing) {
  detail::throw_op_error("cross_entropy", "is not implemented yet", "", "");
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& target,
                Reduction reduction,
                int64_t ignore_index) {
  detail::throw_op_error("nll_loss", "is not implemented yet", "", "");
}

Tensor mse_loss(const Tensor& input, const Tensor& target,
                Reduction reduction) {
  detail::throw_op_error("mse_loss", "is not implemented yet", "", "");
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits,
                                        const Tensor& target,
                                        Reduction reduction) {
  detail::throw_op_error("binary_cross_entropy_with_logits", "is not implemented yet", "", "");
}


}  // namespace mstep
