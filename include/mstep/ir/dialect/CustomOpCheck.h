// The hook through which the `mstep.custom` verifier checks a call against
// the op registered in the process (its name and version, input count and
// dtypes, attributes, and the result types its shape rule gives). The
// dialect knows no registry (the runtime owns it): libmstep_compiler
// installs the check when it loads (lib/ir/import/CustomOpCheck.cpp), so
// every tool and program that parses or compiles modules has it. Where
// none is installed (the fuzzer's copy of the dialect), the verifier checks
// the op's form only.
#pragma once

#include "llvm/Support/LogicalResult.h"

namespace mstep::dialect {

class CustomOp;

/// Emits its own located errors on `op` and returns failure(), or success().
/// Must be safe to call from several threads (verifiers run in parallel).
using CustomOpChecker = llvm::LogicalResult (*)(CustomOp op);

/// Installs `checker` for every later verification (null: none).
void set_custom_op_checker(CustomOpChecker checker);

} // namespace mstep::dialect
