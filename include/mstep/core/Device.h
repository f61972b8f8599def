// Device: which backend owns a tensor's memory.
#pragma once

#include <string>
#include "absl/strings/string_view.h"

namespace mstep {

/// The kinds of device a backend can drive. Backends exist for `ref` and `cpu`;
/// `cuda`, `xla` and `neuron` are reserved for planned ones (docs/architecture.md).
/// `async_host` is the conformance test backend (lib/backends/async_host):
/// only test binaries link it, so it is registered nowhere else.
enum class DeviceType : uint8_t { ref, cpu, cuda, xla, neuron, async_host };

absl::string_view device_type_name(DeviceType type);

struct Device {
  DeviceType type = DeviceType::ref;
  int index = 0;

  std::string to_string() const;
  friend bool operator==(const Device&, const Device&) = default;
};

}  // namespace mstep
