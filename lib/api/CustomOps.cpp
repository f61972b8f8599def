// mstep::custom_op: checks a call of a registered custom op against its
// schema and shape rule, then records one `custom` node.
#include "mstep/api/CustomOp.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <iterator>
#include <memory>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/CustomBackward.h"
#include "lib/api/autograd/GradFn.h"
#include "lib/runtime/CustomOpGeneration.h"
#include "mstep/core/Error.h"
#include "mstep/core/FreeListPool.h"
#include "mstep/runtime/Runtime.h"

namespace mstep {

using detail::describe;

namespace {

/// "f32[2, 3], i64[4]" (or "no inputs").
std::string describe_all(absl::Span<const Tensor> inputs) {
  if (inputs.empty()) return "no inputs";
  return absl::StrJoin(inputs, ", ",
                       [](std::string* out, const Tensor& t) { out->append(describe(t)); });
}

using autograd::custom_input_label;

/// How messages name a call: "custom_op 'name'", or "custom_op 'name' v3"
/// when the caller asked for a version. Built only when a message needs it:
/// the call path itself formats no strings (it is traced per call, see
/// bench/custom_op_trace_bench).
class CallName {
public:
  explicit CallName(const CustomOpRef& ref) : ref_(ref) {}
  std::string str() const {
    return ref_.version == 0 ? absl::StrCat("custom_op '", ref_.name, "'")
                             : absl::StrCat("custom_op '", ref_.name, "' v", ref_.version);
  }

private:
  const CustomOpRef& ref_;
};

/// The op a call means, from the global registry. The last few ops this
/// thread called are kept, by the name and version the caller gave, while
/// the registry is unchanged (custom_op_registry_generation): the tracing
/// hot path then takes no lock and hashes no name.
std::shared_ptr<const CustomOp> lookup(const CustomOpRef& ref, const CallName& api,
                                       absl::Span<const Tensor> inputs) {
  struct Entry {
    std::string name;
    int64_t version = 0;
    uint64_t generation = 0; // 0: empty
    std::shared_ptr<const CustomOp> op;
  };
  constexpr size_t kEntries = 4;
  thread_local std::array<Entry, kEntries> cache;
  thread_local size_t next = 0; // the entry to replace
  const uint64_t generation = custom_op_registry_generation();
  for (const Entry& e : cache)
    if (e.generation == generation && e.version == ref.version && e.name == ref.name) return e.op;
  auto found = ref.version == 0 ? CustomOpRegistry::global().find(ref.name)
                                : CustomOpRegistry::global().find(ref.name, ref.version);
  if (!found.ok())
    detail::throw_op_error(api.str(), found.status().message(), describe_all(inputs), "");
  Entry& e = cache[next];
  next = (next + 1) % kEntries;
  e.name.assign(ref.name.data(), ref.name.size());
  e.version = ref.version;
  e.generation = generation;
  e.op = *std::move(found);
  return e.op;
}

/// "Its schema: (...) -> 1 output." (the hint of the schema's errors)
std::string schema_hint(const CustomOpSchema& schema) {
  return absl::StrCat("Its schema: ", to_string(schema), ".");
}

/// Input count and dtypes against the schema.
void check_inputs(const CustomOp& op, absl::Span<const Tensor> inputs, const CallName& api) {
  const CustomOpSchema& schema = op.schema;
  if (inputs.size() != schema.inputs.size())
    detail::throw_op_error(api.str(),
                           absl::StrCat("takes ", schema.inputs.size(), " inputs, got ",
                                        inputs.size()),
                           describe_all(inputs), schema_hint(schema));
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      detail::throw_op_error(api.str(), absl::StrCat("input ", i, " is undefined"),
                             describe_all(inputs),
                             "Pass the result of an op or a creation function.");
    const std::vector<DType>& allowed = schema.inputs[i].dtypes;
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), inputs[i].dtype()) == allowed.end())
      detail::throw_op_error(
          api.str(),
          absl::StrCat(custom_input_label(schema, i), " must be ",
                       absl::StrJoin(allowed, " or ",
                                     [](std::string* out, DType d) { absl::StrAppend(out, dtype_name(d)); }),
                       ", got ", dtype_name(inputs[i].dtype())),
          describe_all(inputs), schema_hint(schema));
  }
}

/// The node attributes of a call: the op's id, then each declared
/// attribute's value (the call's or its default) in declaration order.
AttrList node_attrs(const CustomOp& op, const CustomAttrs& attrs, const CallName& api,
                    absl::Span<const Tensor> inputs) {
  const CustomOpSchema& schema = op.schema;
  auto fail = [&](absl::string_view problem) {
    detail::throw_op_error(api.str(), problem, describe_all(inputs), schema_hint(schema));
  };
  auto spec_of = [&](absl::string_view name) -> const CustomAttrSpec* {
    for (const CustomAttrSpec& s : schema.attrs)
      if (s.name == name) return &s;
    return nullptr;
  };
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (spec_of(attrs[i].name) == nullptr)
      fail(absl::StrCat("has no attribute '", attrs[i].name, "'"));
    for (size_t j = 0; j < i; ++j)
      if (attrs[j].name == attrs[i].name)
        fail(absl::StrCat("attribute '", attrs[i].name, "' is given twice"));
  }
  AttrList out;
  out.push_back({AttrName::custom_op, static_cast<int64_t>(op.id)});
  for (const CustomAttrSpec& spec : schema.attrs) {
    auto it = std::find_if(attrs.begin(), attrs.end(),
                           [&](const CustomAttr& a) { return a.name == spec.name; });
    if (it == attrs.end() && !spec.default_value)
      fail(absl::StrCat("attribute '", spec.name, "' is missing (it has no default)"));
    absl::StatusOr<AttrValue> value =
        encode_custom_attr(spec, it != attrs.end() ? it->value : *spec.default_value);
    if (!value.ok()) fail(value.status().message());
    out.push_back({AttrName::custom_attr, *std::move(value)});
  }
  return out;
}

