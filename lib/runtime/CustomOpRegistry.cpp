// The custom-op registry (mstep/runtime/CustomOp.h): ops by name (every
// version, oldest first) and by id behind one mutex, each published as an
// immutable shared CustomOp; and the typed attribute values of the schema.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mstep/core/Error.h"
#include "mstep/core/Hash.h"
#include "lib/runtime/CustomOpGeneration.h"
#include "mstep/runtime/CustomOp.h"

namespace mstep {

// ---- attribute types and values ----

absl::string_view custom_attr_type_name(CustomAttrType type) {
  switch (type) {
    case CustomAttrType::int64: return "int";
    case CustomAttrType::float64: return "float";
    case CustomAttrType::boolean: return "bool";
    case CustomAttrType::int_list: return "int list";
    case CustomAttrType::string: return "string";
    case CustomAttrType::dtype: return "dtype";
  }
  return "?";
}

namespace {

/// The type a value holds (an int is an int here; encode converts it).
CustomAttrType type_of(const CustomAttrValue& v) {
  constexpr CustomAttrType kTypes[] = {CustomAttrType::int64,    CustomAttrType::float64,
                                       CustomAttrType::boolean,  CustomAttrType::int_list,
                                       CustomAttrType::string,   CustomAttrType::dtype};
  return kTypes[v.index()];
}

std::string value_to_string(const CustomAttrValue& v) {
  struct Print {
    std::string operator()(int64_t x) const { return absl::StrCat(x); }
    std::string operator()(double x) const { return absl::StrCat(x); }
    std::string operator()(bool x) const { return x ? "true" : "false"; }
    std::string operator()(const IntList& x) const {
      return absl::StrCat("[", absl::StrJoin(x, ", "), "]");
    }
    std::string operator()(const std::string& x) const { return absl::StrCat("\"", x, "\""); }
    std::string operator()(DType x) const { return std::string(dtype_name(x)); }
  };
  return std::visit(Print{}, v);
}

// A string travels in the trace as an int list: its length, then its bytes
// eight to an int64 (the trace's AttrValue, shared with every built-in op,
// has no string; the op's schema says which lists are strings).
IntList pack_string(absl::string_view s) {
  IntList out{static_cast<int64_t>(s.size())};
  for (size_t i = 0; i < s.size(); i += 8) {
    uint64_t word = 0;
    std::memcpy(&word, s.data() + i, std::min<size_t>(8, s.size() - i));
    out.push_back(static_cast<int64_t>(word));
  }
  return out;
}

std::optional<std::string> unpack_string(const IntList& packed) {
  if (packed.empty() || packed[0] < 0) return std::nullopt;
  const auto size = static_cast<size_t>(packed[0]);
  if (packed.size() != 1 + (size + 7) / 8) return std::nullopt;
  std::string out(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    const auto word = static_cast<uint64_t>(packed[1 + i / 8]);
    std::memcpy(out.data() + i, &word, std::min<size_t>(8, size - i));
  }
  return out;
}

} // namespace

absl::StatusOr<AttrValue> encode_custom_attr(const CustomAttrSpec& spec,
                                             const CustomAttrValue& value) {
  const CustomAttrType given = type_of(value);
  if (given == spec.type || (spec.type == CustomAttrType::float64 && given == CustomAttrType::int64)) {
    switch (spec.type) {
      case CustomAttrType::int64: return AttrValue(std::get<int64_t>(value));
      case CustomAttrType::float64:
        if (const auto* i = std::get_if<int64_t>(&value)) return AttrValue(static_cast<double>(*i));
        return AttrValue(std::get<double>(value));
      case CustomAttrType::boolean: return AttrValue(int64_t{std::get<bool>(value) ? 1 : 0});
      case CustomAttrType::int_list: return AttrValue(std::get<IntList>(value));
      case CustomAttrType::string: return AttrValue(pack_string(std::get<std::string>(value)));
      case CustomAttrType::dtype: return AttrValue(std::get<DType>(value));
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "attribute '", spec.name, "' has type ", custom_attr_type_name(spec.type), "; the value ",
      value_to_string(value), " has type ", custom_attr_type_name(given)));
}

absl::StatusOr<CustomAttrValue> decode_custom_attr(const CustomAttrSpec& spec,
                                                   const AttrValue& stored) {
  const int64_t* i = std::get_if<int64_t>(&stored);
  const IntList* l = std::get_if<IntList>(&stored);
  switch (spec.type) {
    case CustomAttrType::int64:
      if (i) return CustomAttrValue(*i);
      break;
    case CustomAttrType::float64:
      if (const double* d = std::get_if<double>(&stored)) return CustomAttrValue(*d);
      break;
    case CustomAttrType::boolean:
      if (i && (*i == 0 || *i == 1)) return CustomAttrValue(*i == 1);
      break;
    case CustomAttrType::int_list:
      if (l) return CustomAttrValue(*l);
      break;
    case CustomAttrType::string:
      if (l)
        if (std::optional<std::string> s = unpack_string(*l)) return CustomAttrValue(*std::move(s));
      break;
    case CustomAttrType::dtype:
      if (const DType* d = std::get_if<DType>(&stored)) return CustomAttrValue(*d);
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("the stored value of attribute '", spec.name,
                                                 "' does not have type ",
                                                 custom_attr_type_name(spec.type)));
}

CustomShapeRule same_type_as_input(size_t index) {
  return [index](absl::Span<const TensorType> inputs,
                 const CustomAttrView&) -> absl::StatusOr<std::vector<TensorType>> {
    if (index >= inputs.size())
      return absl::InvalidArgumentError(absl::StrCat("the result has the type of input ", index,
                                                     ", but the call has ", inputs.size(),
                                                     " inputs"));
    return std::vector<TensorType>{inputs[index]};
  };
}

std::string to_string(const CustomOpSchema& schema) {
  std::vector<std::string> inputs, attrs;
  for (size_t i = 0; i < schema.inputs.size(); ++i) {
    const CustomInputSpec& in = schema.inputs[i];
    std::string s = in.name.empty() ? absl::StrCat("input ", i) : in.name;
    if (!in.dtypes.empty())
      absl::StrAppend(&s, ": ", absl::StrJoin(in.dtypes, "|", [](std::string* out, DType d) {
                        absl::StrAppend(out, dtype_name(d));
                      }));
    if (!in.differentiable) s += " (no grad)";
    inputs.push_back(std::move(s));
  }
  for (const CustomAttrSpec& a : schema.attrs) {
    std::string s = absl::StrCat(a.name, ": ", custom_attr_type_name(a.type));
    if (a.default_value) absl::StrAppend(&s, " = ", value_to_string(*a.default_value));
    attrs.push_back(std::move(s));
  }
  std::string out = absl::StrCat("(", absl::StrJoin(inputs, ", "), ") {", absl::StrJoin(attrs, ", "),
                                 "} -> ", schema.num_outputs,
                                 schema.num_outputs == 1 ? " output" : " outputs");
  for (const CustomAlias& a : schema.aliases)
    absl::StrAppend(&out, ", output ", a.output, " may alias input ", a.input);
  if (!schema.deterministic) out += ", not deterministic";
  if (schema.scalar_form) absl::StrAppend(&out, ", scalar form ", schema.scalar_form->to_string());
  return out;
}

// ---- CustomAttrView ----

bool CustomAttrView::has(absl::string_view name) const {
  for (const CustomAttrSpec& s : specs_)
    if (s.name == name) return true;
  return false;
}

absl::StatusOr<CustomAttrValue> CustomAttrView::get(absl::string_view name) const {
  for (size_t i = 0; i < specs_.size() && i < values_.size(); ++i)
    if (specs_[i].name == name) return decode_custom_attr(specs_[i], values_[i].value);
  return absl::InvalidArgumentError(absl::StrCat("the op declares no attribute '", name, "'"));
}

namespace {

template <typename T>
absl::StatusOr<T> get_as(const CustomAttrView& view, absl::string_view name,
                         absl::string_view type_name) {
  MSTEP_ASSIGN_OR_RETURN(CustomAttrValue v, view.get(name));
  if (T* t = std::get_if<T>(&v)) return std::move(*t);
  if constexpr (std::is_same_v<T, double>)
    if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "' is not ", type_name));
}

} // namespace

