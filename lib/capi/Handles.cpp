// Statuses, the handle quarantine, the exception guard and argument checks
// shared by every C API function.
#include "lib/capi/Handles.h"

#include <deque>
#include <mutex>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/Graph.h"

namespace mstep::capi {

namespace {

// Returned when not even a status can be allocated; never freed.
mstep_status out_of_memory_status{MSTEP_RESOURCE_EXHAUSTED, "mstep: out of memory"};

mstep_status* make_status(mstep_status_code code, std::string message) noexcept {
  try {
    return new mstep_status{code, std::move(message)};
  } catch (...) {
    return &out_of_memory_status;
  }
}

mstep_status_code from_absl(absl::StatusCode code) {
  switch (code) {
  case absl::StatusCode::kOk:
    return MSTEP_OK;
  case absl::StatusCode::kInvalidArgument:
    return MSTEP_INVALID_ARGUMENT;
  case absl::StatusCode::kNotFound:
    return MSTEP_NOT_FOUND;
  case absl::StatusCode::kFailedPrecondition:
  case absl::StatusCode::kAborted:
    return MSTEP_FAILED_PRECONDITION;
  case absl::StatusCode::kOutOfRange:
    return MSTEP_OUT_OF_RANGE;
  case absl::StatusCode::kUnimplemented:
    return MSTEP_UNIMPLEMENTED;
  case absl::StatusCode::kDataLoss:
    return MSTEP_DATA_LOSS;
  case absl::StatusCode::kResourceExhausted:
    return MSTEP_RESOURCE_EXHAUSTED;
  default:
    return MSTEP_INTERNAL;
  }
}

mstep_status_code from_replay_error(ReplayError::Kind kind) {
  switch (kind) {
  case ReplayError::Kind::not_captured:
  case ReplayError::Kind::capture_active:
  case ReplayError::Kind::input_freed:
    return MSTEP_FAILED_PRECONDITION;
  default:
    return MSTEP_INVALID_ARGUMENT;
  }
}

struct Quarantine {
  std::mutex mu;
  std::deque<std::unique_ptr<HandleBase>> shells;
};

Quarantine& quarantine() {
  static Quarantine* q = new Quarantine();  // shells may be retired during exit
  return *q;
}

}  // namespace

const char* handle_kind_name(HandleKind kind) {
  switch (kind) {
  case HandleKind::context:
    return "mstep_context";
  case HandleKind::tensor:
    return "mstep_tensor";
  case HandleKind::builder:
    return "mstep_graph_builder";
  case HandleKind::compiled:
    return "mstep_compiled_graph";
  case HandleKind::captured:
    return "mstep_captured_graph";
  case HandleKind::optimizer:
    return "mstep_optimizer";
  case HandleKind::released:
    return "released handle";
  }
  return "unknown handle";
}

void retire(HandleBase* handle) {
  handle->kind = HandleKind::released;
  handle->drop_payload();
  std::unique_ptr<HandleBase> oldest;
  Quarantine& q = quarantine();
  std::lock_guard<std::mutex> lock(q.mu);
  q.shells.emplace_back(handle);
  if (q.shells.size() > kQuarantineSize) {
    oldest = std::move(q.shells.front());
    q.shells.pop_front();
  }
}

void fail(mstep_status_code code, std::string message) { throw CapiError{code, std::move(message)}; }

void check_handle(const HandleBase* handle, HandleKind kind, const char* what) {
  if (handle == nullptr)
    fail(MSTEP_INVALID_ARGUMENT, absl::StrCat(what, " is NULL; pass a live ",
                                              handle_kind_name(kind)));
  if (handle->kind == HandleKind::released)
    fail(MSTEP_FAILED_PRECONDITION,
         absl::StrCat(what, " was already released (use after release); keep a reference "
                            "until the last use"));
  if (handle->kind != kind)
    fail(MSTEP_INVALID_ARGUMENT, absl::StrCat(what, " is a ", handle_kind_name(handle->kind),
                                              ", not a ", handle_kind_name(kind)));
}

mstep_status* run_guarded(const char* function, void (*body)(void*), void* closure) noexcept {
  try {
    body(closure);
    return nullptr;
  } catch (const CapiError& e) {
    return make_status(e.code, absl::StrCat(function, ": ", e.message));
  } catch (const ReplayError& e) {
    return make_status(from_replay_error(e.kind()), absl::StrCat(function, ": ", e.what()));
  } catch (const Error& e) {
    return make_status(from_absl(e.code()), absl::StrCat(function, ": ", e.what()));
  } catch (const std::bad_alloc&) {
    return make_status(MSTEP_RESOURCE_EXHAUSTED, absl::StrCat(function, ": out of memory"));
  } catch (const std::exception& e) {
    return make_status(MSTEP_INTERNAL,
                       absl::StrCat(function, ": internal error (please report): ", e.what()));
  } catch (...) {
    return make_status(MSTEP_INTERNAL, absl::StrCat(function, ": unknown internal error"));
  }
}

DType to_dtype(mstep_dtype dtype, const char* what) {
  const int v = static_cast<int>(dtype);
  if (v < 0 || v >= kNumDTypes)
    fail(MSTEP_INVALID_ARGUMENT,
         absl::StrCat(what, " is ", v, ", not an mstep_dtype (MSTEP_F32 .. MSTEP_BOOL)"));
  return static_cast<DType>(v);
}

mstep_dtype to_c_dtype(DType dtype) { return static_cast<mstep_dtype>(dtype); }

Shape to_shape(const int64_t* shape, size_t rank, const char* what) {
  if (rank > MSTEP_MAX_RANK)
    fail(MSTEP_INVALID_ARGUMENT,
         absl::StrCat(what, " has rank ", rank, "; the C API takes at most ", MSTEP_MAX_RANK));
  if (rank > 0 && shape == nullptr)
    fail(MSTEP_INVALID_ARGUMENT, absl::StrCat(what, " is NULL but rank is ", rank));
  Shape::Dims dims;
  for (size_t i = 0; i < rank; ++i) {
    if (shape[i] < 0)
      fail(MSTEP_INVALID_ARGUMENT,
           absl::StrCat(what, "[", i, "] is ", shape[i], "; every dim must be >= 0"));
    dims.push_back(shape[i]);
  }
  return Shape(dims);
}

void write_type(const TensorType& type, mstep_dtype* out_dtype, int64_t* dims, size_t capacity,
                size_t* out_rank) {
  if (capacity > 0) require_out(dims, "dims (capacity > 0)");
  if (out_dtype) *out_dtype = to_c_dtype(type.dtype);
  const size_t rank = static_cast<size_t>(type.shape.rank());
  for (size_t i = 0; i < rank && i < capacity; ++i) dims[i] = type.shape[i];
  if (out_rank) *out_rank = rank;
}

void require_out(const void* p, const char* what) {
  if (p == nullptr) fail(MSTEP_INVALID_ARGUMENT, absl::StrCat(what, " is NULL"));
}

mstep_tensor* new_tensor(mstep_context* context, Tensor tensor) {
  auto* handle = new mstep_tensor(context, std::move(tensor));
  ++context->live_handles;
  return handle;
}

std::vector<Tensor> tensors_of(mstep_tensor* const* handles, size_t count, const char* what,
                               bool allow_null) {
  if (count > 0 && handles == nullptr)
    fail(MSTEP_INVALID_ARGUMENT, absl::StrCat(what, " is NULL but its count is ", count));
  std::vector<Tensor> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const std::string name = absl::StrCat(what, "[", i, "]");
    if (handles[i] == nullptr && allow_null) {
      out.emplace_back();
      continue;
    }
    check_handle(handles[i], HandleKind::tensor, name.c_str());
    out.push_back(handles[i]->tensor);
  }
  return out;
}