/// Per input: whether a gradient may flow into it (the schema allows it and
/// its dtype is a floating one). Empty (record_multi's "every input") when
/// no gradient is recorded: grad mode is off or no input requires grad.
std::vector<bool> differentiable_inputs(const CustomOp& op, absl::Span<const Tensor> inputs) {
  std::vector<bool> out;
  if (!grad_enabled() || !autograd::any_requires_grad(inputs)) return out;
  for (size_t i = 0; i < inputs.size(); ++i)
    out.push_back(op.schema.inputs[i].differentiable && is_floating(inputs[i].dtype()));
  return out;
}

/// When a differentiable input requires grad (grad mode on): the op has a
/// backward, and a backward op fits the op.
void check_backward(const CustomOp& op, absl::Span<const Tensor> inputs,
                    const std::vector<bool>& differentiable, const CallName& api) {
  for (size_t i = 0; i < differentiable.size(); ++i) {
    if (!differentiable[i] || !inputs[i].requires_grad()) continue;
    if (!op.backward)
      detail::throw_op_error(
          api.str(),
          absl::StrCat("has no backward, but ", custom_input_label(op.schema, i), " requires grad"),
          describe_all(inputs),
          "Register it with a backward (CustomOpDef::backward), or call it on detached inputs or "
          "inside a no-grad scope.");
    if (!op.backward->op.empty())
      if (absl::Status s = autograd::check_backward_op(op); !s.ok())
        detail::throw_op_error(api.str(), s.message(), describe_all(inputs), "");
    return;
  }
}

/// What a call's schema checks and shape rule gave for its input types and
/// attributes (see CustomCallSite).
struct Prepared {
  AttrList node;
  std::vector<TensorType> results;
};

/// custom_op; when `keep` is given it gets what the checks established once
/// they all passed.
std::vector<Tensor> call_custom_op(CustomOpRef ref, absl::Span<const Tensor> inputs,
                                   const CustomAttrs& attrs, Prepared* keep) {
  const CallName api(ref);
  const std::shared_ptr<const CustomOp> found = lookup(ref, api, inputs);
  const CustomOp& op = *found;
  check_inputs(op, inputs, api);
  const std::vector<bool> differentiable = differentiable_inputs(op, inputs);
  check_backward(op, inputs, differentiable, api);

  AttrList node = node_attrs(op, attrs, api, inputs);
  absl::InlinedVector<TensorType, 4> input_types;
  for (const Tensor& t : inputs) input_types.push_back(t.type());
  const CustomAttrView view(op.schema.attrs, custom_attr_values(node));
  absl::StatusOr<std::vector<TensorType>> results = op.shape_rule(input_types, view);
  if (!results.ok())
    detail::throw_op_error(
        api.str(), absl::StrCat("its shape rule rejects the inputs: ", results.status().message()),
        describe_all(inputs), "");
  if (results->size() != static_cast<size_t>(op.schema.num_outputs))
    detail::throw_op_error(api.str(),
                           absl::StrCat("its shape rule gave ", results->size(),
                                        " result types; the schema declares ",
                                        op.schema.num_outputs, " outputs"),
                           describe_all(inputs), "Make the rule and the schema agree.");
  for (const CustomAlias& a : op.schema.aliases)
    if ((*results)[a.output] != input_types[a.input])
      detail::throw_op_error(api.str(),
                             absl::StrCat("output ", a.output, " may alias input ", a.input,
                                          ", but the shape rule gives it ",
                                          (*results)[a.output].to_string(), " and the input is ",
                                          input_types[a.input].to_string()),
                             describe_all(inputs), "An aliased output has its input's type.");
  if (keep != nullptr) *keep = {node, *results};
  // The inputs' common device. Only here can they differ: the call is then
  // named (record_multi's check).
  const bool one_device = std::all_of(inputs.begin(), inputs.end(), [&](const Tensor& t) {
    return t.device() == inputs.front().device();
  });
  if (one_device && results->size() == 1 && differentiable.empty()) {
    // The common case, without autograd: one result, recorded like a
    // built-in op's.
    Operands operands;
    for (const Tensor& t : inputs) operands.push_back(t.impl()->as_operand());
    const Device device = inputs.empty() ? default_device() : inputs.front().device();
    std::vector<Tensor> out;
    out.reserve(1);
    out.push_back(detail::record_values(OpKind::custom, std::move(operands), std::move(node),
                                        std::move(results->front()), device));
    return out;
  }
  return detail::record_multi(one_device ? std::string() : api.str(), OpKind::custom, inputs,
                              std::move(node),
                              ResultTypes(std::make_move_iterator(results->begin()),
                                          std::make_move_iterator(results->end())),
                              differentiable);
}

