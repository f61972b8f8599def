// MSTEP_DUMP_DIR support shared by the runtime's compile path and mstep-opt:
// a pass instrumentation that writes the module before the first pass and
// after every pass. Includes MLIR headers.
#pragma once

#include <string>

#include "mlir/Pass/PassManager.h"

namespace mstep::passes {

/// Makes `pm` write, under `dir` (created if missing):
///   00_<first_name>.mlir   the module before the first pass;
///   NN_<pass-argument>.mlir the module after pass NN (nested passes too).
/// Files that cannot be written are skipped: a dump never fails a compile.
void add_ir_dump(mlir::PassManager& pm, const std::string& dir,
                 const std::string& first_name = "input");

}  // namespace mstep::passes
