// NaN guard: checks every gradient for NaN / Inf before an optimizer
// applies its update, and on a hit writes a reproducer of the step and
// stops the run.
//
// Opt in with MSTEP_NAN_GUARD=dir or enable_nan_guard(dir). With the guard
// on, Optimizer::step():
//  1. records one small reduction over all gradients (per parameter, the
//     count of non-finite entries, stacked into one i64 vector);
//  2. calls mark_step(): forward, backward and that vector run as one
//     graph. The update is not traced yet, so the parameters still hold
//     their values from before the update;
//  3. reads the vector (the one extra host sync of the step, counted in
//     metrics().sync_points);
//  4. on a hit, writes a reproducer and throws NanGuardError without
//     recording the update: the parameters and the optimizer state stay
//     as they were. Otherwise it records the update as usual.
// So the guard cuts the graph before the update: the update then runs at
// the next mark_step() as a graph of its own (two graphs per step instead
// of one). Call step() before mark_step(): gradients computed by an
// earlier mark_step() are inputs of the guard's graph, and its reproducer
// then holds only the check, not the forward and backward that made them.
//
// A reproducer is a directory <dir>/reproducer_<n> (n: the first unused
// number, so earlier reproducers are never overwritten), written under a
// temporary name and renamed into place when complete:
//   graph.mlir          the step graph as imported into MLIR (before the
//                       pass pipeline)
//   inputs.safetensors  every graph input, "input.<i>" in input order
//   weights.safetensors "param.<k>" (optimizer parameter k before the
//                       update) and "optimizer.<name>" (the optimizer's
//                       state_dict() before the update)
//   meta.txt            graph key, RNG seed and offset, input roles and
//                       types, the parameters whose gradient was
//                       non-finite, and the non-finite graph outputs
// load_reproducer() reads it back and run() re-runs the step graph on the
// saved inputs, which reproduces the non-finite values.
//
// Not thread-safe: like the tracer, used from one thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mstep/api/Tensor.h"
#include "mstep/core/Device.h"
#include "mstep/core/Error.h"
#include "mstep/ir/InputRole.h"

namespace mstep {

struct TraceGraph;

/// Turns the guard on, writing reproducers under `dir` (created when a
/// hit needs it); "" turns it off. Replaces the MSTEP_NAN_GUARD setting
/// (RuntimeOptions::nan_guard_dir, which holds the state).
void enable_nan_guard(const std::string& dir);
/// Whether Optimizer::step() checks gradients (MSTEP_NAN_GUARD or
/// enable_nan_guard).
bool nan_guard_enabled();
/// The directory reproducers go to ("" when the guard is off).
std::string nan_guard_dir();

/// Thrown by Optimizer::step() when a gradient holds NaN or Inf. The
/// update was not applied. what() says which parameters, where the
/// reproducer is and how to load it.
class NanGuardError : public Error {
public:
  NanGuardError(const absl::Status& status, std::string reproducer_dir,
                std::vector<size_t> nonfinite_parameters)
      : Error(status), reproducer_dir_(std::move(reproducer_dir)),
        nonfinite_parameters_(std::move(nonfinite_parameters)) {}
  /// The reproducer's directory; "" when it could not be written (what()
  /// then says why).
  const std::string& reproducer_dir() const { return reproducer_dir_; }
  /// Indices into Optimizer::parameters() whose gradient was non-finite.
  const std::vector<size_t>& nonfinite_parameters() const { return nonfinite_parameters_; }

private:
  std::string reproducer_dir_;
  std::vector<size_t> nonfinite_parameters_;
};

/// A reproducer written by the NaN guard, loaded back.
class Reproducer {
public:
  /// GraphKey::full() of the step graph, and every key component as text.
  uint64_t graph_key() const { return graph_key_; }
  const std::string& graph_key_text() const { return graph_key_text_; }
  /// The Philox state the step started from.
  uint64_t rng_seed() const { return rng_seed_; }
  uint64_t rng_offset() const { return rng_offset_; }
  /// The optimizer that stopped ("SGD", "Adam", ...).
  const std::string& optimizer() const { return optimizer_; }

  /// The step graph (as imported, before the pass pipeline).
  const TraceGraph& graph() const { return *graph_; }
  /// Every graph input, materialized on the host's ref device.
  const std::vector<Tensor>& inputs() const { return inputs_; }
  const std::vector<InputRole>& input_roles() const { return input_roles_; }
  /// weights.safetensors: "param.<k>" and "optimizer.<name>".
  const std::map<std::string, Tensor>& weights() const { return weights_; }

  /// Parameter indices whose gradient was non-finite when the guard hit.
  const std::vector<size_t>& nonfinite_parameters() const { return nonfinite_parameters_; }
  /// Parameter k -> the graph input that held it (absent when it was not
  /// an input of the step graph).
  const std::map<size_t, size_t>& parameter_inputs() const { return parameter_inputs_; }
  /// Parameter k -> the graph output that computed its gradient (absent
  /// when the gradient was not computed in this graph).
  const std::map<size_t, size_t>& gradient_outputs() const { return gradient_outputs_; }
  /// The outputs that were non-finite when the guard hit.
  const std::vector<size_t>& recorded_nonfinite_outputs() const {
    return recorded_nonfinite_outputs_;
  }

  /// The custom ops the graph calls that are registered as not
  /// deterministic (CustomOpSchema::deterministic = false), by label
  /// ("name" or "name vN"), sorted. When any, run() need not give the
  /// recorded values bitwise: the step may not fail the same way again.
  const std::vector<std::string>& nondeterministic_custom_ops() const {
    return nondeterministic_custom_ops_;
  }

  /// Compiles the graph on `device`'s backend and runs it on fresh copies
  /// of inputs(); returns one tensor per graph output. Throws
  /// mstep::Error when the graph does not compile or run.
  std::vector<Tensor> run(Device device = Device{}) const;
  /// Indices of the outputs with any NaN or Inf, after run() (run now
  /// when it has not run yet).
  std::vector<size_t> nonfinite_outputs() const;

private:
  friend Reproducer load_reproducer(const std::string& dir);
  std::string dir_;
  uint64_t graph_key_ = 0;
  std::string graph_key_text_;
  uint64_t rng_seed_ = 0, rng_offset_ = 0;
  std::string optimizer_;
  std::shared_ptr<const TraceGraph> graph_;
  std::vector<Tensor> inputs_;
  std::vector<InputRole> input_roles_;
  std::map<std::string, Tensor> weights_;
  std::vector<size_t> nonfinite_parameters_;
  std::map<size_t, size_t> parameter_inputs_;
  std::map<size_t, size_t> gradient_outputs_;
  std::vector<size_t> recorded_nonfinite_outputs_;
  std::vector<std::string> nondeterministic_custom_ops_;
  mutable std::vector<Tensor> last_outputs_; // of the latest run()
};

/// Reads a reproducer directory. A missing file, malformed meta.txt or
/// MLIR, or inputs whose count or types do not match the graph throw
/// mstep::Error naming the file and the problem.
Reproducer load_reproducer(const std::string& dir);

namespace optim {
class Optimizer;
}

namespace detail {
/// The Optimizer::step() hook: with the guard on, runs the step graph
/// with the gradient check and throws NanGuardError on a hit. Returns
/// at once when the guard is off.
void check_gradients_before_update(const optim::Optimizer& optimizer);
} // namespace detail

} // namespace mstep
