// mstep::custom_op: checks a call of a registered custom op against its
// declaration and shape rule, then records one `custom` node.
#include "mstep/api/CustomOp.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "lib/api/OpBuilder.h"
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

/// The node attributes of a call: the op's id, then each declared
/// attribute's value in declaration order.
AttrList node_attrs(const CustomOp& op, const CustomAttrs& attrs, absl::string_view api,
                    absl::Span<const Tensor> inputs) {
  auto fail = [&](const std::string& problem) {
    detail::throw_op_error(api, problem, describe_all(inputs),
                           absl::StrCat("It declares: ",
                                        op.attr_names.empty() ? std::string("no attributes")
                                                              : absl::StrJoin(op.attr_names, ", "),
                                        "."));
  };
  for (size_t i = 0; i < attrs.size(); ++i) {
    if (std::find(op.attr_names.begin(), op.attr_names.end(), attrs[i].name) == op.attr_names.end())
      fail(absl::StrCat("has no attribute '", attrs[i].name, "'"));
    for (size_t j = 0; j < i; ++j)
      if (attrs[j].name == attrs[i].name)
        fail(absl::StrCat("attribute '", attrs[i].name, "' is given twice"));
  }
  AttrList out;
  out.push_back({AttrName::custom_op, static_cast<int64_t>(op.id)});
  for (const std::string& name : op.attr_names) {
    auto it = std::find_if(attrs.begin(), attrs.end(),
                           [&](const CustomAttr& a) { return a.name == name; });
    if (it == attrs.end()) fail(absl::StrCat("attribute '", name, "' is missing"));
    out.push_back({AttrName::custom_attr, it->value});
  }
  return out;
}

} // namespace

std::vector<Tensor> custom_op(absl::string_view name, absl::Span<const Tensor> inputs,
                              const CustomAttrs& attrs) {
  const std::string api = absl::StrCat("custom_op '", name, "'");
  auto found = CustomOpRegistry::global().find(name);
  if (!found.ok()) detail::throw_op_error(api, found.status().message(), describe_all(inputs), "");
  const CustomOp& op = **found;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!inputs[i].defined())
      detail::throw_op_error(api, absl::StrCat("input ", i, " is undefined"), describe_all(inputs),
                             "Pass the result of an op or a creation function.");
  if (grad_enabled())
    for (const Tensor& t : inputs)
      if (t.requires_grad())
        detail::throw_op_error(api, "has no backward, but an input requires grad",
                               describe_all(inputs),
                               "Call it on detached inputs or inside a no-grad scope.");

  AttrList node = node_attrs(op, attrs, api, inputs);
  std::vector<TensorType> input_types;
  for (const Tensor& t : inputs) input_types.push_back(t.type());
  const CustomAttrView view(op.attr_names, custom_attr_values(node));
  absl::StatusOr<std::vector<TensorType>> results = op.shape_rule(input_types, view);
  if (!results.ok())
    detail::throw_op_error(
        api, absl::StrCat("its shape rule rejects the inputs: ", results.status().message()),
        describe_all(inputs), "");
  if (results->empty())
    detail::throw_op_error(api, "its shape rule gave no results", describe_all(inputs),
                           "A custom op returns at least one tensor.");
  return detail::record_multi(api, OpKind::custom, inputs, std::move(node),
                              ResultTypes(results->begin(), results->end()));
}

} // namespace mstep
