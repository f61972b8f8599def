// Filling the disk cache for another device (MSTEP_CACHE=<dir>,,,<backend>;
// DiskCache.h): each graph a process compiles is compiled once more by the
// other backend's compile half, which needs no device, and stored under the
// key the graph has on that device. A machine with the device that runs the
// same program then finds every graph on disk, so even a build without the
// compiler (the GPU check's bundle) runs it lazily or captured, as on a
// machine that compiled for itself. Part of libmstep (it calls the compiler).
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "mstep/core/Device.h"
#include "mstep/ir/TraceGraph.h"
#include "mstep/runtime/CustomOp.h"
#include "mstep/runtime/ModuleCache.h"
#include "mstep/runtime/Options.h"

namespace mstep {

class DiskCache;

/// GraphKey::compile_options for a graph compiled on a device of `type`:
/// what in `options` changes the code that device's backend compiles.
uint64_t compile_options_key(const RuntimeOptions& options, DeviceType type);

/// Checks the cache's `also_for` against the registered backends: the
/// device type it names, or an error saying which names exist.
absl::StatusOr<DeviceType> cross_device_type(absl::string_view backend_name);

/// Compiles `graph` (keyed `key` on its own device) for device 0 of the
/// backend `other` (registered as `other_type`) and stores the stored form
/// in `disk` under the name and key it has there. Errors
/// (the other backend cannot compile an op of the graph) are returned for
/// the caller to report; nothing is stored then.
absl::Status store_for_device(DiskCache& disk, absl::string_view other, DeviceType other_type,
                              const GraphKey& key,
                              const TraceGraph& graph, absl::Span<const CustomOpNeed> custom_ops,
                              const RuntimeOptions& options);

}  // namespace mstep
