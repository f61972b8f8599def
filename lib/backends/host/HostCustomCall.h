// A custom-op node bound to the host kernel one host-memory backend (ref,
// cpu) registered for it: looked up once when the backend compiles the
// node, then called with host pointers on every run.
#pragma once

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep::host {

class HostCustomCall {
public:
  /// The host kernel `backend` registered for the custom op of `node`, whose
  /// operand types are `input_types`. FailedPrecondition naming the op and
  /// the backend when there is none, or when the kernel registered for it
  /// is not a host kernel.
  static absl::StatusOr<HostCustomCall>
  bind(const GraphNode& node, std::vector<TensorType> input_types, absl::string_view backend);
  /// Whether the custom op of `node` has a host kernel for `backend`.
  static bool has_kernel(const GraphNode& node, absl::string_view backend);

  /// Runs the kernel on `inputs` (one per operand) into `outputs` (one per
  /// result, sized by the result types). Thread-safe if the kernel is.
  absl::Status run(absl::Span<const void* const> inputs, absl::Span<void* const> outputs) const;

  const CustomOp& op() const { return *op_; }

private:
  std::shared_ptr<const CustomOp> op_;
  const HostCustomKernel* kernel_ = nullptr; // owned by op_
  AttrList attrs_;                           // the node's
  std::vector<TensorType> input_types_, output_types_;
};

} // namespace mstep::host
