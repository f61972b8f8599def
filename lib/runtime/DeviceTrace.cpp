// The device trace sink (RuntimeInternal.h): one atomic pointer, set by the
// Chrome trace in libmstep, read by simulated devices in the runtime.
#include <atomic>

#include "lib/runtime/RuntimeInternal.h"

namespace mstep::internal {

namespace {
std::atomic<DeviceTraceSink*> g_sink{nullptr};
} // namespace

void set_device_trace_sink(DeviceTraceSink* sink) { g_sink.store(sink, std::memory_order_release); }

DeviceTraceSink* device_trace_sink() { return g_sink.load(std::memory_order_acquire); }

} // namespace mstep::internal
