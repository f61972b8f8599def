// TensorImpl state transitions.
#include "mstep/runtime/TensorImpl.h"

#include <atomic>

#include "mstep/runtime/Tracer.h"

namespace mstep {

TensorImpl::~TensorImpl() {
  if (live_) Tracer::get().unlink_live(this);
  if (buffer_) buffer_->remove_holder();
}

void TensorImpl::set_pending(Value value) {
  pending_ = std::move(value);
  if (buffer_) {
    buffer_->remove_holder();
    replaced_buffer_ = std::move(buffer_);
  }
  buffer_.reset();
  data_node_.reset();
  if (!live_) Tracer::get().link_live(this);
}

void TensorImpl::set_buffer(BufferPtr buffer) {
  if (live_) Tracer::get().unlink_live(this);
  pending_ = Value{};
  replaced_buffer_.reset();
  // The same buffer holds the same value: keep its data leaf, so that a
  // buffer no tensor shares is one graph input (Tracer::donations).
  if (buffer && buffer == buffer_) return;
  if (buffer_) buffer_->remove_holder();
  buffer_ = std::move(buffer);
  if (buffer_) buffer_->add_holder();
  data_node_.reset();
}

namespace {
std::atomic<uint64_t> g_device_moves{0};
}  // namespace

void TensorImpl::move_to(Device device, BufferPtr buffer) {
  set_buffer(std::move(buffer));
  device_ = device;
  g_device_moves.fetch_add(1, std::memory_order_relaxed);
}

uint64_t TensorImpl::device_moves() { return g_device_moves.load(std::memory_order_relaxed); }

Value TensorImpl::as_operand() {
  if (pending_.node) return pending_;
  if (!data_node_) data_node_ = make_data_leaf(buffer_, type_, input_role_, weak_from_this());
  return Value{data_node_, 0};
}

bool TensorImpl::pending_work_exists() {
  // Tracer bookkeeping, not the data leaf's reference count: only pending
  // work reads a data leaf, and all of it hangs off live pending tensors.
  return Tracer::get().has_pending();
}

}  // namespace mstep
