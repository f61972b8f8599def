// Buffer: device memory owned by a backend. Opaque to everything but the
// backend that made it; other layers move data with Backend::copy_in/out.
// Its contents may still be in the making (Executable::run returns before
// the work is done): copy_out waits for them, nothing else may read them.
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