absl::StatusOr<int64_t> CustomAttrView::get_int(absl::string_view name) const {
  return get_as<int64_t>(*this, name, "an int");
}
absl::StatusOr<double> CustomAttrView::get_double(absl::string_view name) const {
  return get_as<double>(*this, name, "a number");
}
absl::StatusOr<bool> CustomAttrView::get_bool(absl::string_view name) const {
  return get_as<bool>(*this, name, "a bool");
}
absl::StatusOr<IntList> CustomAttrView::get_ints(absl::string_view name) const {
  return get_as<IntList>(*this, name, "an int list");
}
absl::StatusOr<std::string> CustomAttrView::get_string(absl::string_view name) const {
  return get_as<std::string>(*this, name, "a string");
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

std::string CustomOp::label() const {
  return version == 1 ? name : absl::StrCat(name, " v", version);
}

uint64_t custom_op_id(absl::string_view name, int64_t version) {
  // Salted so an id never equals the hash of a plain string elsewhere.
  return hash_combine(hash_combine(hash_string("mstep.custom"), hash_string(name)),
                      static_cast<uint64_t>(version));
}

uint64_t custom_op_id(absl::string_view name, int64_t version, const CustomOpSchema& schema) {
  const uint64_t id = custom_op_id(name, version);
  return schema.scalar_form ? hash_combine(id, schema.scalar_form->fingerprint()) : id;
}

// ---- CustomOpRegistry ----

namespace {
/// custom_op_registry_generation(): bumped after each change, under the
/// changed registry's lock.
std::atomic<uint64_t> g_generation{1};
} // namespace

uint64_t custom_op_registry_generation() { return g_generation.load(std::memory_order_acquire); }

struct CustomOpRegistry::State {
  mutable std::mutex mutex; // guards both maps
  // Every version of a name, oldest first.
  absl::flat_hash_map<std::string, std::vector<std::shared_ptr<const CustomOp>>> by_name;
  absl::flat_hash_map<uint64_t, std::shared_ptr<const CustomOp>> by_id;

  std::string names() const {
    std::vector<std::string> out;
    for (const auto& [name, versions] : by_name)
      for (const auto& op : versions) out.push_back(op->label());
    std::sort(out.begin(), out.end());
    return out.empty() ? "none" : absl::StrJoin(out, ", ");
  }
  /// Adds `op` or replaces the entry of its version.
  void publish(std::shared_ptr<const CustomOp> op) {
    by_id[op->id] = op;
    auto& versions = by_name[op->name];
    auto it = std::find_if(versions.begin(), versions.end(),
                           [&](const auto& v) { return v->version >= op->version; });
    if (it != versions.end() && (*it)->version == op->version)
      *it = std::move(op);
    else
      versions.insert(it, std::move(op));
    g_generation.fetch_add(1, std::memory_order_release);
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

absl::Status check_schema(absl::string_view op, const CustomOpSchema& schema) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat("custom op '", op, "' ", parts...));
  };
  if (schema.num_outputs < 1) return bad("declares ", schema.num_outputs, " outputs; it needs one at least");
  for (size_t i = 0; i < schema.inputs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (!schema.inputs[i].name.empty() && schema.inputs[i].name == schema.inputs[j].name)
        return bad("declares input '", schema.inputs[i].name, "' twice");
  for (size_t i = 0; i < schema.attrs.size(); ++i) {
    const CustomAttrSpec& a = schema.attrs[i];
    if (a.name.empty()) return bad("declares an attribute without a name");
    for (size_t j = 0; j < i; ++j)
      if (a.name == schema.attrs[j].name) return bad("declares attribute '", a.name, "' twice");
    if (a.default_value) {
      absl::Status s = encode_custom_attr(a, *a.default_value).status();
      if (!s.ok()) return bad("has a bad default: ", s.message());
    }
  }
  for (size_t i = 0; i < schema.aliases.size(); ++i) {
    const CustomAlias& a = schema.aliases[i];
    if (a.output < 0 || a.output >= schema.num_outputs || a.input < 0 ||
        a.input >= static_cast<int>(schema.inputs.size()))
      return bad("declares that output ", a.output, " may alias input ", a.input, ", but it has ",
                 schema.num_outputs, " outputs and ", schema.inputs.size(), " inputs");
    for (size_t j = 0; j < i; ++j)
      if (a.output == schema.aliases[j].output || a.input == schema.aliases[j].input)
        return bad("declares two aliases for output ", a.output, " or input ", a.input,
                   "; each output and input may alias one other at most");
  }
  return absl::OkStatus();
}

/// Exactly one form of backward, and a valid version for the op form.
absl::Status check_backward(absl::string_view op, const CustomBackward& backward) {
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("custom op '", op, "': its backward ", parts...));
  };
  if (backward.fn && !backward.op.empty())
    return bad("has both a function and an op ('", backward.op, "'); give one of them");
  if (!backward.fn && backward.op.empty())
    return bad("is empty; give mstep::backward_function(fn) or mstep::backward_op(name)");
  if (backward.op_version < 0)
    return bad("op '", backward.op, "' has version ", backward.op_version,
               "; versions start at 1 (0: the newest)");
  return absl::OkStatus();
}

} // namespace

