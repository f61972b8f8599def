// Names and families of trace ops, generated from Ops.def.
#include "mstep/ir/OpKind.h"

namespace mstep {

absl::string_view op_name(OpKind op) {
  static constexpr absl::string_view kNames[] = {
#define MSTEP_OP(name, family) #name,
#include "mstep/ir/Ops.def"
  };
  return kNames[static_cast<int>(op)];
}

OpFamily op_family(OpKind op) {
  static constexpr OpFamily kFamilies[] = {
#define MSTEP_OP(name, family) OpFamily::family,
#include "mstep/ir/Ops.def"
  };
  return kFamilies[static_cast<int>(op)];
}

}  // namespace mstep