void count_released(mstep_context* context) { --context->live_handles; }

}  // namespace mstep::capi

void mstep_tensor::drop_payload() {
  tensor = mstep::Tensor();
  builder.reset();
}

mstep_device* mstep_context::device_handle(mstep::Device device) {
  for (auto& d : devices)
    if (d->device == device) return d.get();
  devices.push_back(std::make_unique<mstep_device>(mstep_device{device, device.to_string()}));
  return devices.back().get();
}

extern "C" {

int32_t mstep_c_api_version(void) { return MSTEP_C_API_VERSION; }

mstep_status_code mstep_status_code_of(const mstep_status* status) {
  return status ? status->code : MSTEP_OK;
}

const char* mstep_status_message(const mstep_status* status) {
  return status ? status->message.c_str() : "";
}

void mstep_status_free(mstep_status* status) {
  if (status != &mstep::capi::out_of_memory_status) delete status;
}

mstep_status* mstep_status_create(mstep_status_code code, const char* message) {
  return mstep::capi::make_status(code, message ? message : "");
}

size_t mstep_dtype_size(mstep_dtype dtype) {
  const int v = static_cast<int>(dtype);
  if (v < 0 || v >= mstep::kNumDTypes) return 0;
  return mstep::element_size(static_cast<mstep::DType>(v));
}

}  // extern "C"
