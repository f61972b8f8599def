// The custom ops the lit tests' modules call (test/ir, test/passes), as a
// plugin that `mstep-opt --load-plugin %custom_ops_plugin` loads: the
// mstep.custom verifier checks each call against these schemas and shape
// rules. Shape rules only: mstep-opt runs no kernel.
//   scaled_softplus   (x: f32|f64) {beta: float = 1} -> x's type
//   split_rows        (x, i) {k: int, dims: int list, out: dtype}
//                     -> two [1, x.dim(1)] of dtype `out`; x must be 2-D
//   giou_loss v2      (pred, target) {reduction: string = "mean",
//                     fast: bool = false} -> a scalar of pred's dtype
//   no_inputs         () -> f32[]
#include "absl/strings/str_cat.h"
#include "mstep/core/Error.h"
#include "mstep/runtime/CustomOp.h"
#include "mstep/runtime/Plugin.h"

namespace {

using namespace mstep;

using Types = absl::StatusOr<std::vector<TensorType>>;

Types split_rows(absl::Span<const TensorType> in, const CustomAttrView& attrs) {
  MSTEP_ASSIGN_OR_RETURN(DType out, attrs.get_dtype("out"));
  if (in[0].shape.rank() != 2)
    return absl::InvalidArgumentError(
        absl::StrCat("x must be 2-D, got ", in[0].shape.to_string()));
  const TensorType row{Shape({1, in[0].shape[1]}), out};
  return std::vector<TensorType>{row, row};
}

Types scalar_of_first(absl::Span<const TensorType> in, const CustomAttrView&) {
  return std::vector<TensorType>{TensorType{Shape({}), in[0].dtype}};
}

Types f32_scalar(absl::Span<const TensorType>, const CustomAttrView&) {
  return std::vector<TensorType>{TensorType{Shape({}), DType::f32}};
}

absl::Status register_lit_ops() {
  CustomOpRegistry& registry = CustomOpRegistry::global();
  MSTEP_RETURN_IF_ERROR(registry.add(
      {.name = "scaled_softplus",
       .schema = {.inputs = {{"x", {DType::f32, DType::f64}}},
                  .attrs = {{"beta", CustomAttrType::float64, 1.0}}},
       .shape_rule = same_type_as_input(0)}));
  MSTEP_RETURN_IF_ERROR(registry.add(
      {.name = "split_rows",
       .schema = {.inputs = {{"x", {}}, {"i", {}}},
                  .attrs = {{"k", CustomAttrType::int64},
                            {"dims", CustomAttrType::int_list},
                            {"out", CustomAttrType::dtype}},
                  .num_outputs = 2},
       .shape_rule = split_rows}));
  MSTEP_RETURN_IF_ERROR(registry.add(
      {.name = "giou_loss",
       .version = 2,
       .schema = {.inputs = {{"pred", {}}, {"target", {}}},
                  .attrs = {{"reduction", CustomAttrType::string, std::string("mean")},
                            {"fast", CustomAttrType::boolean, false}}},
       .shape_rule = scalar_of_first}));
  return registry.add({.name = "no_inputs", .shape_rule = f32_scalar});
}

} // namespace

MSTEP_PLUGIN(register_lit_ops)
