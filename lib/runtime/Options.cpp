// Reads mstep's environment variables, once.
#include "mstep/runtime/Options.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "mstep/runtime/Backend.h"

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
  if (const char* n = std::getenv("MSTEP_MAX_GRAPHS")) {
    int v = 0;
    if (absl::SimpleAtoi(n, &v) && v > 0) {
      o.max_graphs = v;
    } else {
      std::fprintf(stderr, "mstep warning: MSTEP_MAX_GRAPHS=%s is not a positive integer; using %d\n",
                   n, o.max_graphs);
    }
  }
  if (const char* c = std::getenv("MSTEP_CACHE")) o.disk_cache = c;
  o.log_cache = env_flag("MSTEP_LOG_CACHE");
  o.log_fallback = env_flag("MSTEP_LOG_FALLBACK");
  if (const char* t = std::getenv("MSTEP_TRACE")) o.trace_file = t;
  if (const char* g = std::getenv("MSTEP_NAN_GUARD")) o.nan_guard_dir = g;
  if (const char* d = std::getenv("MSTEP_CPU_DISABLE")) o.cpu_disable = d;
  if (const char* p = std::getenv("MSTEP_CPU_PROFILE")) o.cpu_profile = absl::string_view(p) == "1";
  if (const char* d = std::getenv("MSTEP_ASYNC_HOST_DELAY_US")) {
    int64_t v = 0;
    if (absl::SimpleAtoi(d, &v) && v >= 0) {
      o.async_host_delay_us = v;
    } else {
      std::fprintf(stderr,
                   "mstep warning: MSTEP_ASYNC_HOST_DELAY_US=%s is not a non-negative integer; "
                   "using %lld\n",
                   d, static_cast<long long>(o.async_host_delay_us));
    }
  }
  if (const char* r = std::getenv("MSTEP_RANK")) o.dist_rank = r;
  if (const char* w = std::getenv("MSTEP_WORLD_SIZE")) o.dist_world_size = w;
  if (const char* t = std::getenv("MSTEP_DIST_TIMEOUT")) {
    double v = 0;
    if (absl::SimpleAtod(t, &v) && v > 0) {
      o.dist_timeout_s = v;
    } else {
      std::fprintf(stderr, "mstep warning: MSTEP_DIST_TIMEOUT=%s is not a positive number of "
                   "seconds; using %g\n", t, o.dist_timeout_s);
    }
  }
  if (const char* b = std::getenv("MSTEP_DIST_MAX_CALL_BYTES")) {
    int64_t v = 0;
    if (absl::SimpleAtoi(b, &v) && v > 0 && v <= INT32_MAX) {
      o.dist_max_call_bytes = v;
    } else {
      std::fprintf(stderr,
                   "mstep warning: MSTEP_DIST_MAX_CALL_BYTES=%s is not an integer in [1, %d]; "
                   "using %lld\n",
                   b, INT32_MAX, static_cast<long long>(o.dist_max_call_bytes));
    }
  }
  if (const char* r = std::getenv("MSTEP_CUDA_ROW_REDUCTION")) {
    if (absl::string_view(r) == "fused" || absl::string_view(r) == "block" ||
        absl::string_view(r) == "thread") {
      o.cuda_row_reduction = r;
    } else {
      std::fprintf(stderr,
                   "mstep warning: MSTEP_CUDA_ROW_REDUCTION=%s is not 'fused', 'block' or "
                   "'thread'; using '%s'\n",
                   r, o.cuda_row_reduction.c_str());
    }
  }
  if (const char* c = std::getenv("MSTEP_CUDA_COLUMN_REDUCTION")) {
    if (absl::string_view(c) == "split" || absl::string_view(c) == "thread") {
      o.cuda_column_reduction = c;
    } else {
      std::fprintf(stderr,
                   "mstep warning: MSTEP_CUDA_COLUMN_REDUCTION=%s is neither 'split' nor 'thread'; "
                   "using '%s'\n",
                   c, o.cuda_column_reduction.c_str());
    }
  }
  if (const char* c = std::getenv("MSTEP_CUDA_CONV")) {
    if (absl::string_view(c) == "im2col" || absl::string_view(c) == "direct") {
      o.cuda_conv = c;
    } else {
      std::fprintf(stderr,
                   "mstep warning: MSTEP_CUDA_CONV=%s is neither 'im2col' nor 'direct'; "
                   "using '%s'\n",
                   c, o.cuda_conv.c_str());
    }
  }
  if (const char* u = std::getenv("MSTEP_CUDA_OPTIMIZER")) {
    if (absl::string_view(u) == "multi" || absl::string_view(u) == "per_tensor") {
      o.cuda_optimizer = u;
    } else {
      std::fprintf(stderr,
                   "mstep warning: MSTEP_CUDA_OPTIMIZER=%s is neither 'multi' nor 'per_tensor'; "
                   "using '%s'\n",
                   u, o.cuda_optimizer.c_str());
    }
  }
  o.cuda_no_epilogues = env_flag("MSTEP_CUDA_NO_EPILOGUES");
  o.cuda_profile = env_flag("MSTEP_CUDA_PROFILE");
  if (const char* l = std::getenv(kXlaMemoryLimitVariable)) o.xla_memory_limit = l;
  if (const char* dev = std::getenv("MSTEP_DEVICE")) {
    absl::StatusOr<DeviceType> type = BackendRegistry::device_type(dev);
    if (type.ok()) {
      o.default_device = *type;
    } else {
      std::fprintf(stderr, "mstep warning: MSTEP_DEVICE=%s: %s; using 'ref'\n", dev,
                   std::string(type.status().message()).c_str());
    }
  }
  return o;
}

absl::StatusOr<int64_t> parse_xla_memory_limit(absl::string_view text) {
  int64_t bytes = 0;
  if (!absl::SimpleAtoi(text, &bytes) || bytes <= 0)
    return absl::InvalidArgumentError(absl::StrCat(kXlaMemoryLimitVariable, "='", text,
                                                   "' is not a number of bytes above 0"));
  return bytes;
}

}  // namespace mstep
