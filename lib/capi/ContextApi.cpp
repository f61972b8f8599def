// C API: contexts, devices, runtime options, the RNG seed, mark_step and the
// grad mode.
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "lib/capi/Handles.h"
#include "lib/runtime/DiskCache.h"
#include "lib/runtime/RuntimeInternal.h"
#include "mstep/api/Autograd.h"
#include "mstep/api/NanGuard.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/Metrics.h"
#include "mstep/runtime/Runtime.h"
#include "mstep/runtime/Tracer.h"

using namespace mstep;
using namespace mstep::capi;

namespace {

constexpr const char* kOptionKeys =
    "device, cache, max_graphs, log_recompiles, log_cache, log_fallback, fuse, dump_dir, "
    "trace, nan_guard, cpu_disable, cpu_profile, xla_memory_limit";

/// "cpu", "ref", "cpu:0": any registered backend's name, index 0.
Device parse_device(const std::string& name) {
  std::vector<std::string> parts = absl::StrSplit(name, ':');
  absl::StatusOr<DeviceType> type = BackendRegistry::device_type(parts[0]);
  int index = 0;
  bool index_ok = parts.size() == 1 ||
                  (parts.size() == 2 && absl::SimpleAtoi(parts[1], &index) && index == 0);
  if (!type.ok() || !index_ok)
    fail(MSTEP_NOT_FOUND,
         absl::StrCat("no device '", name, "'; available: ",
                      absl::StrJoin(BackendRegistry::registered_backends(), ", "), " (index 0)"));
  return Device{*type, index};
}

bool parse_flag(const char* key, const std::string& value) {
  if (value == "1" || value == "true") return true;
  if (value == "0" || value == "false") return false;
  fail(MSTEP_INVALID_ARGUMENT,
       absl::StrCat("option '", key, "' takes \"0\" or \"1\", got \"", value, "\""));
}

void check_context(const mstep_context* context) {
  check_handle(context, HandleKind::context, "context");
}

void set_option(const std::string& key, const std::string& value) {
  Tracer& tracer = Tracer::get();
  RuntimeOptions& o = tracer.mutable_options();
  if (key == "device") {
    set_default_device(parse_device(value));
  } else if (key == "cache") {
    if (!value.empty()) {
      auto config = DiskCache::Config::parse(value);
      if (!config.ok())
        fail(MSTEP_INVALID_ARGUMENT, absl::StrCat("option 'cache': ", config.status().message()));
    }
    o.disk_cache = value;
    tracer.reset_disk_cache();
  } else if (key == "max_graphs") {
    int n = 0;
    if (!absl::SimpleAtoi(value, &n) || n < 1)
      fail(MSTEP_INVALID_ARGUMENT,
           absl::StrCat("option 'max_graphs' takes a positive integer, got \"", value, "\""));
    o.max_graphs = n;
    tracer.cache().set_max_entries(static_cast<size_t>(n));
  } else if (key == "log_recompiles") {
    o.log_recompiles = parse_flag("log_recompiles", value);
  } else if (key == "log_cache") {
    o.log_cache = parse_flag("log_cache", value);
    tracer.reset_disk_cache();
  } else if (key == "log_fallback") {
    o.log_fallback = parse_flag("log_fallback", value);
    internal::set_log_fallback(o.log_fallback);
  } else if (key == "fuse") {
    o.fuse = parse_flag("fuse", value);
  } else if (key == "dump_dir") {
    o.dump_dir = value;
  } else if (key == "trace") {
    o.trace_file = value;
    set_trace_file(value);
  } else if (key == "nan_guard") {
    enable_nan_guard(value);
  } else if (key == "cpu_disable") {
    o.cpu_disable = value;
  } else if (key == "xla_memory_limit") {
    if (!value.empty())
      if (absl::StatusOr<int64_t> bytes = parse_xla_memory_limit(value); !bytes.ok())
        fail(MSTEP_INVALID_ARGUMENT,
             absl::StrCat("option 'xla_memory_limit': ", bytes.status().message()));
    o.xla_memory_limit = value;
  } else if (key == "cpu_profile") {
    o.cpu_profile = parse_flag("cpu_profile", value);
  } else {
    fail(MSTEP_NOT_FOUND, absl::StrCat("unknown option '", key, "'; the options are ", kOptionKeys));
  }
}

}  // namespace

extern "C" {

mstep_status* mstep_context_create(mstep_context** out_context) {
  return guard(__func__, [&] {
    require_out(out_context, "out_context");
    Tracer::get();  // reads the environment once
    *out_context = new mstep_context();
  });
}

mstep_status* mstep_context_release(mstep_context* context) {
  if (context == nullptr) return nullptr;
  return guard(__func__, [&] {
    check_context(context);
    if (const int64_t live = context->live_handles.load(); live > 0)
      fail(MSTEP_FAILED_PRECONDITION,
           absl::StrCat(live, " handle(s) made through this context are still alive; release "
                              "every tensor, builder, graph and optimizer first"));
    retire(context);
  });
}

mstep_status* mstep_context_set_option(mstep_context* context, const char* key,
                                       const char* value) {
  return guard(__func__, [&] {
    check_context(context);
    require_out(key, "key");
    require_out(value, "value");
    set_option(key, value);
  });
}

mstep_status* mstep_context_manual_seed(mstep_context* context, uint64_t seed) {
  return guard(__func__, [&] {
    check_context(context);
    manual_seed(seed);
  });
}

mstep_status* mstep_context_device(mstep_context* context, const char* name,
                                   mstep_device** out_device) {
  return guard(__func__, [&] {
    check_context(context);
    require_out(name, "name");
    require_out(out_device, "out_device");
    *out_device = context->device_handle(parse_device(name));
  });
}

mstep_status* mstep_context_default_device(mstep_context* context, mstep_device** out_device) {
  return guard(__func__, [&] {
    check_context(context);
    require_out(out_device, "out_device");
    *out_device = context->device_handle(default_device());
  });
}

const char* mstep_device_name(const mstep_device* device) {
  return device ? device->name.c_str() : "";
}

mstep_status* mstep_context_mark_step(mstep_context* context) {
  return guard(__func__, [&] {
    check_context(context);
    mark_step();
  });
}

mstep_status* mstep_context_set_grad_enabled(mstep_context* context, int enabled) {
  return guard(__func__, [&] {
    check_context(context);
    set_grad_enabled(enabled != 0);
  });
}

}  // extern "C"
