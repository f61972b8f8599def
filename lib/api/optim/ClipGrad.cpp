// clip_grad_norm_, following torch.nn.utils.clip_grad_norm_ (1.13): the
// norm of the per-gradient norms, and one device-side coefficient.
#include "mstep/api/optim/ClipGrad.h"

#include <cmath>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "mstep/mstep.h"

namespace mstep::optim {

namespace {
/// The p-norm of all elements of `x`.
Tensor norm(const Tensor& x, double p) {
  if (std::isinf(p)) return max(abs(x));
  if (p == 2) return sqrt(sum(x * x));
  if (p == 1) return sum(abs(x));
  return pow(sum(pow(abs(x), p)), 1.0 / p);
}
}  // namespace

Tensor clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type) {
  if (std::isnan(norm_type) || norm_type <= 0 || (std::isinf(norm_type) && norm_type < 0))
    detail::throw_op_error("optim::clip_grad_norm_", absl::StrCat("invalid norm_type ", norm_type),
                           "", "Use p > 0, or kInfNorm for the largest absolute value.");
  NoGradGuard no_grad;
  std::vector<Tensor> grads;
  std::unordered_set<const TensorImpl*> seen;
  for (const Tensor& p : params) {
    if (!p.defined() || !seen.insert(p.impl()).second) continue;
    Tensor g = p.grad();
    if (g.defined()) grads.push_back(g);
  }
  if (grads.empty()) return zeros(Shape{});
  // The per-gradient norms, in one dtype so they stack (torch.stack
  // promotes them the same way).
  DType dtype = grads.front().dtype();
  for (const Tensor& g : grads) dtype = promote_types(dtype, g.dtype());
  std::vector<Tensor> norms;
  for (const Tensor& g : grads) norms.push_back(detail::cast_to(norm(g, norm_type), dtype));
  Tensor total = norms.size() == 1 ? norms.front() : norm(stack(norms), norm_type);
  // min(max_norm / (total + 1e-6), 1) on the device: no sync point, and
  // the same graph whatever the norm turns out to be.
  Tensor coef = max_norm / (total + 1e-6);
  Tensor clamped = minimum(coef, ones(Shape{}, coef.dtype(), coef.device()));
  for (Tensor& g : grads) g.copy_(g * detail::cast_to(clamped, g.dtype()));
  return total;
}

}  // namespace mstep::optim
