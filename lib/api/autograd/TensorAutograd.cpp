// Tensor's autograd methods.
#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/GradFn.h"
#include "mstep/api/Autograd.h"

namespace mstep {

bool Tensor::requires_grad() const {
  autograd::AutogradMeta* m = autograd::meta(*this);
  return m && m->requires_grad;
}

Tensor& Tensor::requires_grad_(bool requires_grad) {
  if (!defined()) detail::throw_op_error("requires_grad_", "the tensor is undefined", "", "");
  if (!is_leaf() && !requires_grad)
    detail::throw_op_error("requires_grad_",
                           "cannot turn off gradients of a tensor computed by a differentiable op",
                           detail::describe(*this), "Use detach() to get a copy without history.");
  if (requires_grad && !is_floating(dtype()))
    detail::throw_op_error("requires_grad_", "only floating-point tensors can require gradients",
                           detail::describe(*this), "Convert it with .to(DType::f32) first.");
  autograd::ensure_meta(*this).requires_grad = requires_grad;
  if (is_leaf()) impl()->set_input_role(requires_grad ? InputRole::parameter : InputRole::input);
  return *this;
}

Tensor Tensor::grad() const {
  autograd::AutogradMeta* m = autograd::meta(*this);
  return m ? m->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) {
  if (grad.defined() && (grad.type() != type()))
    detail::throw_op_error("set_grad", "the gradient's type does not match the tensor",
                           absl::StrCat("tensor ", detail::describe(*this), ", gradient ",
                                        detail::describe(grad)),
                           "");
  if (grad.defined() && grad.device() != device())
    detail::throw_op_error("set_grad", "the gradient lives on another device than the tensor",
                           absl::StrCat("tensor on ", device().to_string(), ", gradient on ",
                                        grad.device().to_string()),
                           "Move the gradient with .to(device) first.");
  autograd::ensure_meta(*this).grad = grad;
}

bool Tensor::is_leaf() const {
  autograd::AutogradMeta* m = autograd::meta(*this);
  return !m || !m->grad_fn;
}

std::string Tensor::grad_fn_name() const {
  autograd::AutogradMeta* m = autograd::meta(*this);
  return m && m->grad_fn ? m->grad_fn->name() : "";
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
  mstep::backward({*this}, gradient.defined() ? std::vector<Tensor>{gradient} : std::vector<Tensor>{},
                  retain_graph);
}

Tensor Tensor::detach() const {
  if (!defined()) return Tensor();
  auto impl = TensorImpl::make(type(), device());
  if (impl_->is_pending()) {
    impl->set_pending(impl_->pending());
  } else {
    impl->set_buffer(impl_->buffer());
  }
  return Tensor(std::move(impl));
}

}  // namespace mstep
