// The examples' --device flag: which backend trains the model.
#pragma once

#include <optional>
#include <string>

#include "mstep/core/Device.h"

namespace mstep::examples {

/// The backends the examples accept; the default is cpu.
inline constexpr const char* kDeviceChoices = "cpu or ref";

/// "cpu" or "ref", else nullopt.
inline std::optional<Device> parse_device(const std::string& name) {
  if (name == "cpu") return Device{DeviceType::cpu, 0};
  if (name == "ref") return Device{DeviceType::ref, 0};
  return std::nullopt;
}

}  // namespace mstep::examples
