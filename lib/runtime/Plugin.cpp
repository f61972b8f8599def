// load_plugin (see include/mstep/runtime/Plugin.h): dlopen, then the
// library's mstep_plugin_init.
#include "mstep/runtime/Plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <mutex>

#include "absl/strings/str_cat.h"

namespace mstep {

absl::Status load_plugin(const std::string& path) {
  // dlopen searches the library path for a name without '/'; a user who
  // writes `--plugin libmyops.so` next to the file means that file.
  std::string file = path;
  struct stat st;
  if (path.find('/') == std::string::npos && ::stat(path.c_str(), &st) == 0) file = "./" + path;
  // dlerror() is process-wide state: one load at a time.
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  void* library = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = ::dlerror();
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot load plugin ", path, ": ", reason ? reason : "dlopen failed",
        " (a plugin is a shared library that registers custom ops)"));
  }
  // Never dlclose'd: the registry holds its kernels and shape rules.
  auto init = reinterpret_cast<PluginInitFn>(::dlsym(library, kPluginInitSymbol));
  if (init == nullptr)
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not an mstep plugin: it exports no ", kPluginInitSymbol,
        " (define it with MSTEP_PLUGIN(fn) from mstep/runtime/Plugin.h)"));
  char error[1024] = {};
  if (init(error, sizeof error) != 0)
    return absl::FailedPreconditionError(absl::StrCat("plugin ", path,
                                                      " failed to register its custom ops: ",
                                                      error[0] ? error : "no message"));
  return absl::OkStatus();
}

} // namespace mstep
