// Backend registry: factories registered at static-init time, instances
// created on first use.
#include <array>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/runtime/Backend.h"

namespace mstep {

namespace {
constexpr int kNumDeviceTypes = 5;
struct Slot {
  BackendRegistry::Factory factory = nullptr;
  std::unique_ptr<Backend> instance;
};
std::array<Slot, kNumDeviceTypes>& slots() {
  static std::array<Slot, kNumDeviceTypes> s;
  return s;
}
}  // namespace

void BackendRegistry::register_backend(DeviceType type, Factory factory) {
  slots()[static_cast<int>(type)].factory = factory;
}

absl::StatusOr<Backend*> BackendRegistry::get(DeviceType type) {
  Slot& slot = slots()[static_cast<int>(type)];
  if (!slot.instance) {
    if (!slot.factory) {
      std::vector<std::string> names;
      for (DeviceType t : available()) names.emplace_back(device_type_name(t));
      return absl::UnavailableError(absl::StrCat(
          "no backend for device '", device_type_name(type),
          "' is built into this library; available: ",
          absl::StrJoin(names, ", ")));
    }
    slot.instance = slot.factory();
  }
  return slot.instance.get();
}

std::vector<DeviceType> BackendRegistry::available() {
  std::vector<DeviceType> out;
  for (int i = 0; i < kNumDeviceTypes; ++i)
    if (slots()[i].factory) out.push_back(static_cast<DeviceType>(i));
  return out;
}

}  // namespace mstep
