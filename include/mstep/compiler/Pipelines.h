// The backends' whole compile pipelines as named MLIR pipelines, for
// mstep-opt. Includes no MLIR headers.
#pragma once

namespace mstep {

/// Registers with MLIR's pass registry:
///   mstep-pipeline[=<backend>]           the pipeline mark_step() runs for
///                                        <backend> (default cpu): the
///                                        shared passes, then the backend's
///   mstep-pipeline-unfused[=<backend>]   the same without the fusion passes
/// An unknown backend name is an error that lists the registered ones.
void register_backend_pipelines();

}  // namespace mstep