absl::Status CustomOpRegistry::add(CustomOpDef def) {
  const std::string& name = def.name;
  if (name.empty()) return absl::InvalidArgumentError("a custom op needs a name");
  if (def.version < 1)
    return absl::InvalidArgumentError(absl::StrCat("custom op '", name, "' has version ",
                                                   def.version, "; versions start at 1"));
  if (!def.shape_rule)
    return absl::InvalidArgumentError(
        absl::StrCat("custom op '", name, "' has no shape rule; give CustomOpDef::shape_rule"));
  MSTEP_RETURN_IF_ERROR(check_schema(name, def.schema));
  MSTEP_RETURN_IF_ERROR(check_scalar_form(name, def.schema));
  for (size_t i = 0; i < def.kernels.size(); ++i) {
    MSTEP_RETURN_IF_ERROR(check_kernel(name, def.kernels[i].first, def.kernels[i].second));
    for (size_t j = 0; j < i; ++j)
      if (def.kernels[i].first == def.kernels[j].first)
        return absl::InvalidArgumentError(absl::StrCat(
            "custom op '", name, "' has two kernels for backend '", def.kernels[i].first, "'"));
  }
  if (def.backward) MSTEP_RETURN_IF_ERROR(check_backward(name, *def.backward));
  auto op = std::make_shared<CustomOp>();
  op->name = name;
  op->version = def.version;
  op->id = custom_op_id(name, def.version, def.schema);
  op->schema = std::move(def.schema);
  op->shape_rule = std::move(def.shape_rule);
  op->kernels = std::move(def.kernels);
  op->backward = std::move(def.backward);

  std::lock_guard<std::mutex> lock(state_->mutex);
  // The same name and version again: found by name, since the id also
  // depends on the scalar form.
  if (auto it = state_->by_name.find(name); it != state_->by_name.end())
    for (const auto& registered : it->second) {
      const CustomOp& old = *registered;
      if (old.version != op->version) continue;
      // The same op again (a plugin loaded twice): the first one stays.
      if (old.schema == op->schema) return absl::OkStatus();
      return absl::AlreadyExistsError(absl::StrCat(
          "custom op '", name, "' version ", op->version,
          " is already registered with another schema (registered: ", to_string(old.schema),
          "; new: ", to_string(op->schema), "). Give the changed op a new version"));
    }
  if (auto it = state_->by_id.find(op->id); it != state_->by_id.end())
    return absl::AlreadyExistsError(absl::StrCat("custom op '", op->label(), "' has the id of '",
                                                 it->second->label(), "'; rename one of them"));
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
  const CustomOp& newest = *it->second.back();
  if (newest.kernel(backend) != nullptr)
    return absl::AlreadyExistsError(absl::StrCat("custom op '", newest.label(),
                                                 "' already has a kernel for backend '", backend,
                                                 "'"));
  // Copy on write: lookups that already hold the old copy keep it.
  auto op = std::make_shared<CustomOp>(newest);
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
  return it->second.back();
}

absl::StatusOr<std::shared_ptr<const CustomOp>>
CustomOpRegistry::find(absl::string_view name, int64_t version) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->by_name.find(name);
  if (it != state_->by_name.end())
    for (const auto& op : it->second)
      if (op->version == version) return op;
  return absl::NotFoundError(absl::StrCat("custom op '", name, "' version ", version,
                                          " is not registered (registered: ", state_->names(),
                                          ")"));
}

absl::StatusOr<std::shared_ptr<const CustomOp>> CustomOpRegistry::find(uint64_t id) const {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->by_id.find(id);
  if (it == state_->by_id.end())
    return absl::NotFoundError(absl::StrCat("no custom op with id ", id,
                                            " is registered (registered: ", state_->names(), ")"));
  return it->second;
}

void CustomOpRegistry::remove_for_testing(absl::string_view name) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  auto it = state_->by_name.find(name);
  if (it == state_->by_name.end()) return;
  for (const auto& op : it->second) state_->by_id.erase(op->id);
  state_->by_name.erase(it);
  g_generation.fetch_add(1, std::memory_order_release);
}

void register_custom_op(CustomOpDef def) {
  throw_if_error(CustomOpRegistry::global().add(std::move(def)));
}

} // namespace mstep
