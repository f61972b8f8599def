// make_graphed_callable: a forward Graph and a backward Graph joined to
// autograd by one GradFn (see include/mstep/api/Graphed.h).
#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/GradFn.h"
#include "mstep/api/Autograd.h"
#include "mstep/api/Elementwise.h"
#include "mstep/api/Graphed.h"
#include "mstep/runtime/Runtime.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

namespace {

void materialize(const Tensor& t) {
  if (t.is_pending()) throw_if_error(Tracer::get().sync(*t.impl()));
}

void check_signature(const std::vector<Tensor>& inputs, const std::vector<Tensor>& statics) {
  if (inputs.size() != statics.size())
    throw ReplayError(ReplayError::Kind::arity_mismatch,
                      absl::StrCat("graphed callable: captured with ", statics.size(),
                                   " inputs, called with ", inputs.size()));
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    const Tensor& st = statics[i];
    if (!in.defined())
      throw ReplayError(ReplayError::Kind::input_freed,
                        absl::StrCat("graphed callable: input ", i, " is undefined"));
    const std::string where =
        absl::StrCat("graphed callable: input ", i, " is ", detail::describe(in),
                     " but the graph was captured for ", detail::describe(st), ". ");
    if (in.shape() != st.shape())
      throw ReplayError(ReplayError::Kind::shape_mismatch,
                        where + "Use mstep::ModuleCacher to keep one graph per input shape "
                                "(e.g. for the last, smaller batch).");
    if (in.dtype() != st.dtype())
      throw ReplayError(ReplayError::Kind::dtype_mismatch, where + "Convert it with .to(dtype).");
    if (in.device() != st.device())
      throw ReplayError(ReplayError::Kind::device_mismatch,
                        absl::StrCat("graphed callable: input ", i, " lives on ",
                                     in.device().to_string(), " but the graph was captured on ",
                                     st.device().to_string(), ". Move it there with .to(device), "
                                     "or make a graphed callable on ", in.device().to_string(),
                                     "."));
  }
}

}  // namespace

// Tensors handed out (outputs, gradients) and static inputs are detach()es:
// new tensors on the same immutable buffers, so a later replay rebinds the
// static tensors and never changes what a caller holds.
struct GraphedCallable::State {
  Graph forward, backward;
  std::vector<Tensor> static_inputs;        // leaves; bound to the caller's buffers per call
  std::vector<Tensor> static_outputs;
  std::vector<Tensor> static_grad_outputs;  // backward's inputs
  std::vector<Tensor> static_input_grads;   // backward's outputs (undefined: no grad)
  std::vector<Tensor> static_param_grads;
  std::vector<Tensor> parameters;
  std::vector<bool> output_requires_grad;
  // Forward calls so far: each replay overwrites the state the backward of
  // the previous one would read.
  uint64_t forward_calls = 0;
};

namespace {

/// The backward of one graphed call: replays the backward graph.
class GraphedBackward final : public autograd::GradFn {
 public:
  GraphedBackward(std::shared_ptr<GraphedCallable::State> state, uint64_t call)
      : state_(std::move(state)), call_(call) {}
  std::string name() const override { return "GraphedBackward"; }

  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override {
    GraphedCallable::State& s = *state_;
    // The backward graph reads the activations the forward graph saved in
    // static tensors, which a later forward call replaced.
    if (s.forward_calls != call_)
      throw Error(absl::FailedPreconditionError(absl::StrCat(
          "graphed callable: backward of forward call #", call_, " after forward call #",
          s.forward_calls, " overwrote its saved state; call backward before the next "
          "forward, or use one graphed callable per call in a step (two for a module applied "
          "twice before one backward)")));
    for (size_t k = 0; k < s.static_grad_outputs.size(); ++k) {
      Tensor g = k < grad_outputs.size() ? grad_outputs[k] : Tensor();
      Tensor& dst = s.static_grad_outputs[k];
      if (!g.defined()) g = detail::materialized_zeros(dst.type(), dst.device());
      if (g.dtype() != dst.dtype()) g = to(g, dst.dtype());
      materialize(g);
      dst.impl()->set_buffer(g.impl()->buffer());
    }
    s.backward.replay();
    std::vector<Tensor> grads;
    for (const Tensor& g : s.static_input_grads) grads.push_back(g.detach());
    for (const Tensor& g : s.static_param_grads) grads.push_back(g.detach());
    return grads;
  }

 private:
  std::shared_ptr<GraphedCallable::State> state_;
  uint64_t call_;  // the forward call this backward belongs to
};

}  // namespace

