// The backends' whole compile pipelines as named MLIR pipelines, for
// mstep-opt. Includes no MLIR headers.
#pragma once

#include "mstep/runtime/Options.h"

namespace mstep {

/// Registers with MLIR's pass registry:
///   mstep-pipeline[=<backend>]           the pipeline mark_step() runs for
///                                        <backend> (default cpu): the
///                                        shared passes, then the backend's
///   mstep-pipeline-unfused[=<backend>]   the same without the fusion passes
/// An unknown backend name is an error that lists the registered ones.
/// The backends' own passes are built as `runtime` says when a pipeline is
/// parsed (e.g. xla_memory_limit), so `runtime` must outlive the parsing;
/// the caller may change it until then (mstep-opt's flags).
void register_backend_pipelines(const RuntimeOptions& runtime);

}  // namespace mstep
