// TensorImpl: the state behind an mstep::Tensor handle. A tensor is either
// pending (a result of a trace node not yet executed) or materialized (a
// backend buffer). The tracer keeps pending tensors on an intrusive list so
// mark_step() can find every live one without a hash set.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "mstep/core/Device.h"
#include "mstep/core/FreeListPool.h"
#include "mstep/core/TensorType.h"
#include "mstep/ir/Node.h"
#include "mstep/runtime/Backend.h"
#include "mstep/runtime/TraceNode.h"

namespace mstep {

/// Autograd state attached to a tensor (defined by lib/api/autograd; the
/// runtime only owns it).
struct AutogradMetaBase {
  virtual ~AutogradMetaBase() = default;
};

class TensorImpl : public std::enable_shared_from_this<TensorImpl> {
 public:
  TensorImpl(TensorType type, Device device)
      : type_(std::move(type)), device_(device) {}
  ~TensorImpl();
  /// Allocates from the tracer's free-list pool (one per traced op).
  static std::shared_ptr<TensorImpl> make(TensorType type, Device device) {
    return std::allocate_shared<TensorImpl>(PoolAllocator<TensorImpl>(), std::move(type),
                                            device);
  }
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;

  const TensorType& type() const { return type_; }
  Device device() const { return device_; }

  bool is_pending() const { return pending_.node != nullptr; }
  const Value& pending() const { return pending_; }
  const BufferPtr& buffer() const { return buffer_; }
  /// The bytes of the fields Graph::replay() reads and writes of every
  /// bound tensor (its buffer, pending value, data leaf and handle count),
  /// for prefetching them.
  const char* replay_fields_begin() const { return reinterpret_cast<const char*>(&buffer_); }
  const char* replay_fields_end() const { return reinterpret_cast<const char*>(&handles_ + 1); }

  /// User handles: the mstep::Tensor objects (and so the C API's tensor
  /// handles) that refer to this tensor, counted by mstep::Tensor itself
  /// (a copy adds one, a destruction drops one, a move changes nothing).
  /// The runtime's own references are not handles: a captured graph's
  /// bindings, the tracer's RNG state, a leaf's autograd accumulator. A
  /// tensor with no handle can no longer be read or written by anyone: a
  /// replay frees what it would write there, and refuses to read it. The
  /// runtime decides from this bookkeeping, never from reference counts.
  ///
  /// Handles may be copied and destroyed on any thread (a data loader's),
  /// so the count is atomic. Adding is relaxed: a new handle is made from
  /// a live one, so the count cannot reach zero meanwhile. Dropping
  /// releases and has_handles() acquires, so whatever a thread did with
  /// the tensor before dropping its last handle happens before the tracing
  /// thread acts on "no handle left" (on x86 this costs nothing more).
  void add_handle() { handles_.fetch_add(1, std::memory_order_relaxed); }
  void drop_handle() { handles_.fetch_sub(1, std::memory_order_release); }
  bool has_handles() const { return handles_.load(std::memory_order_acquire) != 0; }

  /// Makes this tensor the pending result `value`, dropping any buffer.
  /// Registers it with the tracer's live list.
  void set_pending(Value value);
  /// Makes this tensor materialized with `buffer`, dropping the node. The
  /// tensor claims the buffer (Buffer::add_holder): a buffer another tensor
  /// holds becomes shared. set_pending() and the destructor release it.
  void set_buffer(BufferPtr buffer);
  /// Moves this materialized tensor to `device`, whose `buffer` holds its
  /// value (Module::to moves parameters in place so that every handle,
  /// an optimizer's included, follows). Ops recorded before keep reading
  /// the old buffer.
  void move_to(Device device, BufferPtr buffer);
  /// How many move_to() calls this process made: a Graph checks its
  /// tensors' devices again only when it changed since its last check.
  static uint64_t device_moves();

  /// The value to use when this tensor is an operand of a new op: the
  /// pending node, or a `data` leaf for the buffer (created once, reused,
  /// so every use in a graph refers to one graph input).
  Value as_operand();

  /// Whether pending work may still read the current buffer through its
  /// data leaf (in-place writes must then copy first). Conservative: true
  /// while the leaf exists and any tensor is pending.
  bool buffer_has_pending_users() const { return data_node_ && pending_work_exists(); }
  /// Whether this tensor may overwrite its buffer in place: it is the
  /// buffer's one holder (Buffer::holders(), never shared) and no pending
  /// work reads it. The runtime's bookkeeping decides, not reference counts.
  bool owns_buffer_exclusively() const {
    return buffer_ && buffer_->held_by_one() && !buffer_has_pending_users();
  }

  /// What this tensor's buffer is to the program when it is a graph input
  /// (set by the API: parameters, optimizer state, device scalars).
  InputRole input_role() const { return input_role_; }
  void set_input_role(InputRole role) { input_role_ = role; }

  /// The buffer this tensor held before it became pending again (an
  /// in-place update such as `w.copy_(w - lr * g)`), if it still exists.
  /// The tracer marks the matching graph input as donated to the output.
  BufferPtr replaced_buffer() const { return replaced_buffer_.lock(); }

  /// Autograd state, or null for tensors autograd never touched.
  AutogradMetaBase* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMetaBase> meta) {
    autograd_meta_ = std::move(meta);
  }

 private:
  friend class Tracer;
  static bool pending_work_exists();
  // The state replay() reads of every bound tensor comes first, next to
  // the reference counts, so that a cold tensor costs one or two cache
  // lines rather than three (data_node_: owns_buffer_exclusively();
  // handles_: the input and output checks).
  BufferPtr buffer_;
  Value pending_;
  NodePtr data_node_;
  std::atomic<uint32_t> handles_{0};
  TensorType type_;
  Device device_;
  std::weak_ptr<Buffer> replaced_buffer_;
  InputRole input_role_ = InputRole::input;
  std::unique_ptr<AutogradMetaBase> autograd_meta_;
  // Intrusive links of the tracer's live pending list.
  TensorImpl* live_prev_ = nullptr;
  TensorImpl* live_next_ = nullptr;
  bool live_ = false;
};

using TensorImplPtr = std::shared_ptr<TensorImpl>;

}  // namespace mstep
