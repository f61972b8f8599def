// One mstep op as StableHLO text: the op table of the exporter.
// Library-internal; compiler code only (MLIR headers).
#pragma once

#include <vector>

#include "absl/status/statusor.h"
#include "lib/compiler/stablehlo/StableHloText.h"
#include "mlir/IR/Operation.h"

namespace mstep::stablehlo {

/// Writes `op` into `f`, given the values of its operands and the shapes
/// and element types of its results (`results[i].name` is empty), and
/// returns its results' values. Unimplemented naming the op when it has
/// no StableHLO form here (the caller adds the location).
absl::StatusOr<std::vector<Value>> lower_op(FunctionText& f, mlir::Operation* op,
                                            const std::vector<Value>& operands,
                                            const std::vector<Value>& results);

}  // namespace mstep::stablehlo
