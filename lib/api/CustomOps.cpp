// mstep::custom_op: checks a call of a registered custom op against its
// schema and shape rule, then records one `custom` node.
#include "mstep/api/CustomOp.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/api/OpBuilder.h"
#include "lib/api/autograd/CustomBackward.h"
#include "mstep/core/Error.h"

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

/// Input count and dtypes against the schema.
void check_inputs(const CustomOp& op, absl::Span<const Tensor> inputs, absl::string_view api) {
  const CustomOpSchema& schema = op.schema;
  const std::string signature = absl::StrCat("Its schema: ", to_string(schema), ".");
  if (inputs.size() != schema.inputs.size())
    detail::throw_op_error(api,
                           absl::StrCat("takes ", schema.inputs.size(), " inputs, got ",
                                        inputs.size()),
                           describe_all(inputs), signature);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined())
      detail::throw_op_error(api, absl::StrCat("input ", i, " is undefined"), describe_all(inputs),
                             "Pass the result of an op or a creation function.");
    const std::vector<DType>& allowed = schema.inputs[i].dtypes;
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), inputs[i].dtype()) == allowed.end())
      detail::throw_op_error(
          api,
          absl::StrCat(custom_input_label(schema, i), " must be ",
                       absl::StrJoin(allowed, " or ",
                                     [](std::string* out, DType d) { absl::StrAppend(out, dtype_name(d)); }),
                       ", got ", dtype_name(inputs[i].dtype())),
          describe_all(inputs), signature);
  }
}

/// The node attributes of a call: the op's id, then each declared
/// attribute's value (the call's or its default) in declaration order.
AttrList node_attrs(const CustomOp& op, const CustomAttrs& attrs, absl::string_view api,
                    absl::Span<const Tensor> inputs) {
  const CustomOpSchema& schema = op.schema;
  auto fail = [&](absl::string_view problem) {
    detail::throw_op_error(api, problem, describe_all(inputs),
                           absl::StrCat("Its schema: ", to_string(schema), "."));
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
/// its dtype is a floating one).
std::vector<bool> differentiable_inputs(const CustomOp& op, absl::Span<const Tensor> inputs) {
  std::vector<bool> out;
  for (size_t i = 0; i < inputs.size(); ++i)
    out.push_back(op.schema.inputs[i].differentiable && is_floating(inputs[i].dtype()));
  return out;
}

/// When a differentiable input requires grad (grad mode on): the op has a
/// backward, and a backward op fits the op.
void check_backward(const CustomOp& op, absl::Span<const Tensor> inputs,
                    const std::vector<bool>& differentiable, absl::string_view api) {
  if (!grad_enabled()) return;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!differentiable[i] || !inputs[i].requires_grad()) continue;
    if (!op.backward)
      detail::throw_op_error(
          api,
          absl::StrCat("has no backward, but ", custom_input_label(op.schema, i), " requires grad"),
          describe_all(inputs),
          "Register it with a backward (CustomOpDef::backward), or call it on detached inputs or "
          "inside a no-grad scope.");
    if (!op.backward->op.empty())
      if (absl::Status s = autograd::check_backward_op(op); !s.ok())
        detail::throw_op_error(api, s.message(), describe_all(inputs), "");
    return;
  }
}

} // namespace

std::vector<Tensor> custom_op(CustomOpRef ref, absl::Span<const Tensor> inputs,
                              const CustomAttrs& attrs) {
  const std::string api = ref.version == 0
                              ? absl::StrCat("custom_op '", ref.name, "'")
                              : absl::StrCat("custom_op '", ref.name, "' v", ref.version);
  auto found = ref.version == 0 ? CustomOpRegistry::global().find(ref.name)
                                : CustomOpRegistry::global().find(ref.name, ref.version);
  if (!found.ok()) detail::throw_op_error(api, found.status().message(), describe_all(inputs), "");
  const CustomOp& op = **found;
  check_inputs(op, inputs, api);
  const std::vector<bool> differentiable = differentiable_inputs(op, inputs);
  check_backward(op, inputs, differentiable, api);

  AttrList node = node_attrs(op, attrs, api, inputs);
  std::vector<TensorType> input_types;
  for (const Tensor& t : inputs) input_types.push_back(t.type());
  const CustomAttrView view(op.schema.attrs, custom_attr_values(node));
  absl::StatusOr<std::vector<TensorType>> results = op.shape_rule(input_types, view);
  if (!results.ok())
    detail::throw_op_error(
        api, absl::StrCat("its shape rule rejects the inputs: ", results.status().message()),
        describe_all(inputs), "");
  if (results->size() != static_cast<size_t>(op.schema.num_outputs))
    detail::throw_op_error(api,
                           absl::StrCat("its shape rule gave ", results->size(),
                                        " result types; the schema declares ",
                                        op.schema.num_outputs, " outputs"),
                           describe_all(inputs), "Make the rule and the schema agree.");
  for (const CustomAlias& a : op.schema.aliases)
    if ((*results)[a.output] != input_types[a.input])
      detail::throw_op_error(api,
                             absl::StrCat("output ", a.output, " may alias input ", a.input,
                                          ", but the shape rule gives it ",
                                          (*results)[a.output].to_string(), " and the input is ",
                                          input_types[a.input].to_string()),
                             describe_all(inputs), "An aliased output has its input's type.");
  return detail::record_multi(api, OpKind::custom, inputs, std::move(node),
                              ResultTypes(results->begin(), results->end()), differentiable);
}

} // namespace mstep
