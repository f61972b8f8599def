// Buffer: device memory owned by a backend. Opaque to everything but the
// backend that made it; other layers move data with Backend::copy_in/out.
// Its contents may still be in the making (Executable::run returns before
// the work is done): copy_out waits for them, nothing else may read them.
#pragma once

#include <cstdint>

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

  /// Which tensors hold this buffer, as the runtime's own bookkeeping
  /// records it (the donation protocol, see Executable::run). Pointer
  /// copies do not count: a tensor claims the buffer when it is bound to
  /// it and releases it when it moves on. A second claim makes the buffer
  /// shared for good, so an alias (detach(), a copy_() snapshot, a result
  /// bound to two tensors) keeps its values even after the other holder
  /// is gone; the next out-of-place update gives the tensor a fresh,
  /// exclusive buffer. Not thread-safe: tensors belong to the tracing
  /// thread.
  enum class Holders : uint8_t { none, one, shared };
  Holders holders() const { return holders_; }
  /// Whether exactly one tensor holds the buffer and it was never shared.
  bool held_by_one() const { return holders_ == Holders::one; }
  void add_holder() { holders_ = holders_ == Holders::none ? Holders::one : Holders::shared; }
  void remove_holder() {
    if (holders_ == Holders::one) holders_ = Holders::none;
  }

 private:
  // First: replay reads it for every bound tensor, next to the counts.
  Holders holders_ = Holders::none;
  TensorType type_;
  Device device_;
};

}  // namespace mstep
