// Attention ops. STUB: not implemented yet.
#include "lib/api/OpBuilder.h"
#include "mstep/api/Attention.h"

namespace mstep {

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k,
                                    const Tensor& v,
                                    const SdpaOptions& options) {
  detail::throw_op_error("scaled_dot_product_attention", "is not implemented yet", "", "");
}

SdpaResult fused_sdpa(const Tensor& q, const Tensor& k, const Tensor& v,
                      const SdpaOptions& options) {
  detail::throw_op_error("fused_sdpa", "is not implemented yet", "", "");
}


}  // namespace mstep