/// What a thread keeps of its last call through a CustomCallSite: the
/// input types and attributes, and the node attributes and result type the
/// checks and the shape rule gave for them. The nodes of kept calls share
/// the attributes (no copy per call; their hashes are computed once).
struct SiteMemo {
  uint64_t site = 0; // 0: empty
  uint64_t generation = 0;
  absl::InlinedVector<TensorType, 4> input_types;
  CustomAttrs attrs;
  std::shared_ptr<const SharedAttrs> node;
  TensorType result;
};

/// Equal call attributes; doubles compare by their bits (a rule may tell
/// -0.0 from 0.0).
bool same_attrs(const CustomAttrs& a, const CustomAttrs& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].name != b[i].name || a[i].value.index() != b[i].value.index()) return false;
    if (const auto* x = std::get_if<double>(&a[i].value)) {
      const double y = std::get<double>(b[i].value);
      if (std::memcmp(x, &y, sizeof y) != 0) return false;
    } else if (a[i].value != b[i].value) {
      return false;
    }
  }
  return true;
}

constexpr size_t kSiteMemos = 4;
struct SiteMemos {
  std::array<SiteMemo, kSiteMemos> entries;
  size_t next = 0; // the entry to replace
};
/// This thread's memos: made on its first call through a site, kept for
/// the thread's life (a plain pointer: no TLS guard on the hot path).
MSTEP_FAST_TLS SiteMemos* site_memos = nullptr;
MSTEP_FAST_TLS bool site_memos_gone = false; // the thread is exiting

/// This thread's memos, or null once its thread-local objects are being
/// destroyed (a call from a thread-exit destructor then takes the full path).
SiteMemos* thread_site_memos() {
  if (site_memos == nullptr && !site_memos_gone) {
    struct Owner {
      std::unique_ptr<SiteMemos> memos = std::make_unique<SiteMemos>();
      ~Owner() {
        site_memos = nullptr;
        site_memos_gone = true;
      }
    };
    thread_local Owner owner;
    site_memos = owner.memos.get();
  }
  return site_memos;
}

} // namespace

std::vector<Tensor> custom_op(CustomOpRef ref, absl::Span<const Tensor> inputs,
                              const CustomAttrs& attrs) {
  return call_custom_op(ref, inputs, attrs, nullptr);
}

namespace detail {

CustomCallSite::CustomCallSite(std::string name, int64_t version)
    : name_(std::move(name)), version_(version) {
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id.fetch_add(1, std::memory_order_relaxed);
}

Tensor CustomCallSite::call1(absl::Span<const Tensor> inputs, const CustomAttrs& attrs) const {
  const uint64_t generation = custom_op_registry_generation();
  SiteMemos* memos = thread_site_memos();
  if (memos == nullptr) return call(inputs, attrs).at(0);
  const SiteMemo* m = nullptr;
  for (const SiteMemo& e : memos->entries)
    if (e.site == id_) m = &e;
  if (m != nullptr && m->generation == generation && inputs.size() == m->input_types.size() &&
      same_attrs(m->attrs, attrs)) {
    // A kept call if every input is defined and has the kept type. What the
    // types do not decide is checked here: one device, and no autograd to
    // record (else the full path, which also checks the backward).
    Device device = inputs.empty() ? default_device() : Device{};
    Operands operands;
    bool kept = true;
    for (size_t i = 0; i < inputs.size() && kept; ++i) {
      const Tensor& t = inputs[i];
      kept = t.defined() && t.type() == m->input_types[i];
      if (!kept) break;
      const Device d = t.device();
      if (i == 0) device = d;
      kept = d == device && !needs_autograd(t);
      if (kept) operands.push_back(t.impl()->as_operand());
    }
    if (kept)
      return record_values_shared(OpKind::custom, std::move(operands), m->node, m->result,
                                  device);
  }
  Prepared kept;
  std::vector<Tensor> out = call_custom_op(CustomOpRef(name_, version_), inputs, attrs, &kept);
  if (kept.results.size() == 1) {
    // Remember (after the call: a shape rule may itself call ops).
    SiteMemo* slot = nullptr;
    for (SiteMemo& e : memos->entries)
      if (e.site == id_) slot = &e;
    if (slot == nullptr) {
      slot = &memos->entries[memos->next];
      memos->next = (memos->next + 1) % kSiteMemos;
    }
    slot->site = id_;
    slot->generation = generation;
    slot->input_types.clear();
    for (const Tensor& t : inputs) slot->input_types.push_back(t.type());
    slot->attrs = attrs;
    slot->node = std::make_shared<const SharedAttrs>(std::move(kept.node));
    slot->result = std::move(kept.results.front());
  }
  return out.at(0);
}

} // namespace detail
} // namespace mstep
