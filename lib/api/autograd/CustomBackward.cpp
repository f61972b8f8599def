// The backward of a `custom` node: the one its op's registration gives
// (CustomOpDef::backward), either a function recording the gradients with
// lazy ops (form (a), mstep::backward_function) or another custom op
// called on the inputs and output gradients (form (b), mstep::backward_op).
// Both run, like every formula, with grad mode off, so what they record
// joins the step graph next to the forward.
#include "lib/api/autograd/CustomBackward.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "lib/api/autograd/Formulas.h"
#include "mstep/api/CustomOp.h"
#include "mstep/core/Error.h"
#include "mstep/mstep.h"

namespace mstep {

namespace {

/// The one kind of CustomBackwardFn: a function over lazy tensors.
class LazyCustomBackward final : public CustomBackwardFn {
public:
  static constexpr absl::string_view kKind = "lazy";
  explicit LazyCustomBackward(CustomGradFunction fn) : fn(std::move(fn)) {}
  absl::string_view kind() const override { return kKind; }
  CustomGradFunction fn;
};

/// The backward op `backward` names, or NotFound from the registry.
absl::StatusOr<std::shared_ptr<const CustomOp>> find_backward_op(const CustomBackward& backward) {
  return backward.op_version == 0
             ? CustomOpRegistry::global().find(backward.op)
             : CustomOpRegistry::global().find(backward.op, backward.op_version);
}

} // namespace

CustomBackward backward_function(CustomGradFunction fn) {
  CustomBackward out;
  if (fn) out.fn = std::make_shared<LazyCustomBackward>(std::move(fn));
  return out;
}

CustomBackward backward_op(std::string op, int64_t version) {
  CustomBackward out;
  out.op = std::move(op);
  out.op_version = version;
  return out;
}

namespace autograd {

std::string custom_input_label(const CustomOpSchema& schema, size_t i) {
  const std::string& name = schema.inputs[i].name;
  return name.empty() ? absl::StrCat("input ", i) : absl::StrCat("input ", i, " ('", name, "')");
}

absl::Status check_backward_op(const CustomOp& op) {
  const CustomBackward& backward = *op.backward;
  auto bad = [&](auto&&... parts) {
    return absl::InvalidArgumentError(
        absl::StrCat("its backward op '", backward.op, "' ", parts...));
  };
  absl::StatusOr<std::shared_ptr<const CustomOp>> found = find_backward_op(backward);
  if (!found.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("its backward op is missing: ", found.status().message(),
                     ". Register the backward op before a call whose inputs require grad"));
  const CustomOpSchema& bw = (*found)->schema;
  const size_t inputs = op.schema.inputs.size() + op.schema.num_outputs;
  if (bw.inputs.size() != inputs)
    return bad("takes ", bw.inputs.size(), " inputs; it is called on the ", op.schema.inputs.size(),
               " forward inputs and ", op.schema.num_outputs, " output gradients (", inputs, ")");
  int differentiable = 0;
  for (const CustomInputSpec& in : op.schema.inputs) differentiable += in.differentiable;
  if (bw.num_outputs != differentiable)
    return bad("has ", bw.num_outputs,
               " outputs; it must give one gradient per differentiable input (", differentiable,
               ")");
  for (const CustomAttrSpec& a : op.schema.attrs) {
    auto it = std::find_if(bw.attrs.begin(), bw.attrs.end(),
                           [&](const CustomAttrSpec& b) { return b.name == a.name; });
    if (it == bw.attrs.end() || it->type != a.type)
      return bad("must declare attribute '", a.name, "' of type ", custom_attr_type_name(a.type),
                 ": the forward call passes its attributes on");
  }
  return absl::OkStatus();
}

namespace {

[[noreturn]] void backward_error(const CustomOp& op, absl::string_view problem) {
  throw Error(absl::InvalidArgumentError(
      absl::StrCat("mstep::backward: custom op '", op.label(), "': ", problem)));
}

/// Form (a): the registered function, given zeros for unused outputs.
std::vector<Tensor> run_function(const CustomOp& op, const LazyCustomBackward& backward,
                                 const BackwardContext& c, const std::vector<Tensor>& grads) {
  const CustomAttrView attrs(op.schema.attrs, custom_attr_values(c.attrs));
  const CustomGradContext ctx{c.inputs, c.outputs, grads, attrs, c.needs};
  std::vector<Tensor> out = backward.fn(ctx);
  if (out.size() != c.inputs.size())
    backward_error(op,
                   absl::StrCat("its backward function returned ", out.size(), " gradients for ",
                                c.inputs.size(),
                                " inputs; return one per input (an undefined Tensor for none)"));
  return out;
}

/// Form (b): the backward op on (inputs..., grad_outputs...) with the
/// forward call's attributes; its results go to the differentiable inputs.
std::vector<Tensor> run_op(const CustomOp& op, const CustomBackward& backward,
                           const BackwardContext& c, const std::vector<Tensor>& grads) {
  const CustomAttrView view(op.schema.attrs, custom_attr_values(c.attrs));
  CustomAttrs attrs;
  for (const CustomAttrSpec& spec : op.schema.attrs) {
    absl::StatusOr<CustomAttrValue> value = view.get(spec.name);
    if (!value.ok()) backward_error(op, value.status().message());
    attrs.push_back({spec.name, *std::move(value)});
  }
  std::vector<Tensor> args = c.inputs;
  args.insert(args.end(), grads.begin(), grads.end());
  const std::vector<Tensor> results =
      custom_op(CustomOpRef(backward.op, backward.op_version), args, attrs);
  std::vector<Tensor> out(c.inputs.size());
  size_t next = 0;
  for (size_t i = 0; i < out.size() && next < results.size(); ++i)
    if (op.schema.inputs[i].differentiable) out[i] = results[next++];
  return out;
}

std::vector<Tensor> custom_bw(const BackwardContext& c) {
  const uint64_t id = static_cast<uint64_t>(std::get<int64_t>(c.attrs[0].value));
  absl::StatusOr<std::shared_ptr<const CustomOp>> found = CustomOpRegistry::global().find(id);
  if (!found.ok())
    throw Error(absl::FailedPreconditionError(
        absl::StrCat("mstep::backward: the custom op of this graph is no longer registered: ",
                     found.status().message())));
  const CustomOp& op = **found;
  if (!op.backward) backward_error(op, "has no backward"); // the call refuses this; kept safe
  std::vector<Tensor> grads;
  for (size_t i = 0; i < c.outputs.size(); ++i) grads.push_back(c.grad(i));

  std::vector<Tensor> out;
  if (op.backward->fn) {
    if (op.backward->fn->kind() != LazyCustomBackward::kKind)
      backward_error(op, absl::StrCat("its backward function is of kind '", op.backward->fn->kind(),
                                      "'; make it with mstep::backward_function"));
    out = run_function(op, static_cast<const LazyCustomBackward&>(*op.backward->fn), c, grads);
  } else {
    out = run_op(op, *op.backward, c, grads);
  }
  // A wanted gradient has its input's type and device (the engine adds it
  // to others); a missing one means no gradient, as for built-in ops.
  for (size_t i = 0; i < out.size(); ++i) {
    if (!c.needs_grad(i) || !out[i].defined()) continue;
    if (out[i].type() != c.inputs[i].type() || out[i].device() != c.inputs[i].device())
      backward_error(op, absl::StrCat("its backward gives ", custom_input_label(op.schema, i),
                                      " a gradient ", out[i].type().to_string(), " on ",
                                      out[i].device().to_string(), "; the input is ",
                                      c.inputs[i].type().to_string(), " on ",
                                      c.inputs[i].device().to_string()));
  }
  return out;
}

} // namespace

void register_custom_formulas(FormulaTable& table) {
  table[static_cast<int>(OpKind::custom)] = custom_bw;
}

} // namespace autograd
} // namespace mstep
