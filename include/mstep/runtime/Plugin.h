// Plugins: shared libraries that register custom ops (runtime/CustomOp.h),
// so that a process which did not compile them in can run and verify
// graphs that call them: `mstep-run --plugin libmyops.so step.mstep`
// replays an exported step, `mstep-opt --load-plugin libmyops.so` parses
// and verifies modules with their `mstep.custom` ops.
//
// A plugin exports one C function, which registers its ops and reports
// failure as a message:
//
//   absl::Status register_my_ops() {
//     return mstep::CustomOpRegistry::global().add({.name = "my_op", ...});
//   }
//   MSTEP_PLUGIN(register_my_ops)   // defines mstep_plugin_init
//
// An exported function rather than static initializers: a registration
// that fails (another schema under a registered name and version) comes
// back as an error naming the plugin instead of an exception escaping a
// static initializer (std::terminate), and a library that is not a
// plugin is refused, not silently loaded. The library needs only
// libmstep_runtime (mstep-run has nothing else).
#pragma once

#include <cstddef>
#include <cstdio>
#include <exception>
#include <string>

#include "absl/status/status.h"

namespace mstep {

/// The C function every plugin exports (MSTEP_PLUGIN defines it): registers
/// the plugin's custom ops; returns 0, or nonzero after writing a
/// NUL-terminated message of at most `error_size` bytes to `error`. It may
/// run more than once in a process (the library loaded twice), so it must
/// be idempotent, which registering an equal schema again is.
using PluginInitFn = int (*)(char* error, size_t error_size);
inline constexpr char kPluginInitSymbol[] = "mstep_plugin_init";

/// Loads the shared library `path` (dlopen with RTLD_NOW | RTLD_LOCAL; a
/// path without '/' that names a file here is loaded from here, any other
/// from the dynamic linker's search path) and calls its mstep_plugin_init.
/// The library stays loaded for the life of the process (its kernels are
/// registered). Loading a library again runs its init again: fine for
/// idempotent registration. FailedPrecondition naming the path and the
/// reason: dlopen's dlerror(), no mstep_plugin_init exported, or the
/// init's message. Thread-safe.
absl::Status load_plugin(const std::string& path);

namespace internal {
/// The body of MSTEP_PLUGIN's mstep_plugin_init.
inline int run_plugin_init(absl::Status (*init)(), char* error, size_t error_size) {
  absl::Status status;
  try {
    status = init();
  } catch (const std::exception& e) {
    status = absl::InternalError(e.what());
  }
  if (status.ok()) return 0;
  if (error != nullptr && error_size > 0)
    std::snprintf(error, error_size, "%s", std::string(status.message()).c_str());
  return 1;
}
} // namespace internal

} // namespace mstep

/// Defines the plugin entry point mstep_plugin_init from `init`, an
/// `absl::Status()` function that registers the plugin's custom ops (an
/// mstep::Error it throws is reported like a returned error).
#define MSTEP_PLUGIN(init)                                                                       \
  extern "C" __attribute__((visibility("default"))) int mstep_plugin_init(char* error,           \
                                                                          size_t error_size) {   \
    return ::mstep::internal::run_plugin_init(init, error, error_size);                          \
  }
