// GradFn implementations, the per-tensor autograd meta and op recording.
#include "lib/api/autograd/GradFn.h"

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/Formulas.h"
#include "mstep/api/Autograd.h"
#include "mstep/mstep.h"

namespace mstep::autograd {

AutogradMeta* meta(const Tensor& t) {
  if (!t.defined()) return nullptr;
  return static_cast<AutogradMeta*>(t.impl()->autograd_meta());
}

AutogradMeta& ensure_meta(const Tensor& t) {
  if (AutogradMeta* m = meta(t)) return *m;
  t.impl()->set_autograd_meta(std::make_unique<AutogradMeta>());
  return *meta(t);
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = meta(t);
  if (!m || !m->requires_grad) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  std::shared_ptr<GradFn> acc = m->grad_accumulator.lock();
  if (!acc) {
    acc = std::make_shared<AccumulateGrad>(t.impl_ptr());
    acc->output_types.push_back(t.type());
    m->grad_accumulator = acc;
  }
  return {acc, 0};
}

bool any_requires_grad(absl::Span<const Tensor> inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (AutogradMeta* m = meta(t); m && m->requires_grad) return true;
  return false;
}

void record_op(OpKind op, const AttrList& attrs, absl::Span<const Tensor> inputs,
               absl::Span<const Tensor> outputs, const std::vector<bool>& differentiable) {
  auto can_flow = [&](size_t i) { return differentiable.empty() || differentiable[i]; };
  bool wanted = false;
  for (size_t i = 0; i < inputs.size() && !wanted; ++i)
    wanted = can_flow(i) && any_requires_grad({&inputs[i], 1});
  if (!wanted || is_non_differentiable(op)) return;
  std::vector<Tensor> saved_outputs;
  for (const Tensor& o : outputs) saved_outputs.push_back(o.detach());
  auto fn = std::make_shared<OpGradFn>(op, attrs,
                                       std::vector<Tensor>(inputs.begin(), inputs.end()),
                                       std::move(saved_outputs));
  for (size_t i = 0; i < inputs.size(); ++i)
    fn->next.push_back(can_flow(i) ? gradient_edge(inputs[i]) : Edge{});
  for (uint32_t i = 0; i < outputs.size(); ++i) {
    fn->output_types.push_back(outputs[i].type());
    if (!is_floating(outputs[i].dtype())) continue;  // integer results carry no gradient
    AutogradMeta& m = ensure_meta(outputs[i]);
    m.requires_grad = true;
    m.grad_fn = fn;
    m.output_nr = i;
  }
}

OpGradFn::OpGradFn(OpKind op, AttrList attrs, std::vector<Tensor> inputs,
                   std::vector<Tensor> outputs)
    : op_(op), attrs_(std::move(attrs)), inputs_(std::move(inputs)), outputs_(std::move(outputs)) {}

std::string OpGradFn::name() const { return absl::StrCat(op_name(op_), "_backward"); }

void OpGradFn::release() {
  inputs_.clear();
  outputs_.clear();
  released_ = true;
}

std::vector<Tensor> OpGradFn::apply(std::vector<Tensor> grad_outputs) {
  if (released_)
    throw Error(absl::FailedPreconditionError(absl::StrCat(
        "mstep::backward: ", name(),
        " was already run and its saved tensors freed. Pass retain_graph=true to "
        "the first backward() if you need to backward through the graph twice.")));
  BackwardFormula formula = formulas()[static_cast<int>(op_)];
  if (!formula)
    throw Error(absl::UnimplementedError(absl::StrCat(
        "mstep::backward: op '", op_name(op_),
        "' has no backward formula yet. Detach its input (x.detach()) if no "
        "gradient is needed through it.")));
  std::vector<bool> needs;
  for (const Edge& e : next) needs.push_back(e.fn != nullptr);
  BackwardContext ctx{op_, attrs_, inputs_, outputs_, grad_outputs, needs};
  std::vector<Tensor> grads = formula(ctx);
  grads.resize(next.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!needs[i] || !grads[i].defined()) {
      grads[i] = Tensor();
      continue;
    }
    // A formula must give each input a gradient of the input's type.
    if (grads[i].type() != inputs_[i].type())
      throw Error(absl::InternalError(absl::StrCat(
          "mstep::backward: ", name(), " produced a gradient of type ", grads[i].type().to_string(),
          " for input ", i, " of type ", inputs_[i].type().to_string(),
          ". This is a bug in mstep; please report it with the op and shapes.")));
  }
  return grads;
}

std::vector<Tensor> AccumulateGrad::apply(std::vector<Tensor> grad_outputs) {
  const Tensor& g = grad_outputs[0];
  if (!g.defined()) return {};
  Tensor leaf(leaf_);
  AutogradMeta& m = ensure_meta(leaf);
  m.grad = m.grad.defined() ? add(m.grad, g).detach() : g.detach();
  // A hook may add or remove hooks: run a copy.
  const auto hooks = m.post_accumulate_hooks;
  for (const auto& [id, hook] : hooks) hook(leaf);
  return {};
}

uint64_t add_post_accumulate_hook(const Tensor& leaf, std::function<void(const Tensor&)> hook) {
  static uint64_t next_id = 0;
  ensure_meta(leaf).post_accumulate_hooks.emplace_back(++next_id, std::move(hook));
  return next_id;
}

void remove_post_accumulate_hook(const Tensor& leaf, uint64_t id) {
  AutogradMeta* m = meta(leaf);
  if (!m) return;
  auto& hooks = m->post_accumulate_hooks;
  std::erase_if(hooks, [id](const auto& h) { return h.first == id; });
}

Tensor BackwardContext::grad(size_t i) const {
  if (grads[i].defined()) return grads[i];
  return zeros(outputs[i].shape(), outputs[i].dtype(), outputs[i].device());
}

Tensor sum_to(const Tensor& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const int64_t lead = grad.dim() - shape.rank();
  IntList dims;
  for (int64_t d = 0; d < grad.dim(); ++d)
    if (d < lead || (shape[d - lead] == 1 && grad.shape()[d] != 1)) dims.push_back(d);
  Tensor reduced = dims.empty() ? grad : sum(grad, dims, /*keepdim=*/true);
  return reshape(reduced, shape.dims());
}

}  // namespace mstep::autograd
