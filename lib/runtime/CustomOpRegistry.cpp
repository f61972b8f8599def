// The custom-op registry (mstep/runtime/CustomOp.h): ops by name and by id
// behind one mutex, each published as an immutable shared CustomOp.
#include <algorithm>
#include <mutex>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"
#include "mstep/core/Hash.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

// ---- CustomAttrView ----

const AttrValue* CustomAttrView::find(absl::string_view name) const {
  for (size_t i = 0; i < names_.size() && i < values_.size(); ++i)
    if (names_[i] == name) return &values_[i].value;
  return nullptr;
}

namespace {

template <typename T>
absl::StatusOr<T> get_as(const CustomAttrView& view, absl::string_view name,
                         absl::string_view type_name) {
  const AttrValue* v = view.find(name);
  if (v == nullptr)
    return absl::InvalidArgumentError(absl::StrCat("the op declares no attribute '", name, "'"));
  if (const T* t = std::get_if<T>(v)) return *t;
  if constexpr (std::is_same_v<T, double>)
    if (const int64_t* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' is not ", type_name));
}

} // namespace

absl::StatusOr<int64_t> CustomAttrView::get_int(absl::string_view name) const {
  return get_as<int64_t>(*this, name, "an int");
}
absl::StatusOr<double> CustomAttrView::get_double(absl::string_view name) const {
  return get_as<double>(*this, name, "a number");
}
absl::StatusOr<IntList> CustomAttrView::get_ints(absl::string_view name) const {
  return get_as<IntList>(*this, name, "an int list");
}
absl::StatusOr<DType> CustomAttrView::get_dtype(absl::string_view name) const {
  return get_as<DType>(*this, name, "a dtype");
}

// ---- CustomOp ----

const CustomKernel* CustomOp::kernel(absl::string_view backend) const {
  for (const auto& [name, k] : kernels)
    if (name == backend) return k.get();
  return nullptr;
}

uint64_t custom_op_id(absl::string_view name) {
  // Salted so an id never equals the hash of a plain string elsewhere.
  return hash_combine(hash_string("mstep.custom"), hash_string(name));
}

// ---- CustomOpRegistry ----

struct CustomOpRegistry::State {
  mutable std::mutex mutex; // guards both maps
  absl::flat_hash_map<std::string, std::shared_ptr<const CustomOp>> by_name;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const CustomOp>> by_id;

  std::string names() const {
    std::vector<std::string> out;
    for (const auto& [name, op] : by_name) out.push_back(name);
    std::sort(out.begin(), out.end());
    return out.empty() ? "none" : absl::StrJoin(out, ", ");
  }
  void publish(std::shared_ptr<const CustomOp> op) {
    by_id[op->id] = op;
    by_name[op->name] = std::move(op);
  }
};

CustomOpRegistry::CustomOpRegistry() : state_(std::make_unique<State>()) {}
CustomOpRegistry::~CustomOpRegistry() = default;

CustomOpRegistry& CustomOpRegistry::global() {
  static CustomOpRegistry registry;
  return registry;
}

namespace {

absl::Status check_kernel(absl::string_view op, absl::string_view backend,
                          const std::shared_ptr<const CustomKernel>& kernel) {
  if (backend.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("custom op '", op, "': a kernel has an empty backend name"));
  if (!kernel)
    return absl::InvalidArgumentError(
        absl::StrCat("custom op '", op, "': the kernel for backend '", backend, "' is null"));
  return absl::OkStatus();
}

} // namespace

absl::Status CustomOpRegistry::add(CustomOpDef def) {
  const std::string& name = def.name;
  if (name.empty()) return absl::InvalidArgumentError("a custom op needs a name");
  if (!def.shape_rule)
    return absl::InvalidArgumentError(
        absl::StrCat("custom op '", name, "' has no shape rule; give CustomOpDef::shape_rule"));
  for (size_t i = 0; i < def.attr_names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (def.attr_names[i] == def.attr_names[j])
        return absl::InvalidArgumentError(absl::StrCat(
            "custom op '", name, "' declares attribute '", def.attr_names[i], "' twice"));
  for (size_t i = 0; i < def.kernels.size(); ++i) {
    MSTEP_RETURN_IF_ERROR(check_kernel(name, def.kernels[i].first, def.kernels[i].second));
    for (size_t j = 0; j < i; ++j)
      if (def.kernels[i].first == def.kernels[j].first)
        return absl::InvalidArgumentError(absl::StrCat(
            "custom op '", name, "' has two kernels for backend '", def.kernels[i].first, "'"));
  }
  auto op = std::make_shared<CustomOp>();
  op->name = name;
  op->id = custom_op_id(name);
  op->attr_names = std::move(def.attr_names);
  op->shape_rule = std::move(def.shape_rule);
  op->kernels = std::move(def.kernels);

  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->by_name.contains(name))
    return absl::AlreadyExistsError(absl::StrCat(
        "custom op '", name, "' is already registered; each name is registered once per process"));
  if (auto it = state_->by_id.find(op->id); it != state_->by_id.end())
    return absl::AlreadyExistsError(absl::StrCat("custom op '", name, "' has the id of '",
                                                 it->second->name, "'; rename one of them"));
  state_->publish(std::move(op));
  return absl::OkStatus();
}

absl::Status CustomOpRegistry::add_kernel(absl::string_view name, absl::string_view backend,
                                          std::shared_ptr<const CustomKernel> kernel) {
  MSTEP_RETURN_IF_ERROR(check_kernel(name, backend, kernel));
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->by_name.find(name);
  if (it == state_->by_name.end())
    return absl::NotFoundError(absl::StrCat("no custom op '", name, "' to add a '", backend,
                                            "' kernel to; registered: ", state_->names()));
  if (it->second->kernel(backend) != nullptr)
    return absl::AlreadyExistsError(
        absl::StrCat("custom op '", name, "' already has a kernel for backend '", backend, "'"));
  // Copy on write: lookups that already hold the old version keep it.
  auto op = std::make_shared<CustomOp>(*it->second);
  op->kernels.emplace_back(std::string(backend), std::move(kernel));
  state_->publish(std::move(op));
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const CustomOp>>
CustomOpRegistry::find(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->by_name.find(name);
  if (it == state_->by_name.end())
    return absl::NotFoundError(absl::StrCat("no custom op named '", name,
                                            "' is registered (registered: ", state_->names(),
                                            "); register it with mstep::register_custom_op first"));
  return it->second;
}

absl::StatusOr<std::shared_ptr<const CustomOp>> CustomOpRegistry::find(uint64_t id) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->by_id.find(id);
  if (it == state_->by_id.end())
    return absl::NotFoundError(absl::StrCat("no custom op with id ", id,
                                            " is registered (registered: ", state_->names(), ")"));
  return it->second;
}

void register_custom_op(CustomOpDef def) {
  throw_if_error(CustomOpRegistry::global().add(std::move(def)));
}

} // namespace mstep
