// The structs behind the C API's opaque handles, and the one way every C
// function runs: capi::guard() turns C++ exceptions into mstep_status values
// so that nothing throws or aborts across the C boundary.
//
// Released handles are not freed at once: they are marked released, their
// payload (tensor, graph, ...) is dropped, and the shell waits in a bounded
// quarantine. A use after release is then a clean FAILED_PRECONDITION
// instead of undefined behaviour, for the most recent kQuarantineSize
// releases (older shells are freed; a stale pointer to one is undetectable).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mstep-c/mstep.h"
#include "mstep/api/Tensor.h"
#include "mstep/core/Device.h"
#include "mstep/core/TensorType.h"

struct mstep_status {
  mstep_status_code code;
  std::string message;
};

namespace mstep::capi {

/// Tags in each handle's first word: the kind it was made as, or released.
enum class HandleKind : uint32_t {
  context = 0x6d730001,
  tensor = 0x6d730002,
  builder = 0x6d730003,
  compiled = 0x6d730004,
  captured = 0x6d730005,
  optimizer = 0x6d730006,
  released = 0x6d73dead,
};

const char* handle_kind_name(HandleKind kind);

struct HandleBase {
  explicit HandleBase(HandleKind k) : kind(k) {}
  virtual ~HandleBase() = default;
  /// Drops what the handle holds (called when it is released).
  virtual void drop_payload() = 0;
  HandleKind kind;
};

inline constexpr size_t kQuarantineSize = 4096;

/// Marks `handle` released, drops its payload and quarantines its shell.
void retire(HandleBase* handle);

/// An error raised by the C API layer itself (null handle, bad argument).
struct CapiError {
  mstep_status_code code;
  std::string message;
};
[[noreturn]] void fail(mstep_status_code code, std::string message);

/// Throws unless `handle` is a live handle of `kind`; `what` names the
/// argument in the message ("tensor", "inputs[2]").
void check_handle(const HandleBase* handle, HandleKind kind, const char* what);

/// Runs `body`, returning null on success or the status of what it threw,
/// prefixed with `function`. Never throws.
mstep_status* run_guarded(const char* function, void (*body)(void*), void* closure) noexcept;
template <typename F>
mstep_status* guard(const char* function, F&& f) noexcept {
  return run_guarded(
      function, [](void* c) { (*static_cast<std::remove_reference_t<F>*>(c))(); }, &f);
}

/// The C dtype as an mstep DType; throws on a value outside the enum.
DType to_dtype(mstep_dtype dtype, const char* what);
mstep_dtype to_c_dtype(DType dtype);
/// `rank` dims from `shape`: rank <= MSTEP_MAX_RANK, non-null when rank > 0,
/// every dim >= 0.
Shape to_shape(const int64_t* shape, size_t rank, const char* what);
/// Writes a type's dtype and dims to the out-parameters of the C API.
void write_type(const TensorType& type, mstep_dtype* out_dtype, int64_t* dims, size_t capacity,
                size_t* out_rank);
/// Throws INVALID_ARGUMENT naming `what` when `p` is null.
void require_out(const void* p, const char* what);

}  // namespace mstep::capi

struct mstep_device {
  mstep::Device device;
  std::string name;  // "cpu:0"
};

struct mstep_context : mstep::capi::HandleBase {
  mstep_context() : HandleBase(mstep::capi::HandleKind::context) {}
  void drop_payload() override { devices.clear(); }
  /// The device handle for `device`, made on first use.
  mstep_device* device_handle(mstep::Device device);
  std::vector<std::unique_ptr<mstep_device>> devices;
  /// Tensors, builders, graphs and optimizers made through this context
  /// and not released yet.
  std::atomic<int64_t> live_handles{0};
};

namespace mstep::capi {
struct BuilderState;
}

struct mstep_tensor : mstep::capi::HandleBase {
  mstep_tensor(mstep_context* c, mstep::Tensor t)
      : HandleBase(mstep::capi::HandleKind::tensor), context(c), tensor(std::move(t)) {}
  void drop_payload() override;
  mstep_context* context;
  mstep::Tensor tensor;
  std::atomic<int32_t> references{1};
  /// Set for placeholders and op results of a graph builder: the builder's
  /// tape and this tensor's value there. Such tensors hold no data.
  std::shared_ptr<mstep::capi::BuilderState> builder;
  int32_t value_id = -1;
};

namespace mstep::capi {

/// A new tensor handle (one reference) counted against `context`.
mstep_tensor* new_tensor(mstep_context* context, Tensor tensor);
/// Checks `handles[0..count)` (null entries allowed when `allow_null`) and
/// returns their tensors (undefined for null).
std::vector<Tensor> tensors_of(mstep_tensor* const* handles, size_t count, const char* what,
                               bool allow_null);
/// Writes new handles for `tensors` to `outputs` (after a capacity check).
void write_outputs(mstep_context* context, const std::vector<Tensor>& tensors,
                   mstep_tensor** outputs, size_t capacity);
/// One handle made through `context` was released.
void count_released(mstep_context* context);

/// The body of the *_release functions of handles with one owner: checks
/// `handle`, retires it and takes it off its context's count.
template <typename Handle>
void release_owned(Handle* handle, HandleKind kind, const char* what) {
  check_handle(handle, kind, what);
  mstep_context* context = handle->context;
  retire(handle);
  count_released(context);
}

}  // namespace mstep::capi
