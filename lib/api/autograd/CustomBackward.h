// The parts of a custom op's backward that the forward call checks
// (lib/api/CustomOps.cpp). Library-internal.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep::autograd {

/// "input 1 ('target')", or "input 1" for an unnamed input.
std::string custom_input_label(const CustomOpSchema& schema, size_t i);

/// For an op whose backward is another custom op (form (b)): that op is
/// registered, takes the forward's inputs and output gradients, declares
/// each of the forward's attributes with its type, and has one output per
/// differentiable input. Else InvalidArgument saying which.
absl::Status check_backward_op(const CustomOp& op);

} // namespace mstep::autograd
