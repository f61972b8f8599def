// Calling a user-registered op (registration: mstep/runtime/CustomOp.h).
#pragma once

#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "mstep/api/Tensor.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

/// Records a call of the custom op `name` on `inputs` with `attrs` (each
/// attribute the op declares, exactly once) and returns its results, lazy
/// like every op. Checked at the call: the op is registered, the attributes
/// match its declaration, its shape rule accepts the inputs' types, and no
/// input needs a gradient (custom ops have no backward yet). Each failure
/// throws mstep::Error naming the op and the inputs' types. The kernel is
/// picked when the graph compiles: the one registered for the tensors'
/// backend.
std::vector<Tensor> custom_op(absl::string_view name, absl::Span<const Tensor> inputs,
                              const CustomAttrs& attrs = {});

} // namespace mstep
