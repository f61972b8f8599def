// TensorImpl state transitions.
#include "mstep/runtime/TensorImpl.h"

#include <atomic>

#include "mstep/runtime/Tracer.h"

namespace mstep {

TensorImpl::~TensorImpl() {
  if (live_) Tracer::get().unlink_live(this);
}

void TensorImpl::set_pending(Value value) {
  pending_ = std::move(value);
  if (buffer_) replaced_buffer_ = std::move(buffer_);
  buffer_.reset();
  data_node_.reset();
  if (!live_) Tracer::get().link_live(this);
}

void TensorImpl::set_buffer(BufferPtr buffer) {
  if (live_) Tracer::get().unlink_live(this);
  pending_ = Value{};
  replaced_buffer_.reset();
  buffer_ = std::move(buffer);
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
  if (!data_node_) {
    data_node_ = make_node(buffer_, type_, input_role_);
    data_node_->set_owner(weak_from_this());
  }
  return Value{data_node_, 0};
}

bool TensorImpl::buffer_has_pending_users() const {
  return data_node_ && data_node_.use_count() > 1;
}

}  // namespace mstep
