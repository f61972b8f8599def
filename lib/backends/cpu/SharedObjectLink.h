// The compile half's last step for the fusion JIT: one relocatable object
// linked into a shared object by the system linker, which the runtime
// dlopens (SharedLibrary.h). Library-internal; no MLIR or LLVM headers.
//
// Thread-safety: link_shared_object may run on several threads at once
// (each run has its own temporary directory).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace mstep::cpu {

/// The linker found when mstep was configured (CMAKE_LINKER: GNU ld or a
/// compatible one).
const std::string& system_linker();

/// Links `object` (an ELF relocatable object, position-independent) into
/// a shared object with `linker`, spawned without a shell on files in a
/// private temporary directory that is removed afterwards. Undefined
/// symbols (libm, libc) stay for the loading process to resolve, unless
/// `extra_args` (appended after the object: libraries, "-z defs") say
/// otherwise. A linker that cannot be run or that fails is an error
/// showing its output.
absl::StatusOr<std::string> link_shared_object(absl::string_view object,
                                               const std::string& linker = system_linker(),
                                               const std::vector<std::string>& extra_args = {});

} // namespace mstep::cpu
