// Turns async_host's device graphs (its model of CUDA Graphs, see
// AsyncHostBackend.h) on for a scope: Graph then records captured steps
// into one device graph there.
#pragma once

#include "lib/backends/async_host/AsyncHostBackend.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Backend.h"

namespace mstep::testing {

inline void record_async_host_graphs(bool on) {
  Backend* backend = value_or_throw(BackendRegistry::get(DeviceType::async_host));
  static_cast<async_host::AsyncHostBackend*>(backend)->set_records_graphs(on);
}

}  // namespace mstep::testing
