// Moving tensors between devices: a copy through the host with the
// backends' copy_out / copy_in (device memory is opaque to everything but
// its backend). Library-internal; the public forms are Tensor::to(Device)
// and nn::Module::to(Device).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "mstep/api/Tensor.h"

namespace mstep::detail {

/// Moves each tensor not yet on `device` there in place (TensorImpl::
/// move_to): every handle to it follows, and so does its .grad. Pending
/// tensors are computed first (one sync point per source device). All
/// copies are made before any tensor changes, so a failed move changes
/// nothing. Throws, naming `api`, the tensor and both devices, inside a
/// Graph capture or when no backend drives `device`. Names label errors
/// ("fc1.weight").
void move_in_place(absl::string_view api,
                   const std::vector<std::pair<std::string, Tensor>>& tensors, Device device);

}  // namespace mstep::detail