GraphedCallable make_graphed_callable(TensorFn fn, const std::vector<Tensor>& sample_inputs,
                                      const std::vector<Tensor>& parameters) {
  if (is_capturing())
    throw ReplayError(ReplayError::Kind::capture_active,
                      "make_graphed_callable: called inside a capture; make it before capturing");
  auto state = std::make_shared<GraphedCallable::State>();
  GraphedCallable::State& s = *state;
  s.parameters = parameters;
  mark_step();
  for (const Tensor& sample : sample_inputs) {
    if (!sample.defined())
      detail::throw_op_error("make_graphed_callable", "a sample input is undefined", "",
                             "Pass one materialized example tensor per input.");
    materialize(sample);
    Tensor st = sample.detach();
    if (sample.requires_grad()) st.requires_grad_();
    s.static_inputs.push_back(st);
  }

  // Forward: every saved activation becomes a static result of this graph.
  {
    CaptureGuard capture(s.forward);
    s.static_outputs = fn(s.static_inputs);
  }
  bool any_grad = false;
  for (const Tensor& o : s.static_outputs) {
    s.output_requires_grad.push_back(o.requires_grad());
    any_grad |= o.requires_grad();
  }
  GraphedCallable callable;
  callable.state_ = state;
  if (!any_grad || !grad_enabled()) return callable;

  // Backward, with the parameters' .grad set aside so the capture neither
  // reads nor changes it.
  std::vector<Tensor> roots, seeds;
  for (size_t k = 0; k < s.static_outputs.size(); ++k) {
    s.static_grad_outputs.push_back(detail::materialized_zeros(s.static_outputs[k].type(), s.static_outputs[k].device()));
    if (s.output_requires_grad[k]) {
      roots.push_back(s.static_outputs[k]);
      seeds.push_back(s.static_grad_outputs[k]);
    }
  }
  std::vector<Tensor> stashed;
  for (const Tensor& p : parameters) {
    autograd::AutogradMeta* m = autograd::meta(p);
    stashed.push_back(m ? m->grad : Tensor());
    if (m) m->grad = Tensor();
  }
  {
    CaptureGuard capture(s.backward);
    backward(roots, seeds, /*retain_graph=*/true);
  }
  for (const Tensor& in : s.static_inputs) s.static_input_grads.push_back(in.grad());
  for (size_t j = 0; j < parameters.size(); ++j) {
    autograd::AutogradMeta* m = autograd::meta(parameters[j]);
    s.static_param_grads.push_back(m ? m->grad : Tensor());
    if (m) m->grad = stashed[j];
  }
  for (const Tensor& in : s.static_inputs)
    if (autograd::AutogradMeta* m = autograd::meta(in)) m->grad = Tensor();

  return callable;
}

std::vector<Tensor> GraphedCallable::operator()(const std::vector<Tensor>& inputs) const {
  State& s = *state_;
  check_signature(inputs, s.static_inputs);
  for (const Tensor& in : inputs) materialize(in);
  for (size_t i = 0; i < inputs.size(); ++i)
    s.static_inputs[i].impl()->set_buffer(inputs[i].impl()->buffer());
  s.forward.replay();
  const uint64_t call = ++s.forward_calls;

  std::vector<Tensor> outputs;
  for (const Tensor& o : s.static_outputs) outputs.push_back(o.detach());
  if (!has_backward() || !grad_enabled()) return outputs;
  bool needs_grad = false;
  for (const Tensor& in : inputs) needs_grad |= in.requires_grad();
  for (const Tensor& p : s.parameters) needs_grad |= p.requires_grad();
  if (!needs_grad) return outputs;
  auto fn = std::make_shared<GraphedBackward>(state_, call);
  for (const Tensor& in : inputs) fn->next.push_back(autograd::gradient_edge(in));
  for (const Tensor& p : s.parameters) fn->next.push_back(autograd::gradient_edge(p));
  for (uint32_t k = 0; k < outputs.size(); ++k) {
    fn->output_types.push_back(outputs[k].type());
    if (!s.output_requires_grad[k]) continue;
    autograd::AutogradMeta& m = autograd::ensure_meta(outputs[k]);
    m.requires_grad = true;
    m.grad_fn = fn;
    m.output_nr = k;
  }
  return outputs;
}

const Graph& GraphedCallable::forward_graph() const { return state_->forward; }
const Graph& GraphedCallable::backward_graph() const { return state_->backward; }
bool GraphedCallable::has_backward() const { return state_->backward.captured(); }

}  // namespace mstep
