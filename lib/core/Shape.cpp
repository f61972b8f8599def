// Shape, TensorType and Device helpers.
#include "mstep/core/Shape.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Device.h"
#include "mstep/core/TensorType.h"

namespace mstep {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

Shape::Dims Shape::strides() const {
  Dims s(dims_.size());
  int64_t acc = 1;
  for (int64_t i = rank() - 1; i >= 0; --i) {
    s[i] = acc;
    acc *= dims_[i];
  }
  return s;
}

std::string Shape::to_string() const {
  return absl::StrCat("[", absl::StrJoin(dims_, ", "), "]");
}

std::string TensorType::to_string() const {
  return absl::StrCat(dtype_name(dtype), shape.to_string());
}

absl::string_view device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::ref: return "ref";
    case DeviceType::cpu: return "cpu";
    case DeviceType::cuda: return "cuda";
    case DeviceType::xla: return "xla";
    case DeviceType::neuron: return "neuron";
    case DeviceType::async_host: return "async_host";
  }
  return "?";
}

std::string Device::to_string() const {
  return absl::StrCat(device_type_name(type), ":", index);
}

}  // namespace mstep
