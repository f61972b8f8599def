// A plugin whose registration fails: "scaled_softplus" version 1 with
// another schema than lit_custom_ops.cpp gives it (an int attribute), so
// loading both is an error naming this plugin and the conflict. It
// registers through register_custom_op, which throws: MSTEP_PLUGIN reports
// that like a returned error.
#include "mstep/runtime/CustomOp.h"
#include "mstep/runtime/Plugin.h"

namespace {

absl::Status register_conflicting() {
  mstep::register_custom_op({.name = "scaled_softplus",
                             .schema = {.attrs = {{"beta", mstep::CustomAttrType::int64, int64_t{1}}}},
                             .shape_rule = mstep::same_type_as_input(0)});
  return absl::OkStatus();
}

} // namespace

MSTEP_PLUGIN(register_conflicting)
