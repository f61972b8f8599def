// The examples' --device flag: which backend trains the model.
#pragma once

#include <optional>
#include <string>

#include "absl/strings/str_join.h"
#include "mstep/core/Device.h"
#include "mstep/runtime/Backend.h"

namespace mstep::examples {

/// The backends --device accepts: every registered one ("ref, cpu"); the
/// examples default to cpu.
inline std::string device_choices() {
  return absl::StrJoin(BackendRegistry::registered_backends(), ", ");
}

/// The device of a registered backend's name ("cpu", "ref"), else nullopt.
inline std::optional<Device> parse_device(const std::string& name) {
  absl::StatusOr<DeviceType> type = BackendRegistry::device_type(name);
  if (!type.ok()) return std::nullopt;
  return Device{*type, 0};
}

}  // namespace mstep::examples
