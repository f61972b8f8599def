// Library-internal runtime hooks: the mutable metrics and warning output.
#pragma once

#include "absl/strings/string_view.h"

#include "mstep/runtime/Metrics.h"

namespace mstep::internal {

Metrics& mutable_metrics();
/// Sends `message` to the warning handler (stderr by default).
void emit_warning(absl::string_view message);

}  // namespace mstep::internal
