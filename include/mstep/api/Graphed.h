// Graphed callables: capture/replay wrapped around a function or module.
//
// make_graphed_callable(fn, sample_inputs, parameters) captures fn's
// forward once and its backward once (torch.cuda.make_graphed_callables):
// calling the result copies the inputs into static inputs (no data copy for
// materialized tensors: buffers are shared), replays the forward graph and
// returns outputs linked into autograd; backward() through them replays the
// backward graph and hands the gradients of the inputs and parameters to
// autograd, so they accumulate into .grad as usual. The optimizer stays
// outside (lazy, or its own captured Graph); to capture the whole step,
// optimizer included, use mstep::Graph directly.
//
// ModuleCacher keeps one graphed callable per input signature (shapes,
// dtypes, devices, requires_grad) and non-tensor arguments, up to
// max_graphs (least recently used evicted): the way to run a model whose
// last batch is smaller, or whose call takes a flag, without recompiling
// or silently replaying the wrong graph.
//
// Limits: outputs alias the static outputs of the graph (the next call
// rebinds those, it does not overwrite returned tensors); backward must
// follow the forward call it belongs to before the next forward call, whose
// replay overwrites the saved activations (backward then throws
// mstep::Error naming both calls). A module applied twice before one
// backward needs two graphed callables.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "mstep/api/Tensor.h"
#include "mstep/runtime/Graph.h"

namespace mstep {

using TensorFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

class GraphedCallable {
 public:
  /// Replays the forward graph on `inputs` (same count, shapes, dtypes and
  /// devices as the samples; ReplayError otherwise).
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;
  /// The forward and backward captures (backward is empty when nothing
  /// requires grad).
  const Graph& forward_graph() const;
  const Graph& backward_graph() const;
  bool has_backward() const;

  struct State;

 private:
  friend GraphedCallable make_graphed_callable(TensorFn, const std::vector<Tensor>&,
                                               const std::vector<Tensor>&);
  std::shared_ptr<State> state_;
};

/// Captures `fn` on `sample_inputs` (run once, forward then backward with
/// zero output gradients; parameters' .grad is left as it was).
/// `parameters` are the tensors fn reads that receive gradients.
GraphedCallable make_graphed_callable(TensorFn fn, const std::vector<Tensor>& sample_inputs,
                                      const std::vector<Tensor>& parameters = {});

/// A module with `Tensor forward(const Tensor&)`.
template <typename M>
GraphedCallable make_graphed_callable(std::shared_ptr<M> module, const Tensor& sample_input) {
  return make_graphed_callable(
      [module](const std::vector<Tensor>& in) { return std::vector<Tensor>{module->forward(in[0])}; },
      {sample_input}, module->parameters());
}

/// A non-tensor argument of a cached call.
using CallArg = std::variant<int64_t, double, bool, std::string>;
using CallArgs = std::vector<CallArg>;

struct ModuleCacherOptions {
  size_t max_graphs = 8;
};

class ModuleCacher {
 public:
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&, const CallArgs&)>;
  ModuleCacher(Fn fn, std::vector<Tensor> parameters, ModuleCacherOptions options = {});
  /// A module with `Tensor forward(const Tensor&)`; its train/eval mode is
  /// part of the key.
  template <typename M>
  explicit ModuleCacher(std::shared_ptr<M> module, ModuleCacherOptions options = {})
      : ModuleCacher(
            [module](const std::vector<Tensor>& in, const CallArgs&) {
              return std::vector<Tensor>{module->forward(in[0])};
            },
            module->parameters(), options) {
    mode_ = [module] { return module->is_training(); };
  }

  /// Replays the graph for this signature, capturing it first on a miss.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs, const CallArgs& args = {});
  Tensor operator()(const Tensor& input) { return (*this)(std::vector<Tensor>{input}).at(0); }

  size_t num_graphs() const { return graphs_.size(); }
  int64_t captures() const { return captures_; }
  int64_t hits() const { return hits_; }
  int64_t evictions() const { return evictions_; }

 private:
  Fn fn_;
  std::vector<Tensor> parameters_;
  ModuleCacherOptions options_;
  std::function<bool()> mode_;
  std::list<std::pair<uint64_t, GraphedCallable>> graphs_;  // most recent first
  int64_t captures_ = 0, hits_ = 0, evictions_ = 0;
};

}  // namespace mstep
