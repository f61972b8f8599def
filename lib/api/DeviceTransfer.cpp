// Tensor::to(Device) and in-place moves (see lib/api/DeviceTransfer.h).
#include "lib/api/DeviceTransfer.h"

#include <algorithm>
#include <cstddef>
#include <map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/GradFn.h"
#include "mstep/runtime/Graph.h"
#include "mstep/runtime/Tracer.h"

namespace mstep {

namespace detail {
namespace {

/// The backend of `device`, or an error naming the move that needs it.
Backend& backend_of(absl::string_view api, Device device, absl::string_view what) {
  auto backend = BackendRegistry::get(device.type);
  if (!backend.ok())
    throw_op_error(api, absl::StrCat("cannot move to ", device.to_string()),
                   absl::StrCat(what, ": ", backend.status().message()),
                   "Pick a device whose backend is built in.");
  return **backend;
}

/// Refuses a copy inside a capture: replay would not repeat it, so the
/// graph would keep reading the value copied at capture.
void refuse_in_capture(absl::string_view api, absl::string_view what, Device from, Device to) {
  if (is_capturing())
    throw_op_error(api, "cannot move tensors between devices inside a Graph capture",
                   absl::StrCat(what, " on ", from.to_string(), ", target ", to.to_string()),
                   "Move before capture_begin() (replay does not repeat the copy), then "
                   "capture on the new device.");
}

/// A new buffer on `device` holding materialized `t`'s value.
BufferPtr copy_buffer(absl::string_view api, const Tensor& t, Device device,
                      absl::string_view what) {
  Backend& to = backend_of(api, device, what);
  std::vector<std::byte> host = host_bytes(t);
  BufferPtr buffer = value_or_throw(to.allocate(t.type()));
  throw_if_error(to.copy_in(*buffer, host.data(), host.size()));
  return buffer;
}

}  // namespace

void move_in_place(absl::string_view api,
                   const std::vector<std::pair<std::string, Tensor>>& tensors, Device device) {
  // The tensors to move, each once, with the gradients of those that have one.
  std::vector<std::pair<std::string, Tensor>> moving;
  std::unordered_set<const TensorImpl*> seen;
  auto add = [&](const std::string& name, const Tensor& t) {
    if (t.defined() && t.device() != device && seen.insert(t.impl()).second)
      moving.emplace_back(name, t);
  };
  for (const auto& [name, t] : tensors) {
    add(name, t);
    if (t.defined() && t.device() != device) add(name + ".grad", t.grad());
  }
  if (moving.empty()) return;
  backend_of(api, device, moving.front().first);
  refuse_in_capture(api, moving.front().first, moving.front().second.device(), device);

  // Compute what is pending, one graph per source device.
  std::map<std::pair<int, int>, std::vector<TensorImpl*>> pending;
  for (const auto& [name, t] : moving)
    if (t.is_pending())
      pending[{static_cast<int>(t.device().type), t.device().index}].push_back(t.impl());
  for (auto& [key, impls] : pending) throw_if_error(Tracer::get().sync(impls));

  std::vector<BufferPtr> buffers;
  for (const auto& [name, t] : moving) buffers.push_back(copy_buffer(api, t, device, name));
  for (size_t i = 0; i < moving.size(); ++i)
    moving[i].second.impl()->move_to(device, std::move(buffers[i]));
}

}  // namespace detail

Tensor Tensor::to(Device device) const {
  const std::string what = defined() ? detail::describe(*this) : "an undefined tensor";
  if (!defined())
    detail::throw_op_error("Tensor::to", "the tensor is undefined", "",
                           "Assign it the result of an op first.");
  if (impl_->device() == device) return *this;
  detail::refuse_in_capture("Tensor::to", what, impl_->device(), device);
  // The copy is not an op autograd records: a gradient could not flow back
  // through it to what this tensor was computed from.
  if (requires_grad() && !is_leaf())
    detail::throw_op_error("Tensor::to",
                           "a tensor computed from ones that require grad cannot change device: "
                           "the copy is not differentiable",
                           absl::StrCat(what, " from ", grad_fn_name(), ", target ",
                                        device.to_string()),
                           "Move the leaves (parameters, inputs) before computing, or detach() "
                           "it first.");
  auto impl = TensorImpl::make(type(), device);
  impl->set_buffer(detail::copy_buffer("Tensor::to", *this, device, what));
  impl->set_input_role(impl_->input_role());
  Tensor out(std::move(impl));
  if (requires_grad()) out.requires_grad_();
  return out;
}

}  // namespace mstep
