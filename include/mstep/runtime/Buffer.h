// Buffer: device memory owned by a backend. Opaque to everything but the
// backend that made it; other layers move data with Backend::copy_in/out.
#pragma once

#include "mstep/core/Device.h"
#include "mstep/core/TensorType.h"

namespace mstep {

class Buffer {
 public:
  Buffer(TensorType type, Device device)
      : type_(std::move(type)), device_(device) {}
  virtual ~Buffer() = default;

  const TensorType& type() const { return type_; }
  Device device() const { return device_; }

 private:
  TensorType type_;
  Device device_;
};

}  // namespace mstep
