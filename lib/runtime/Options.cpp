// Reads mstep's environment variables, once.
#include "mstep/runtime/Options.h"

#include <cstdio>
#include <cstdlib>
#include "absl/strings/string_view.h"

namespace mstep {

namespace {
bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && absl::string_view(v) != "0" && absl::string_view(v) != "";
}
}  // namespace

RuntimeOptions RuntimeOptions::from_env() {
  RuntimeOptions o;
  if (const char* dir = std::getenv("MSTEP_DUMP_DIR")) o.dump_dir = dir;
  o.log_recompiles = env_flag("MSTEP_LOG_RECOMPILES");
  if (const char* fuse = std::getenv("MSTEP_FUSE")) o.fuse = absl::string_view(fuse) != "0";
  if (const char* dev = std::getenv("MSTEP_DEVICE")) {
    absl::string_view d(dev);
    if (d == "ref") {
      o.default_device = DeviceType::ref;
    } else {
      std::fprintf(stderr,
                   "mstep warning: MSTEP_DEVICE=%s is not a backend built into "
                   "this library; using 'ref'. Available: ref\n",
                   dev);
    }
  }
  return o;
}

}  // namespace mstep
