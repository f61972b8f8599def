// Library-internal helpers shared by the module and optimizer loaders.
#pragma once

#include "absl/strings/string_view.h"
#include "mstep/api/Checkpoint.h"

namespace mstep::checkpoint {

/// Throws one mstep::Error: "mstep::<op>: <problem> (N problems):" then
/// every line of the report, then how to load non-strictly.
[[noreturn]] void throw_load_error(absl::string_view op, absl::string_view problem,
                                   const LoadReport& report);

}  // namespace mstep::checkpoint
