// StableHLO in: a function that JAX (or another StableHLO producer) lowered,
// run on any mstep backend.
//
//   mstep::StableHloFunction step = mstep::import_stablehlo("step.mlir");
//   std::vector<mstep::Tensor> out = step({w1, b1, w2, b2, x, y});   // lazy
//
// The module is StableHLO text as JAX prints it (`jax.jit(f).lower(*args)
// .as_text()`, or the generic op form); compiler/StableHloImport.h lists
// the ops read and says how the text is parsed. Calling the function records its ops as
// lazy mstep ops on the inputs' device, so it is cut, compiled, cached,
// captured (mstep::Graph), replayed and exported like any traced step. No
// autograd is recorded: the module is a plain function (a training step
// carries its own backward, as JAX's do). Large constants in the module
// (arrays the jitted function closed over) are uploaded on each call.
//
// Graph::export_stablehlo is the other direction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mstep/api/Tensor.h"
#include "mstep/core/TensorType.h"

namespace mstep {

/// An imported StableHLO function. Immutable; cheap to copy (shared); safe
/// to call from the thread that traces.
class StableHloFunction {
 public:
  const std::vector<TensorType>& input_types() const;
  const std::vector<TensorType>& output_types() const;
  /// The arguments' names (`mstep.name` or `jax.arg_info`, else "arg<i>")
  /// and the results' (`mstep.name` or `jax.result_info`, else
  /// "result<i>").
  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  /// Per input: the output the module donates it to (`tf.aliasing_output`,
  /// what jax.jit(donate_argnums=...) writes), or -1. Informational: the
  /// call returns new tensors and leaves its inputs unchanged.
  const std::vector<int32_t>& donated_to() const;

  /// Records the function on `inputs` (one per argument, of its dtype and
  /// shape, all on one device) and returns its outputs, pending. Throws
  /// mstep::Error (InvalidArgument) naming the first input that does not
  /// match, before recording anything.
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs) const;

  struct Impl;

 private:
  friend StableHloFunction import_stablehlo(const std::string& path);
  explicit StableHloFunction(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

/// Reads the StableHLO module at `path`. Throws mstep::Error: NotFound
/// when it cannot be read; InvalidArgument "<path>:<line>:<col>: error:
/// ..." naming the op for text that does not parse, an op mstep does not
/// import (custom_call included), a dynamic shape or a malformed op.
StableHloFunction import_stablehlo(const std::string& path);

}  // namespace mstep
