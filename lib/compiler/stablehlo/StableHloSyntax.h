// StableHLO in: the pretty op syntax (`stablehlo.add %a, %b : tensor<4xf32>`,
// what `jax.jit(f).lower(...).as_text()` prints) read without the StableHLO
// library. A shell `stablehlo` dialect is loaded into the import's context:
// it registers no op, but hands MLIR's parser one hook per supported op that
// reads that op's pretty form into the same unregistered operation, with
// the same attributes, that the generic form gives (its dialect attributes
// as opaque text). So the op table (StableHloImportOps.h) sees one form.
// An op it has no hook for is a parse error at the op naming it.
// Library-internal; compiler code only (MLIR headers).
#pragma once

#include "mlir/IR/MLIRContext.h"

namespace mstep::stablehlo {

/// Loads the shell dialect into `context` (which then parses both forms).
void load_stablehlo_syntax(mlir::MLIRContext& context);

}  // namespace mstep::stablehlo
