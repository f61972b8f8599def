// The backward engine: walks the GradFn graph from the roots in
// topological order (Kahn's algorithm), summing the gradients that reach
// each function before running it.
//   1. Count, for every GradFn reachable from the roots, how many edges
//      point at it.
//   2. Seed the roots' gradients and start with the functions whose count
//      is already zero.
//   3. Run a ready function (its formula records lazy ops), add each
//      resulting gradient into its target's input slot, and decrement the
//      target's count; a count reaching zero makes the target ready.
#include <functional>
#include <unordered_map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/GradFn.h"
#include "mstep/mstep.h"

namespace mstep {

namespace {
thread_local bool g_grad_enabled = true;
// The callbacks queued by the backward() running on this thread (null
// outside one).
thread_local std::vector<std::function<void()>>* g_backward_callbacks = nullptr;
thread_local uint64_t g_backward_id = 0, g_backward_count = 0;
}  // namespace

uint64_t autograd::current_backward_id() { return g_backward_callbacks ? g_backward_id : 0; }

void autograd::queue_backward_callback(std::function<void()> callback) {
  if (!g_backward_callbacks)
    detail::throw_op_error("queue_backward_callback", "no backward() is running", "",
                           "Queue callbacks from a hook that runs inside backward().");
  g_backward_callbacks->push_back(std::move(callback));
}

bool grad_enabled() { return g_grad_enabled; }
void set_grad_enabled(bool enabled) { g_grad_enabled = enabled; }

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& gradients,
              bool retain_graph) {
  using autograd::Edge;
  using autograd::GradFn;
  if (!gradients.empty() && gradients.size() != roots.size())
    detail::throw_op_error("backward",
                           absl::StrCat("got ", roots.size(), " roots but ", gradients.size(),
                                        " gradients"),
                           "", "Pass one gradient per root, or none for scalar roots.");
  // Validate everything before recording anything.
  std::vector<Edge> root_edges;
  std::vector<Tensor> root_grads;
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    if (!r.defined()) detail::throw_op_error("backward", "a root tensor is undefined", "", "");
    if (!r.requires_grad())
      detail::throw_op_error(
          "backward", "the tensor does not require grad and has no grad_fn",
          detail::describe(r),
          "Call requires_grad_() on the parameters it is computed from, and do not "
          "compute it under NoGradGuard.");
    Tensor g = gradients.empty() ? Tensor() : gradients[i];
    if (!g.defined()) {
      if (r.numel() != 1)
        detail::throw_op_error("backward",
                               "a gradient can be implied only for a scalar output",
                               detail::describe(r),
                               "Pass a gradient of the same shape, e.g. "
                               "y.backward(mstep::ones_like(y)), or reduce y first.");
      g = ones_like(r);
    } else if (g.shape() != r.shape()) {
      detail::throw_op_error("backward", "the gradient's shape does not match the output",
                             absl::StrCat("output ", detail::describe(r), ", gradient ",
                                          detail::describe(g)),
                             "Pass a gradient with the output's shape.");
    }
    root_edges.push_back(autograd::gradient_edge(r));
    root_grads.push_back(to(g, r.dtype()));
  }

  NoGradGuard no_grad;  // backward ops are not themselves differentiated
  std::vector<std::function<void()>> callbacks;
  struct CallbackScope {
    std::vector<std::function<void()>>* previous;
    explicit CallbackScope(std::vector<std::function<void()>>* mine)
        : previous(g_backward_callbacks), previous_id(g_backward_id) {
      g_backward_callbacks = mine;
      g_backward_id = ++g_backward_count;
    }
    ~CallbackScope() {
      g_backward_callbacks = previous;
      g_backward_id = previous_id;
    }
    uint64_t previous_id;
  } callback_scope(&callbacks);
  // 1. Dependencies.
  std::unordered_map<GradFn*, int> dependencies;
  std::vector<GradFn*> stack;
  for (const Edge& e : root_edges) {
    if (dependencies.emplace(e.fn.get(), 0).second) stack.push_back(e.fn.get());
  }
  while (!stack.empty()) {
    GradFn* fn = stack.back();
    stack.pop_back();
    for (const Edge& e : fn->next) {
      if (!e.fn) continue;
      if (++dependencies[e.fn.get()] == 1) stack.push_back(e.fn.get());
    }
  }

  // 2. Seed.
  std::unordered_map<GradFn*, std::vector<Tensor>> inputs;
  std::unordered_map<GradFn*, std::shared_ptr<GradFn>> keep_alive;
  auto deliver = [&](const Edge& e, const Tensor& g) {
    std::vector<Tensor>& slots = inputs[e.fn.get()];
    if (slots.empty()) slots.resize(e.fn->output_types.size());
    Tensor& slot = slots[e.input_nr];
    slot = slot.defined() ? add(slot, g) : g;
    keep_alive.emplace(e.fn.get(), e.fn);
  };
  for (size_t i = 0; i < root_edges.size(); ++i) deliver(root_edges[i], root_grads[i]);
  std::vector<GradFn*> ready;
  for (const Edge& e : root_edges)
    if (dependencies[e.fn.get()] == 0) ready.push_back(e.fn.get());

  // 3. Run.
  while (!ready.empty()) {
    GradFn* fn = ready.back();
    ready.pop_back();
    if (dependencies[fn] < 0) continue;  // a root listed twice
    dependencies[fn] = -1;
    std::vector<Tensor> grads = fn->apply(std::move(inputs[fn]));
    inputs.erase(fn);
    if (!retain_graph) fn->release();
    for (size_t i = 0; i < fn->next.size() && i < grads.size(); ++i) {
      const Edge& e = fn->next[i];
      if (!e.fn) continue;
      if (grads[i].defined()) deliver(e, grads[i]);
      if (--dependencies[e.fn.get()] == 0) ready.push_back(e.fn.get());
    }
    // Functions whose inputs produced no gradient still count down.
    for (size_t i = grads.size(); i < fn->next.size(); ++i) {
      const Edge& e = fn->next[i];
      if (e.fn && --dependencies[e.fn.get()] == 0) ready.push_back(e.fn.get());
    }
  }
  // 4. Callbacks queued by hooks (a callback may queue more).
  for (size_t i = 0; i < callbacks.size(); ++i) {
    auto callback = std::move(callbacks[i]);
    callback();
  }
}

}  // namespace mstep
