// The mstep compile pipeline: the passes a trace graph goes through between
// import and a backend, in order. Includes MLIR headers.
#pragma once

#include "mlir/Pass/PassManager.h"

namespace mstep::passes {

struct PipelineOptions {
  /// Run the fusion passes (attention, optimizer, elementwise). Off, the
  /// module keeps one op per trace node: the unfused reference.
  bool fuse = true;
  /// Plan the arena (mstep-plan-memory).
  bool plan_memory = true;
};

/// Adds, to a module-level pass manager:
///   canonicalize, cse,
///   [mstep-fuse-attention, mstep-fuse-optimizer, canonicalize, cse,
///    mstep-fuse-elementwise,]               (with options.fuse)
///   [mstep-plan-memory,]                     (with options.plan_memory)
///   [mstep-verify-backend-contract]          (with options.fuse: the
///                                             contract assumes fused form)
void build_pipeline(mlir::OpPassManager& pm, const PipelineOptions& options = {});

/// Registers `mstep-pipeline` (fused) and `mstep-pipeline-unfused` with
/// MLIR's pass registry, for mstep-opt's --pass-pipeline and flags.
void register_pipelines();

}  // namespace mstep::passes
