// mstep.sdpa and mstep.sdpa_backward as StableHLO composites
// ("mstep.sdpa", "mstep.sdpa_backward") whose decompositions are private
// functions of the module: a consumer that knows the composite may match
// it, any other inlines the decomposition (softmax(scale q k^T) v with the
// causal rule and dropout drawn from mstep's Philox stream, and its
// gradient). Library-internal; compiler code only (MLIR headers).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "lib/compiler/stablehlo/StableHloText.h"
#include "mlir/IR/Operation.h"

namespace mstep::stablehlo {

absl::StatusOr<std::vector<Value>> lower_sdpa(FunctionText& f, mlir::Operation* op,
                                              const std::vector<Value>& operands,
                                              const std::vector<Value>& results);
absl::StatusOr<std::vector<Value>> lower_sdpa_backward(FunctionText& f, mlir::Operation* op,
                                                       const std::vector<Value>& operands,
                                                       const std::vector<Value>& results);

}  // namespace mstep::stablehlo
