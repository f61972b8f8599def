// OpKind: the enum of trace-graph ops, generated from Ops.def.
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"

namespace mstep {

enum class OpKind : uint16_t {
#define MSTEP_OP(name, family) name,
#include "mstep/ir/Ops.def"
};

inline constexpr int kNumOpKinds = 0
#define MSTEP_OP(name, family) +1
#include "mstep/ir/Ops.def"
    ;

enum class OpFamily : uint8_t {
  leaf, creation, unary, binary, ternary, reduction, shape, linalg, nn, loss, fused, custom,
  collective
};

absl::string_view op_name(OpKind op);
OpFamily op_family(OpKind op);

}  // namespace mstep
