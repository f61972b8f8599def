// The autograd graph: backward functions (GradFn) linked by edges, and the
// per-tensor AutogradMeta. Library-internal.
//
// Every differentiable primitive op recorded with requires-grad inputs gets
// one OpGradFn that saves its inputs and (detached) outputs. Its backward
// formula is looked up by OpKind (see Formulas.h) and emits ordinary lazy
// ops, so forward, backward and optimizer update land in one graph.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mstep/api/Tensor.h"
#include "mstep/ir/Attr.h"
#include "mstep/ir/OpKind.h"
#include "mstep/runtime/TensorImpl.h"

namespace mstep::autograd {

class GradFn;

/// Where a gradient goes: input `input_nr` of `fn`.
struct Edge {
  std::shared_ptr<GradFn> fn;
  uint32_t input_nr = 0;
};

class GradFn {
 public:
  virtual ~GradFn() = default;
  /// Gradients for each input edge (undefined where there is none), given
  /// the gradients of each output (undefined for unused outputs).
  virtual std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) = 0;
  /// Frees saved tensors (backward without retain_graph).
  virtual void release() {}
  virtual std::string name() const = 0;

  std::vector<Edge> next;                // one per input
  std::vector<TensorType> output_types;  // to build zero gradients
};

/// The backward of one recorded primitive op.
class OpGradFn final : public GradFn {
 public:
  OpGradFn(OpKind op, AttrList attrs, std::vector<Tensor> inputs,
           std::vector<Tensor> outputs);
  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override;
  void release() override;
  std::string name() const override;

 private:
  OpKind op_;
  AttrList attrs_;
  std::vector<Tensor> inputs_;
  std::vector<Tensor> outputs_;  // detached: no cycle through grad_fn
  bool released_ = false;
};

/// Sink of a leaf that requires grad: adds the incoming gradient to .grad.
class AccumulateGrad final : public GradFn {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::vector<Tensor> apply(std::vector<Tensor> grad_outputs) override;
  std::string name() const override { return "AccumulateGrad"; }

 private:
  // Not a user handle (TensorImpl::has_handles): the accumulator writes
  // the leaf's .grad and never reads its value; a leaf it alone keeps is
  // one the user dropped.
  std::shared_ptr<TensorImpl> leaf_;
};

struct AutogradMeta final : AutogradMetaBase {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<GradFn> grad_fn;         // null for leaves
  uint32_t output_nr = 0;                  // which output of grad_fn
  std::weak_ptr<GradFn> grad_accumulator;  // leaves: their AccumulateGrad
  // Leaves: called, in the order added, each time a backward() has
  // accumulated this leaf's gradient (torch's post-accumulate-grad hooks).
  std::vector<std::pair<uint64_t, std::function<void(const Tensor& leaf)>>> post_accumulate_hooks;
};

/// Adds a hook that runs after a backward() wrote `leaf`'s .grad (all of
/// that backward's contributions summed). Returns an id for removal.
uint64_t add_post_accumulate_hook(const Tensor& leaf, std::function<void(const Tensor& leaf)> hook);
/// Removes the hook `id` from `leaf` (unknown ids are ignored).
void remove_post_accumulate_hook(const Tensor& leaf, uint64_t id);
/// Runs `callback` once when the backward() in progress on this thread
/// has run every function (torch's Variable._execution_engine.queue_callback).
/// Throws outside a backward().
void queue_backward_callback(std::function<void()> callback);
/// A number that differs for every backward() run on this thread (0
/// outside one): tells a hook whether it already queued its callback in
/// this backward, even after an earlier backward threw.
uint64_t current_backward_id();

/// The meta of `t`, or null.
AutogradMeta* meta(const Tensor& t);
/// The meta of `t`, created when missing.
AutogradMeta& ensure_meta(const Tensor& t);

/// The edge a gradient for `t` flows into: its grad_fn, or its leaf
/// accumulator, or none when `t` does not require grad.
Edge gradient_edge(const Tensor& t);

/// Called by op recording: when grad mode is on and any input requires
/// grad, links `outputs` to an OpGradFn for `op`. `differentiable` (empty:
/// every input) says per input whether a gradient may flow into it; the
/// others get no edge, and requiring grad only there records nothing.
void record_op(OpKind op, const AttrList& attrs, absl::Span<const Tensor> inputs,
               absl::Span<const Tensor> outputs, const std::vector<bool>& differentiable = {});

/// Whether any of `inputs` requires grad while grad mode is on.
bool any_requires_grad(absl::Span<const Tensor> inputs);

}  // namespace mstep::autograd
